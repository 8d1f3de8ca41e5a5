"""Request parameters a server refuses, learnt for the rest of a command.

A server that refuses one of the sampling parameters (HTTP 400 naming it, as OpenAI's reasoning models refuse
``temperature`` or want ``max_completion_tokens`` for ``max_tokens``) gets the request again without it, or renamed,
once per parameter (:func:`_refused_param` reads the refusal); :class:`Refusals` keeps what was learnt, so later
requests are sent as the server takes them and the manifest says what was sent.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from .failures import _server_message


class _Rejected(Exception):
    """A 400 that names a request parameter the server or model refuses: ``rename`` is the name it wants instead, or
    None to leave the parameter out."""

    def __init__(self, param: str, rename: str | None, said: str) -> None:
        super().__init__(said)
        self.param, self.rename, self.said = param, rename, said


def _refused_param(exc, params: Mapping[str, Any]) -> _Rejected | None:
    """The parameter a 400 refuses, when it names one that was sent (``param`` of OpenAI's error object, else a
    name in the message, quoted or after "param", as other servers word it, e.g. llama.cpp's "Unsupported param:
    tools"); None for any other error, or when the message names several of the parameters sent."""
    if getattr(exc, "status_code", None) not in (400, 422):
        return None
    said = _server_message(exc)
    param = getattr(exc, "param", None)
    if param not in params:
        named = [k for k in params if re.search(rf"(['\"`]){re.escape(k)}\1|\bparam(?:eter)?s?\b\W*{re.escape(k)}\b",
                                                said, re.IGNORECASE)]
        param = named[0] if len(named) == 1 else None
    if param is None:
        return None
    rename = "max_completion_tokens" if param == "max_tokens" and "max_completion_tokens" in said else None
    return _Rejected(param, rename, said)


class Refusals:
    """The parameters the server refused, shared by every thread of a client: name -> the name sent instead (None:
    left out), and the server's words for each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._adjusted: dict[str, str | None] = {}
        self._said: dict[str, str] = {}

    def learn(self, adjusted: Mapping[str, str | None]) -> None:
        """Takes refusals learnt elsewhere (a cached answer's) as this client's own."""
        with self._lock:
            self._adjusted.update(adjusted)

    def refused(self, rejected: _Rejected) -> None:
        """Records the refusal ``rejected``: the parameter is left out or renamed from now on."""
        with self._lock:
            self._adjusted[rejected.param] = rejected.rename
            self._said[rejected.param] = rejected.said

    def adjusted(self) -> dict[str, str | None]:
        """Name -> the name sent instead (None: left out), a copy."""
        with self._lock:
            return dict(self._adjusted)

    def said(self) -> dict[str, str]:
        """Name -> the server's words when it refused it, a copy."""
        with self._lock:
            return dict(self._said)

    def as_sent(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` with the parameters the server refused left out or renamed."""
        out = dict(body)
        for name, instead in self.adjusted().items():
            if name in out:
                value = out.pop(name)
                if instead is not None:
                    out.setdefault(instead, value)
        return out
