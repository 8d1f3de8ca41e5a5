"""The embedded SmolLM2 server (llama.cpp, gapbench[local-llm]) started once per test process and lent to the tests
that ask for it, as if the command under test had started it: starting one costs seconds of loading and its first
answer tens of seconds more (llama.cpp builds its compute graphs), on every test that started its own.

``embedded_smollm2`` puts the one server where :func:`gapbench.llm.local.embedded_server` finds a running embedded
server, for the test's duration only: an LLM command run in-process without an endpoint then talks to it (the embedded
code paths: no preflight, the up-front estimate, concurrency 1), and ``embedded_scope`` leaves it running, as it does
any server started before its block. Tests of a server's own start, death and stop start their own."""

from __future__ import annotations

import pytest

# llama-cpp-python's server reads its settings from the environment too: one thread for the prompt as for the answer
# (its default is every core for the prompt). With the other test process busy on the second core, a thread that
# waits for a core holds up the other at every step: a 33-token prompt took 10 s, not 1 (the log's prompt eval times).
# The same answers, at the speed of one core.
LLAMA_THREADS = {"N_THREADS": "1", "N_THREADS_BATCH": "1"}


@pytest.fixture(scope="session")
def _smollm2_server(tmp_path_factory):
    pytest.importorskip("llama_cpp", reason="the local-llm extra (in dev) runs the embedded model")
    from gapbench.llm import local

    with pytest.MonkeyPatch.context() as mp:  # its log goes under a home of its own
        mp.setenv("GAPBENCH_HOME", str(tmp_path_factory.mktemp("smollm2-home")))
        for name, value in LLAMA_THREADS.items():
            mp.setenv(name, value)
        server = local.LocalServer(n_ctx=local.DEFAULT_N_CTX).start()
    yield server
    server.stop()


@pytest.fixture
def embedded_smollm2(_smollm2_server, monkeypatch):
    """The running embedded SmolLM2 server, registered as the one this process started (for the default context
    length: ``$GAPBENCH_LOCAL_LLM_N_CTX`` unset)."""
    from gapbench.llm import local

    monkeypatch.delenv("GAPBENCH_LOCAL_LLM_N_CTX", raising=False)
    server = _smollm2_server
    if server.died():
        raise server.death_error("while lent to the tests")
    key = (server.path, server.n_ctx)
    with local._LOCK:
        assert key not in local._SHARED, "an embedded SmolLM2 server is already registered"
        local._SHARED[key] = server
    try:
        yield server
    finally:
        with local._LOCK:
            if local._SHARED.get(key) is server:
                del local._SHARED[key]
