"""What went wrong with a call, classified: the kind of a failure (:func:`_failure_kind`: an HTTP status, a timeout,
a dropped or refused connection, an answer that is not an OpenAI-format response, ...), a few words for it
(:func:`_describe`), the server's own words (:func:`_server_message`) and its Retry-After."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping

from .text import one_line
from .transport import _Garbage, _NoAnswer, _openai_module, _Slow


def _chain(exc: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and len(out) < 12 and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _transport_names(chain: list[BaseException]) -> set[str]:
    """Class names of the HTTP library's errors in ``chain`` (httpx or its forks, whichever openai uses)."""
    return {c.__name__ for e in chain for c in type(e).__mro__ if c.__module__.split(".")[0].startswith(("httpx",
                                                                                                         "httpcore"))}


def _failure_kind(exc: BaseException) -> str:
    """status, timeout, slow, dropped, refused, dns, connect, connect_timeout, garbage, or other."""
    openai = _openai_module()
    if isinstance(exc, _Garbage):
        return "garbage"
    if isinstance(exc, _Slow):
        return "slow"
    if isinstance(exc, _NoAnswer):
        return "timeout"
    if isinstance(exc, openai.APIStatusError):
        return "status"
    chain = _chain(exc)
    names = _transport_names(chain)
    if "ConnectTimeout" in names:
        return "connect_timeout"
    if isinstance(exc, openai.APITimeoutError) or "TimeoutException" in names:
        return "timeout"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "refused"
    if any(isinstance(e, socket.gaierror) for e in chain):
        return "dns"
    if "ConnectError" in names:
        return "connect"
    if isinstance(exc, openai.APIConnectionError) or "TransportError" in names:
        return "dropped"
    return "other"


def _describe(exc: BaseException) -> str:
    """What went wrong, in a few words, from the deepest informative error (no request, no headers)."""
    chain = _chain(exc)
    named = [e for e in chain if _transport_names([e]) or isinstance(e, OSError)]
    if isinstance(exc, (_Slow, _Garbage, _NoAnswer)) or not named:
        return one_line(str(exc) or type(exc).__name__)[:300]
    first = named[0]
    return f"{type(first).__name__}: {one_line(str(first)) or 'no detail'}"[:300]


def _port(parts) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000.0
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except (TypeError, ValueError):  # an HTTP date: fall back to our own backoff
        return None
    return None


def _status(exc: BaseException | None) -> int | None:
    """The HTTP status of an error answer (openai's ``APIStatusError.status_code``), else None."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _server_message(exc: BaseException) -> str:
    """The server's own words from an error answer, on one line: the message of a JSON error, else the text of the
    body (an HTML page reduced to its words)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            return one_line(str(err.get("message") or err))[:300]
        return one_line(str(err))[:300]
    response = getattr(exc, "response", None)
    try:
        text = response.text if response is not None else ""
    except Exception:  # a streamed or unreadable body
        text = ""
    text = text or getattr(exc, "message", "") or ""
    if "<" in text and ">" in text:
        text = re.sub(r"<[^>]*>", " ", text)
    return one_line(text)[:300] or "no message"
