"""One bounded HTTP/1.1 exchange with a policy server (standard library only).

A socket timeout alone bounds each read, not the request: a server that sends one byte every
second would keep a caller waiting for minutes. Here a watchdog shuts the socket down when
the request's deadline passes, so ``exchange`` returns or raises within about
``connect_s + request_s``. An answer is read only up to ``max_answer_bytes``: a larger
``Content-Length`` is refused before the body is read, and a body without one is cut off at
the first byte over the limit.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from dataclasses import dataclass

from lang2policy.errors import PolicyBackendError
from lang2policy.vla.backends.base import RemoteLimits

_READ_BLOCK = 1 << 16


@dataclass(frozen=True)
class Answer:
    """An HTTP answer read whole: its status, content type and body."""

    status: int
    content_type: str
    body: bytes


class Watchdog:
    """Shuts ``sock`` down after ``seconds`` unless cancelled; ``fired`` says whether it did."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self.fired = False
        self._sock = sock
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        # Wakes a blocked send or recv at once; an OSError means it is closed already.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def exchange(
    host: str,
    port: int,
    method: str,
    path: str,
    body: bytes | None,
    limits: RemoteLimits,
    source: str,
) -> Answer:
    """Send one request and read its answer whole; ``PolicyBackendError`` when the server
    cannot be reached, is too slow, breaks the connection or answers too much."""
    connection = http.client.HTTPConnection(host, port, timeout=limits.connect_s)
    try:
        connection.connect()
    except OSError as exc:
        connection.close()
        raise PolicyBackendError(
            f"{source}: cannot connect within {limits.connect_s:g} s ({exc}); is the policy "
            "server running and listening there?"
        ) from exc
    connection.sock.settimeout(limits.request_s)
    watchdog = Watchdog(connection.sock, limits.request_s)
    late = f"{source}: no complete answer within {limits.request_s:g} s (request timeout)"
    try:
        answer = _request(connection, method, path, body, limits, source)
    except (OSError, http.client.HTTPException) as exc:
        if watchdog.fired or isinstance(exc, TimeoutError):
            raise PolicyBackendError(late) from exc
        raise PolicyBackendError(f"{source}: the connection broke ({exc!r})") from exc
    finally:
        watchdog.cancel()
        connection.close()
    if watchdog.fired:  # the shutdown may end a body without a length like a normal close
        raise PolicyBackendError(late)
    return answer


def _request(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | None,
    limits: RemoteLimits,
    source: str,
) -> Answer:
    """The exchange itself, on a connected ``connection``."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    limit = limits.max_answer_bytes
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise PolicyBackendError(
            f"{source}: the answer is {int(declared)} bytes (Content-Length); at most {limit} "
            "bytes are accepted (max_answer_bytes)"
        )
    chunks, size = [], 0
    while block := response.read(min(_READ_BLOCK, limit + 1 - size)):
        chunks.append(block)
        size += len(block)
        if size > limit:
            raise PolicyBackendError(
                f"{source}: the answer is over {limit} bytes; at most {limit} bytes are "
                "accepted (max_answer_bytes)"
            )
    content_type = response.getheader("Content-Type") or ""
    return Answer(response.status, content_type, b"".join(chunks))
