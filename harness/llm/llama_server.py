"""The embedded server's process: ``python -m gapbench.llm.llama_server ARGS`` runs ``python -m llama_cpp.server
ARGS`` (llama-cpp-python's OpenAI-compatible server) with two additions.

- A watchdog ends the process when its stdin pipe closes (the gapbench process that started it died, however), so
  the server is never an orphan.
- A request whose client hung up stops generating. llama-cpp-python answers a non-streamed chat request in a worker
  thread that runs to ``max_tokens`` whatever happened to the connection, and it serves one request at a time: a
  request the client gave up on (its time bound passed; the client shuts the connection down) would hold the model
  for minutes while the next request waits. Here an ASGI wrapper watches each POST's connection once its body is
  read, and a logits processor added to every chat completion leaves the end-of-generation token as the only choice
  once that connection is gone, so generation ends at the next token.

Only the embedded server gets this; llama.cpp's own ``llama-server`` stops a request whose connection closed by itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import runpy
import sys
import threading
from typing import Any

_GONE: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("gapbench_client_gone", default=None)


class EndWhenGone:
    """ASGI wrapper: for each POST, an event set when its client disconnects, visible to the request's worker thread
    through :data:`_GONE` (the thread runs in a copy of the request's context)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        gone = threading.Event()
        _GONE.set(gone)
        watcher: asyncio.Future | None = None

        async def watch() -> dict:
            message = await receive()  # once the body is read, the next message is the disconnect
            if message.get("type") == "http.disconnect":
                gone.set()
            return message

        async def app_receive() -> dict:
            nonlocal watcher
            if watcher is not None:  # the body was read: the app polls for a disconnect, which the watcher awaits
                return await asyncio.shield(watcher)
            message = await receive()
            if message.get("type") == "http.request" and not message.get("more_body"):
                watcher = asyncio.ensure_future(watch())
            elif message.get("type") == "http.disconnect":
                gone.set()
            return message

        try:
            await self.app(scope, app_receive, send)
        finally:
            if watcher is not None and not watcher.done():
                watcher.cancel()


def end_when_gone(create_chat_completion: Any) -> Any:
    """``Llama.create_chat_completion`` with a logits processor that, once the request's client is gone, leaves only
    the end-of-generation token (the generation loop stops at it, as at any end of an answer)."""
    import numpy as np
    from llama_cpp import LogitsProcessorList

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        gone = _GONE.get()
        if gone is not None:
            eos = self.token_eos()
            # the request's logit_bias is applied here: llama-cpp-python drops both its own bias processor and the
            # ones given when it has both (list.extend's None becomes the processor list)
            bias = {int(k): float(v) for k, v in (kwargs.pop("logit_bias", None) or {}).items()}

            def stop_if_gone(input_ids: Any, scores: Any) -> Any:
                if gone.is_set():
                    scores = np.full_like(scores, -np.inf)
                    scores[eos] = 0.0
                elif bias:
                    scores = scores.copy()
                    for token, value in bias.items():
                        scores[token] += value
                return scores

            kwargs["logits_processor"] = LogitsProcessorList([*(kwargs.get("logits_processor") or []), stop_if_gone])
        return create_chat_completion(self, *args, **kwargs)

    return wrapped


def _watchdog() -> None:
    os.read(0, 1)  # a raw read: blocks until the parent writes or its end of the pipe closes
    os._exit(0)


def main() -> None:
    # A daemon thread inside sys.stdin's buffered reader would make the interpreter abort at exit, hiding the server's
    # own error: hence the raw read above.
    threading.Thread(target=_watchdog, daemon=True).start()
    import llama_cpp
    import llama_cpp.server.app as app_module

    # patched on the class at run time (a method replaced, which a type checker refuses as an assignment)
    setattr(llama_cpp.Llama, "create_chat_completion", end_when_gone(llama_cpp.Llama.create_chat_completion))
    create_app = app_module.create_app
    app_module.create_app = lambda *a, **k: EndWhenGone(create_app(*a, **k))  # read by llama_cpp.server.__main__
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
