"""A look at an endpoint before the first call: ``GET {base_url}/models``, which OpenAI, vLLM, llama.cpp and Ollama
serve.

A call may wait a long time for a slow local model (``timeout``, 120 s an attempt, retried within 300 s), so an
endpoint that accepts connections and never answers (a stuck server, a port forwarded to nothing, something that is
not an HTTP API) would hold a command that long before any message. The check waits ``seconds`` (10 by default) for
any HTTP answer: a 404 passes (some servers have no /models route), as does a 401 (the call names a bad key); a
refused connection or an unknown host passes to the call, which names it at once. Only silence is reported here. An
endpoint that answered is not checked again in this process.

    problem = check("http://127.0.0.1:8080/v1", 10.0, {"Authorization": "Bearer ..."})
"""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping

_ANSWERED: set[str] = set()  # base URLs that answered the check in this process
_LOCK = threading.Lock()


def check(base_url: str, seconds: float, headers: Mapping[str, str] | None = None) -> str | None:
    """None when ``base_url`` answered ``GET /models`` with any HTTP status within ``seconds``, or could not be
    connected to at all; else what happened (the caller words the error and names the endpoint)."""
    with _LOCK:
        if base_url in _ANSWERED:
            return None
    request = urllib.request.Request(base_url.rstrip("/") + "/models", headers=dict(headers or {}), method="GET")
    try:
        with urllib.request.urlopen(request, timeout=seconds):
            pass
    except urllib.error.HTTPError:
        pass  # an HTTP status: the server answers
    except urllib.error.URLError:
        return None  # no connection (refused, unknown host, no TCP within the time): the call names it at once
    except TimeoutError:
        return f"accepted the connection but sent no answer to GET /models within {seconds:g} s"
    except (OSError, http.client.HTTPException):
        return None  # hung up or garbled: the call meets it too, and names it
    with _LOCK:
        _ANSWERED.add(base_url)
    return None
