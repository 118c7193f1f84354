"""Our checkpoint served over openpi's protocol (``vla-serve --checkpoint``), asked by our own
openpi client: the shipped model, a real websocket server on loopback, real torch."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.errors import ConfigError, PolicyBackendError
from lang2policy.vla.backends import RemoteLimits
from lang2policy.vla.backends.local import LocalBackend
from lang2policy.vla.backends.openpi import OpenPIBackend, OpenPIKeys
from lang2policy.vla.backends.openpi_server import PolicyServer, ServedModel
from lang2policy.vla.backends.wire import pack_msgpack

pytestmark = pytest.mark.timeout(120)

INSTRUCTION = "put the red block in the blue bowl"
STATE = np.array([0.0, -0.3, 0.4, 0.9, 0.0, 0.5], np.float32)
LIMITS = RemoteLimits(connect_s=5.0, request_s=10.0)


@pytest.fixture(scope="module")
def shipped():
    backend = LocalBackend.load()
    backend.policy.warm_up()  # as vla-serve does before it listens: the first run takes seconds
    return backend


@pytest.fixture
def policy_server(shipped):
    model = ServedModel(shipped, shipped.image_size, "vla-so101-tiny")
    running = PolicyServer(model, "127.0.0.1", 0, log=lambda line: None).start()
    yield running
    running.close()


def frame(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def client(policy_server, image_size: int = 224) -> OpenPIBackend:
    keys = OpenPIKeys(images={"front": "observation/image"}, image_size=image_size)
    return OpenPIBackend("127.0.0.1", policy_server.port, keys=keys, limits=LIMITS)


def test_the_served_model_answers_what_it_answers_in_process(policy_server, shipped):
    image = frame(shipped.image_size)
    remote = client(policy_server, image_size=shipped.image_size)  # sent at the model's own size
    served = remote.act_chunk({"front": image}, STATE, INSTRUCTION)
    assert remote.metadata["policy"] == "vla-so101-tiny"
    assert remote.metadata["image_size"] == shipped.image_size
    shipped.reset()
    expected = shipped.act_chunk({"front": image}, STATE, INSTRUCTION)
    np.testing.assert_array_equal(served, expected)
    remote.close()


def test_images_padded_to_openpis_224_come_back_at_the_models_size(policy_server, shipped):
    remote = client(policy_server)  # openpi's default: 224 x 224 with padding
    chunk = remote.act_chunk({"front": frame(shipped.image_size, 1)}, STATE, INSTRUCTION)
    assert chunk.shape == (shipped.policy.config.chunk, 6) and np.isfinite(chunk).all()
    remote.check_health()  # GET /healthz on the same port
    remote.close()


def test_each_connection_is_a_new_episode(policy_server, shipped):
    remote = client(policy_server, image_size=shipped.image_size)
    remote.act_chunk({"front": frame(shipped.image_size)}, STATE, INSTRUCTION)
    assert shipped.has_looked  # the scene latch holds this episode's scene
    remote.reset()  # a new skill: the client reconnects, the server resets the policy
    remote.connect()
    assert not shipped.has_looked
    remote.close()


def test_one_client_at_a_time_and_a_bad_observation_is_refused(policy_server, shipped):
    first = client(policy_server, image_size=shipped.image_size)
    first.connect()
    with pytest.raises(PolicyBackendError, match="closed before the metadata frame"):
        client(policy_server).connect()
    first.close()
    hostile = client(policy_server, image_size=shipped.image_size)
    hostile.connect()
    connection = hostile._connection
    assert connection is not None
    connection.send(pack_msgpack({"observation/image": "not an image"}))
    reason = connection.recv(timeout=5.0)  # openpi's way: a text frame, then close 1011
    assert isinstance(reason, str) and "the observation lacks ['observation/state'" in reason
    with pytest.raises(PolicyBackendError, match="server failed instead of sending its answer"):
        hostile._binary(reason, "answer")
    hostile.close()
    again = client(policy_server, image_size=shipped.image_size)  # the server still serves
    assert again.act_chunk({"front": frame(shipped.image_size)}, STATE, INSTRUCTION).shape[1] == 6
    again.close()


def test_a_server_that_is_gone_is_reported_by_name(policy_server, shipped):
    remote = client(policy_server, image_size=shipped.image_size)
    remote.act_chunk({"front": frame(shipped.image_size)}, STATE, INSTRUCTION)
    policy_server.close()
    with pytest.raises(PolicyBackendError, match=rf"openpi://127\.0\.0\.1:{policy_server.port}"):
        remote.act_chunk({"front": frame(shipped.image_size)}, STATE, INSTRUCTION)


def test_it_listens_on_loopback_unless_told(shipped):
    model = ServedModel(shipped, shipped.image_size, "vla-so101-tiny")
    with pytest.raises(ConfigError, match="loopback unless --allow-remote"):
        PolicyServer(model, "0.0.0.0", 0)
