"""Where the VLA node gets its action chunks: one interface, three backends (issue 18).

- ``base``: the ``PolicyBackend`` interface (``name``, ``cameras``, ``reset``, ``act_chunk``,
  ``close``), the remote limits (``RemoteLimits``) and the check every answer passes.
- ``local``: our own trained VLA in this process (imports torch; import it from
  ``lang2policy.vla.backends.local``, or let ``open_backend("local")`` do it).
- ``openpi``: an openpi policy server (websocket + msgpack-numpy, action chunks).
- ``openvla``: an OpenVLA-style REST server (``POST /act`` + json-numpy).
- ``select``: ``backend: local | openpi://HOST:PORT | openvla://HOST:PORT`` to a backend.
- ``wire``, ``http_call``, ``observation``: the encodings, the bounded HTTP exchange and the
  observation checks the remote backends share.

Every failure of ``act_chunk`` is a ``PolicyBackendError`` (``lang2policy.errors``): a remote
backend never hangs past its timeouts and never returns part of an answer.
"""

from lang2policy.vla.backends.base import (
    ACTION_NAMES,
    PolicyBackend,
    RemoteLimits,
    validate_chunk,
)
from lang2policy.vla.backends.openpi import OpenPIBackend, OpenPIKeys
from lang2policy.vla.backends.openvla import OpenVLABackend
from lang2policy.vla.backends.select import BackendSpec, open_backend, parse_backend

__all__ = [
    "ACTION_NAMES",
    "BackendSpec",
    "OpenPIBackend",
    "OpenPIKeys",
    "OpenVLABackend",
    "PolicyBackend",
    "RemoteLimits",
    "open_backend",
    "parse_backend",
    "validate_chunk",
]
