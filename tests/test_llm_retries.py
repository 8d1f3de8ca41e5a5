"""The LLM client's retry policy (gapbench.llm.retries, on tenacity) against the real local server of
tests/llm_server.py: the startup bound for an endpoint that answers nothing but 5xx, the policy in the manifest, and no
private attribute of openai or httpx read anywhere in the client."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import time
from pathlib import Path

import pytest

from gapbench.errors import ConfigError
from gapbench.llm.client import LLMClient, LLMConfig, LLMUnavailableError
from gapbench.llm.pacing import _Pacer
from gapbench.llm.retries import RetryPolicy
from gapbench.llm.transport import open_client, post
from gapbench.llm.usage import LLMUsage
from llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = ("GAPBENCH_LLM_TIMEOUT", "GAPBENCH_LLM_CALL_TIMEOUT", "GAPBENCH_LLM_OUTAGE_TIMEOUT",
          "GAPBENCH_LLM_STARTUP_TIMEOUT")


def _always_500(monkeypatch, **config) -> tuple[LLMUnavailableError, int, list[float]]:
    """One call through a policy with the default waits and bounds (unless ``config`` says otherwise) to a server
    that answers HTTP 500 to everything; its waits are not slept but added to a virtual clock. (The error, the HTTP
    calls the server got, the waits.)"""
    for name in BOUNDS:
        monkeypatch.delenv(name, raising=False)
    waits: list[float] = []
    with LLMServer() as srv:
        srv.force_status = 500
        cfg = LLMConfig(base_url=srv.base_url, model="judge", **config).resolved()
        policy = RetryPolicy(cfg, LLMUsage(), _Pacer(1), srv.base_url, str, None,
                             clock=lambda: time.monotonic() + sum(waits), sleep=waits.append)
        api = open_client("EMPTY", srv.base_url, cfg.timeout)
        with pytest.raises(LLMUnavailableError) as err:
            policy.call("chat/completions", "judge", None,
                        lambda s: post(api.chat.completions, s, 2**20, model="judge",
                                       messages=[{"role": "user", "content": "hi"}]))
        return err.value, srv.counts["chat"], waits


def test_an_endpoint_that_answers_500_to_everything_is_named_within_15_s_by_default(monkeypatch):
    """Waits of 1 s doubling, each drawn from [w/2, w]: before the startup bound the seven attempts spanned about a
    minute (32 to 63 s of waits). Now the attempt whose wait would pass 15 s since the first failure is the last:
    four or five attempts, under 15 s of waits."""
    err, calls, waits = _always_500(monkeypatch)
    assert calls in (4, 5) and len(waits) == calls - 1 and sum(waits) < 15
    assert all(0.5 * 2**i <= w <= 2**i for i, w in enumerate(waits))
    assert re.fullmatch(
        r"LLM endpoint http://127\.0\.0\.1:\d+/v1/chat/completions still answers HTTP 500 after [45] attempts \(model "
        r"'judge'\): forced status 500 \(test server\); gave up: it has answered nothing but HTTP 5xx since the first call, for 15 s "
        r"\(\$GAPBENCH_LLM_STARTUP_TIMEOUT or startup_timeout; raise it for a server that is still starting\)\. Check "
        r"that the server is up and not overloaded, lower concurrency, or raise max_retries, the timeout "
        r"\(\$GAPBENCH_LLM_TIMEOUT\) or the limits; nothing was cached \(cache=False\)\.", str(err)), str(err)
    assert err.status == 500


def test_a_longer_startup_bound_lets_every_attempt_run(monkeypatch):
    err, calls, waits = _always_500(monkeypatch, startup_timeout=300)
    assert calls == 7 and 31.5 <= sum(waits) <= 63
    assert "still answers HTTP 500 after 7 attempts (model 'judge'): forced status 500 (test server). Check" in str(err)


def _client(srv: LLMServer, **kw) -> LLMClient:
    kw = {"retry_wait": 0.05, "retry_wait_max": 0.1, "max_retries": 50, **kw}
    return LLMClient(base_url=srv.base_url, model="judge", cache=False, **kw)


def test_the_startup_bound_ends_the_command_and_a_starting_server_gets_longer(monkeypatch):
    monkeypatch.delenv("GAPBENCH_LLM_STARTUP_TIMEOUT", raising=False)
    with LLMServer(fault="html_502") as srv:
        client = _client(srv, startup_timeout=0.3)
        with pytest.raises(LLMUnavailableError, match=r"still answers HTTP 502 after \d+ attempts .*gave up: it has "
                                                      r"answered nothing but HTTP 5xx since the first call, for 0\.3 s"):
            client.chat("hello")
        sent = srv.calls
        assert 2 <= sent < 51
        with pytest.raises(LLMUnavailableError) as again:  # the command is over: no more calls
            client.chat("another")
        assert srv.calls == sent and "for 0.3 s" in str(again.value)
    with LLMServer(fault="html_502", fault_times=4) as srv:  # starting: four 502s, then answers
        client = _client(srv, startup_timeout=30)
        assert client.chat("hello").text.startswith("echo ")
        assert srv.counts["html_502"] == 4 and client.usage.total()["retries"] == 4


def test_the_startup_bound_is_not_applied_once_the_endpoint_answered_or_failed_otherwise():
    with LLMServer() as srv:
        client = _client(srv, startup_timeout=0.2, max_retries=3)
        client.chat("first")
        srv.force_status = 500
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("second")
        assert srv.counts["chat"] == 5
    assert "after 4 attempts" in str(err.value) and "gave up" not in str(err.value)
    with LLMServer(fault="close", fault_times=1) as srv:  # a dropped connection first, then 500s
        srv.force_status = 500
        client = _client(srv, startup_timeout=0.2, max_retries=3)
        with pytest.raises(LLMUnavailableError) as err:
            client.chat("hello")
        assert srv.counts["chat"] == 4
    assert "still answers HTTP 500 after 4 attempts" in str(err.value) and "gave up" not in str(err.value)


def test_the_retry_policy_is_in_the_manifest(monkeypatch):
    for name in BOUNDS:
        monkeypatch.delenv(name, raising=False)
    with LLMServer() as srv:
        client = _client(srv, startup_timeout=40, timeout=10)
        client.chat("hi")
        manifest = client.manifest()
    assert manifest["retry"] == {
        "library": f"tenacity {importlib.metadata.version('tenacity')}",
        "retry_on": ["HTTP 408", "HTTP 429", "HTTP 5xx", "timeout", "answer still arriving", "dropped connection",
                     "refused connection or unknown host after the endpoint answered"],
        "wait": {"kind": "exponential, drawn from [w/2, w]", "first": 0.05, "max": 0.1, "retry_after_cap": 120.0},
        "stop": {"attempts": 51, "call_timeout": 300.0, "outage_timeout": 300.0, "startup_timeout": 40},
        "attempt_timeout": 10, "timeout_tokens": 2000}
    assert manifest["usage"]["calls"] == 1


def test_the_client_reads_no_private_attribute_of_openai_or_httpx():
    """Only gapbench.llm speaks to openai and httpx, and there every attribute read with a leading underscore is of
    gapbench's own objects (self, cls, or the few named here), so a release that renames a private name cannot
    silently change what the client does."""
    own = {"os._exit", "replace(self, **command)._resolved", "embedded_config(self)._resolved", "running._stopping"}
    found = set()
    for path in sorted((ROOT / "harness" / "llm").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.add(ast.unparse(node))
    assert found <= own, sorted(found - own)
    outside = [str(p.relative_to(ROOT)) for folder in ("harness", "adapters", "tasks")
               for p in (ROOT / folder).rglob("*.py") if "llm" not in p.parts
               and re.search(r"^\s*(import|from)\s+(openai|httpx)", p.read_text(encoding="utf-8"), re.MULTILINE)]
    assert outside == []


def test_the_startup_bound_comes_from_the_argument_then_the_environment_then_15_s(monkeypatch):
    def startup(**kw) -> float:
        return LLMClient(base_url="http://127.0.0.1:8000/v1", model="m", cache=False, **kw).config.startup_timeout

    monkeypatch.delenv("GAPBENCH_LLM_STARTUP_TIMEOUT", raising=False)
    assert startup() == 15.0
    monkeypatch.setenv("GAPBENCH_LLM_STARTUP_TIMEOUT", "120")
    assert (startup(), startup(startup_timeout=5)) == (120.0, 5)
    monkeypatch.setenv("GAPBENCH_LLM_STARTUP_TIMEOUT", "0")
    with pytest.raises(ConfigError, match=re.escape("$GAPBENCH_LLM_STARTUP_TIMEOUT='0' is not accepted; set it to a "
                                                    "finite number of seconds > 0")):
        startup()
    with pytest.raises(ConfigError, match=r"LLMConfig\.startup_timeout=-1 is not accepted"):
        LLMConfig(startup_timeout=-1)
