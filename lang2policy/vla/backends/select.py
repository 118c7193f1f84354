"""Choose a backend from its one-line setting: ``backend: local | openpi://HOST:PORT |
openvla://HOST:PORT | lerobot://HOST:PORT``.

``parse_backend`` checks the text alone (no connection, no model load), so a config file can
be validated at start-up; ``open_backend`` builds the backend. Anything else is a
``ConfigError`` that says what was given and lists the valid forms.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from pathlib import Path

from lang2policy.errors import ConfigError
from lang2policy.vla.backends.base import PolicyBackend, RemoteLimits
from lang2policy.vla.backends.openpi import OpenPIBackend, OpenPIKeys
from lang2policy.vla.backends.openvla import OpenVLABackend

LOCAL = "local"
REMOTE_KINDS = ("openpi", "openvla", "lerobot")
FORMS = (
    "'local', 'openpi://HOST:PORT', 'openvla://HOST:PORT' or 'lerobot://HOST:PORT' "
    "(e.g. 'openpi://127.0.0.1:8000')"
)
_ADDRESS = re.compile(r"(?P<host>\[[^\[\]/]*\]|[^\[\]:/]*):(?P<port>[0-9]{1,5})/?")
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class BackendSpec:
    """A parsed backend setting: ``kind`` is "local", "openpi", "openvla" or "lerobot"; a
    remote one has its server's ``host`` (an IPv6 address without brackets) and ``port``."""

    kind: str
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.kind == LOCAL:
            return LOCAL
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.kind}://{host}:{self.port}"


def parse_backend(text: object) -> BackendSpec:
    """The backend ``text`` names; ``ConfigError`` with the valid forms for anything else."""
    if not isinstance(text, str):
        raise ConfigError(f"backend must be a string, one of {FORMS}; got {type(text).__name__}")
    stripped = text.strip()
    if stripped.lower() == LOCAL:
        return BackendSpec(LOCAL)
    scheme, separator, rest = stripped.partition("://")
    if not separator:
        raise ConfigError(f"unknown backend {text!r:.80}; expected {FORMS}")
    kind = scheme.lower()
    if kind not in REMOTE_KINDS:
        raise ConfigError(
            f"unknown backend scheme {scheme!r:.40}:// in {text!r:.80}; expected {FORMS}"
        )
    match = _ADDRESS.fullmatch(rest)
    if match is None:
        raise ConfigError(
            f"backend {text!r:.80}: expected {kind}://HOST:PORT, nothing else (no user, path "
            f"or query; the port is required, e.g. {kind}://127.0.0.1:8000)"
        )
    host, port = _host(match["host"], text), int(match["port"])
    if not 1 <= port <= 65535:
        raise ConfigError(f"backend {text!r:.80}: port {port} is not in 1..65535")
    return BackendSpec(kind, host, port)


def _host(host: str, text: str) -> str:
    """A host name, an IPv4 address, or a bracketed IPv6 address (returned without brackets)."""
    if host.startswith("["):
        try:
            return str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError as exc:
            raise ConfigError(f"backend {text!r:.80}: {host} is not an IPv6 address") from exc
    labels = host.rstrip(".").split(".")
    numeric = all(label.isdigit() for label in labels)
    if (
        not host
        or len(host) > 253
        or not all(_LABEL.fullmatch(label) for label in labels)
        or (numeric and not _is_ipv4(host))
    ):
        raise ConfigError(
            f"backend {text!r:.80}: {host!r:.60} is not a host name or an IPv4 address"
        )
    return host


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def open_backend(
    setting: str | BackendSpec,
    *,
    model_dir: Path | str | None = None,
    limits: RemoteLimits | None = None,
    openpi_keys: OpenPIKeys | None = None,
    openvla_camera: str = "front",
    unnorm_key: str | None = None,
    lerobot: LeRobotOptions | None = None,
) -> PolicyBackend:
    """The backend ``setting`` names, built but not connected (a remote one connects on its
    first request). ``model_dir``: the local model (default: the shipped one); ``limits``:
    the remote timeouts and answer size; ``openpi_keys``: the openpi observation keys;
    ``openvla_camera`` and ``unnorm_key``: what an OpenVLA server is sent; ``lerobot``: the
    policy a LeRobot server is asked to load."""
    spec = setting if isinstance(setting, BackendSpec) else parse_backend(setting)
    if spec.kind == LOCAL:
        from lang2policy.vla.backends.local import LocalBackend  # torch: only when chosen

        return LocalBackend.load(model_dir)
    if spec.kind == "openpi":
        return OpenPIBackend(spec.host, spec.port, keys=openpi_keys, limits=limits)
    if spec.kind == "openvla":
        return OpenVLABackend(
            spec.host, spec.port, camera=openvla_camera, unnorm_key=unnorm_key, limits=limits
        )
    if spec.kind == "lerobot":
        return open_lerobot(spec.host, spec.port, lerobot, limits)
    raise ConfigError(f"unknown backend kind {spec.kind!r}; expected {FORMS}")


@dataclass(frozen=True)
class LeRobotOptions:
    """What a ``lerobot://`` backend asks the server to run (the VLA node's ``lerobot_*``
    parameters): the checkpoint (required; its type and cameras are read from it unless
    ``policy_type`` is given, for a checkpoint only the server can see), the arm's
    calibration when the policy speaks LeRobot's units, and the rest of the setup."""

    checkpoint: str = ""
    policy_type: str = ""
    calibration: str = ""
    device: str = "cpu"
    actions_per_chunk: int = 10
    cameras: tuple[str, ...] = ()
    load_s: float = 120.0
    allow_remote: bool = False
    fps: int = 0  # the policy's training rate; 0: from its dataset when this machine has it


def open_lerobot(
    host: str, port: int, options: LeRobotOptions | None, limits: RemoteLimits | None
) -> PolicyBackend:
    """A ``LeRobotBackend`` for ``options``; ``ConfigError`` when no checkpoint is named."""
    from lang2policy.vla.backends.lerobot_policy import LeRobotPolicySpec
    from lang2policy.vla.backends.lerobot_server import LeRobotBackend

    options = options or LeRobotOptions()
    if not options.checkpoint:
        raise ConfigError(
            "a lerobot:// backend needs the policy's checkpoint (lerobot_checkpoint:=DIR, the "
            "pretrained_model directory lerobot-train wrote); `lang2policy vla-serve --lerobot "
            "DIR` prints the parameters"
        )
    chosen = dict(device=options.device, actions_per_chunk=options.actions_per_chunk,
                  calibration=options.calibration or None)  # fmt: skip
    if options.fps:
        chosen["fps"] = options.fps
    if options.policy_type:
        spec = LeRobotPolicySpec(options.policy_type, options.checkpoint,
                                 cameras=options.cameras or ("front",), **chosen)  # fmt: skip
    else:
        spec = LeRobotPolicySpec.from_checkpoint(options.checkpoint, **chosen)
        if options.cameras:
            spec = replace(spec, cameras=options.cameras)
    return LeRobotBackend(host, port, spec, limits=limits, load_s=options.load_s,
                          allow_remote=options.allow_remote)  # fmt: skip
