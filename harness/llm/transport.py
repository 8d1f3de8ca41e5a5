"""The HTTP layer of the client: one request and its answer, read as an OpenAI-format response.

An attempt runs on a thread of its own (:class:`_Attempt`), so that its caller can stop waiting at a deadline that
moves, and over a connection of its own that it can shut down when nobody waits for it any more (:func:`_trace`),
through the HTTP library's public settings only. The body is
read within the attempt's time however slowly it drips in (:func:`post`), and must be an OpenAI-format response:
anything else (not JSON, no choices, content null, an HTML page, an error object with status 200) is a
:class:`_Garbage` that names what came instead (:func:`_chat_response`, :func:`_embeddings`). The body's Content-Type is
not held against a valid answer.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import MissingDependencyError
from .records import ChatResponse
from .text import one_line

_CONNECT_TIMEOUT = 10.0  # a TCP connection that takes longer is not coming: no retry waits for it


def _openai_module():
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "openai", "llm", "The LLM client") from None
    return openai


class _Garbage(Exception):
    """A 2xx answer that is not a usable OpenAI-format response; retrying the same request would get the same."""


class _NoAnswer(Exception):
    """No answer within the attempt's time: classified as a timeout."""

    def __init__(self, seconds: float, said: str = "no answer within") -> None:
        super().__init__(f"{said} {seconds:g} s")
        self.seconds = seconds


class _Slow(_NoAnswer):
    """The body was still arriving when the attempt's time ran out (a drip): retried like a timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds, "the answer was still arriving after")


class _Attempt:
    """One HTTP attempt run on a thread of its own, so that its caller can stop waiting for it at a deadline that
    moves (an HTTP read cannot be interrupted): the thread ends within the attempt's hard bound, its answer unused."""

    def __init__(self, fn: Callable[[float], Any], seconds: float, answered: Callable[[], None]) -> None:
        self.done = threading.Event()
        self.reading = False  # the answer's headers came: a body still arriving at the deadline is a drip
        self.value: Any = None
        self.error: BaseException | None = None
        self.stream: Any = None  # the connection this attempt opened (see _trace)
        threading.Thread(target=self._run, args=(fn, seconds, answered), name="gapbench-llm-attempt",
                         daemon=True).start()

    def abort(self) -> None:
        """Shut down the connection of an attempt nobody waits for any more (closing a socket does not wake a thread
        blocked reading it; shutting it down does): a server whose queue still holds the request (llama.cpp checks
        before it starts one) drops it instead of computing an answer that would be thrown away, and the attempt's
        thread ends now instead of at its hard bound."""
        stream = self.stream
        sock = stream.get_extra_info("socket") if stream is not None and not self.done.is_set() else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the other side or by the library
                pass

    def _run(self, fn: Callable[[float], Any], seconds: float, answered: Callable[[], None]) -> None:
        _ATTEMPT.current = self
        try:
            self.value = fn(seconds)
            answered()  # an answer nobody waits for any more is progress of the server all the same
        except BaseException as exc:  # handed to the caller, who raises it
            self.error = exc
        finally:
            self.done.set()


_ATTEMPT = threading.local()  # the _Attempt a thread runs, so post and _trace can tell it what they saw


def _trace(event: str, info: dict[str, Any]) -> None:
    """The HTTP library's public ``trace`` request extension (httpx, and openai 3.x's fork httpx2): the network
    stream of the connection an attempt opens, whose ``get_extra_info("socket")`` :meth:`_Attempt.abort` shuts down.
    Every attempt opens its own connection (no keep-alive, see :func:`open_client`), so it always has one."""
    if event == "connection.connect_tcp.complete":
        attempt = getattr(_ATTEMPT, "current", None)
        if attempt is not None:
            attempt.stream = info.get("return_value")


def _traced(request: Any) -> None:
    """A request event hook of the HTTP client: every request carries :func:`_trace`."""
    request.extensions["trace"] = _trace


def post(resource: Any, seconds: float, max_bytes: int, **kwargs: Any) -> Any:
    """The JSON of a 2xx answer to one request to ``resource`` (an endpoint of the openai package's client, e.g.
    ``client.chat.completions``), read within ``seconds`` however slowly it arrives and refused past ``max_bytes``
    (raising :class:`_Garbage`, :class:`_Slow`, or the openai package's errors)."""
    openai = _openai_module()
    start = time.monotonic()
    timeout = openai.Timeout(seconds, connect=min(_CONNECT_TIMEOUT, seconds))
    with resource.with_streaming_response.create(**kwargs, timeout=timeout) as response:
        attempt = getattr(_ATTEMPT, "current", None)
        if attempt is not None:
            attempt.reading = True
        http = response.http_response
        chunks, size = [], 0
        for chunk in http.iter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise _Garbage(f"a body larger than {max_bytes} bytes (max_response_bytes)")
            chunks.append(chunk)
            if time.monotonic() - start > seconds:
                raise _Slow(seconds)
        content_type = http.headers.get("content-type", "")
    return _decode_json(b"".join(chunks), content_type)


def _decode_json(body: bytes, content_type: str) -> Any:
    try:
        return json.loads(body)
    except RecursionError:
        raise _Garbage("JSON nested too deeply to read") from None
    except ValueError:  # not JSON, or not UTF-8
        raise _Garbage(f"{_body_kind(body, content_type)} where JSON was expected") from None


def _body_kind(body: bytes, content_type: str) -> str:
    text = body.decode("utf-8", "replace")
    if not text.strip():
        return f"an empty body (Content-Type {content_type or 'none'!r})"
    if "html" in content_type.lower() or text.lstrip().startswith("<"):
        words = one_line(re.sub(r"<[^>]*>", " ", text))
        return f"an HTML page ({words[:120]!r})"
    return f"{len(body)} bytes of {content_type or 'unlabelled'} text starting {one_line(text)[:80]!r}"


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _object(data: Any, wanted: str) -> dict:
    """``data`` when it is an object holding ``wanted``; else what it is instead, as a _Garbage."""
    if not isinstance(data, dict):
        raise _Garbage(f"a JSON {_json_type(data)} where an object with {wanted!r} was expected")
    if wanted not in data:
        err = data.get("error")
        if err is not None:
            said = err.get("message", err) if isinstance(err, dict) else err
            raise _Garbage(f"an error object with a success status: {one_line(str(said))[:300]}")
        keys = ", ".join(sorted(map(str, data))[:8]) or "none"
        raise _Garbage(f"a JSON object without {wanted!r} (its keys: {keys})")
    return data


def _count(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _chat_response(data: Any) -> ChatResponse:
    choices = _object(data, "choices")["choices"]
    if not isinstance(choices, list) or not choices:
        raise _Garbage(f"'choices' is {'empty' if choices == [] else 'a JSON ' + _json_type(choices)}, not a list "
                       "with one answer")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise _Garbage(f"choices[0] is a JSON {_json_type(choice)} without a 'message' object")
    finish = choice.get("finish_reason")
    finish = finish if isinstance(finish, str) else None
    content = message.get("content")
    if content is None:
        if isinstance(message.get("refusal"), str):
            raise _Garbage(f"the model refused: {message['refusal'][:200]!r}")
        hint = "; the answer ran out of tokens: raise max_tokens" if finish == "length" else ""
        raise _Garbage(f"the message has no content (content null, finish_reason {finish!r}){hint}")
    if not isinstance(content, str):
        raise _Garbage(f"the message content is a JSON {_json_type(content)}, not a string")
    usage = data.get("usage")
    model = data.get("model")
    return ChatResponse(text=content, finish_reason=finish, prompt_tokens=_count(usage, "prompt_tokens"),
                        completion_tokens=_count(usage, "completion_tokens"), cached=False,
                        model=model if isinstance(model, str) else "")


def _embeddings(data: Any, n: int):
    """(float32 array in input order, prompt tokens) from an embeddings response for ``n`` texts."""
    import numpy as np

    items = _object(data, "data")["data"]
    if not isinstance(items, list) or len(items) != n:
        got = len(items) if isinstance(items, list) else f"a JSON {_json_type(items)} instead of"
        raise _Garbage(f"{got} embeddings came back for {n} texts")
    if not all(isinstance(d, dict) and isinstance(d.get("embedding"), list) for d in items):
        raise _Garbage("an item of 'data' has no 'embedding' list")
    index = [d.get("index", i) for i, d in enumerate(items)]
    if not all(type(i) is int for i in index) or sorted(index) != list(range(n)):
        raise _Garbage(f"the embeddings' 'index' values are not 0 to {n - 1} once each")
    order = sorted(range(n), key=index.__getitem__)
    try:
        arr = np.asarray([items[i]["embedding"] for i in order], dtype=np.float32)
    except (TypeError, ValueError):
        raise _Garbage("the embeddings are not lists of numbers of one length") from None
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise _Garbage("the embeddings are not lists of numbers of one length")
    return arr, _count(data.get("usage"), "prompt_tokens")


def open_client(api_key: str, base_url: str, timeout: float) -> Any:
    """The openai package's client for ``base_url``, its own retries off (ours are bounded in time and count every
    HTTP call), over its default HTTP client with keep-alive off and :func:`_trace` on every request: each attempt
    opens a connection of its own, which it can shut down when nobody waits for it. Only public settings are used
    (``DefaultHttpxClient``'s ``limits`` and ``event_hooks``), so a new release of openai or httpx keeps them."""
    openai = _openai_module()
    pooled = openai.DEFAULT_CONNECTION_LIMITS
    limits = type(pooled)(max_connections=pooled.max_connections, max_keepalive_connections=0)
    http = openai.DefaultHttpxClient(timeout=timeout, limits=limits, event_hooks={"request": [_traced]})
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0, http_client=http)
