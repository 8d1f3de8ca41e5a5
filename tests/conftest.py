"""Shared test setup: offline hub, and a private GAPBENCH_HOME per test session so user caches are never touched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# fixtures that several test files share (a model, a server or a prepared task set up once per xdist worker) live in
# tests/fx_*.py, one module per kind
pytest_plugins = sorted(p.stem for p in Path(__file__).parent.glob("fx_*.py"))

# Bytecode caches are written (into __pycache__, which git ignores) even where PYTHONDONTWRITEBYTECODE is set, as it is
# on the CI machines: without them each xdist worker rewrites the asserts of every test module again (collection 23 s
# instead of 7 s on 2 cores) and every `python -m gapbench` a test starts compiles the library from source again.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# progress lines (one every 30 s outside a terminal) would make what a slow test reads on stderr depend on the
# machine's speed; tests of progress set GAPBENCH_PROGRESS themselves
os.environ.setdefault("GAPBENCH_PROGRESS", "off")


@pytest.fixture(autouse=True, scope="session")
def _gapbench_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("gapbench-home")
    old = os.environ.get("GAPBENCH_HOME")
    os.environ["GAPBENCH_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("GAPBENCH_HOME", None)
    else:
        os.environ["GAPBENCH_HOME"] = old


@pytest.fixture(scope="module")
def module_home(tmp_path_factory):
    """A GAPBENCH_HOME of the test module's own: what its first test caches (an export, embeddings) its later tests
    find there, and no other module does."""
    path = tmp_path_factory.mktemp("module-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GAPBENCH_HOME", str(path))
        yield path


@pytest.fixture(autouse=True)
def _fresh_llm_preflight():
    """The test servers bind port 0, so a later test's server can be given an earlier one's port: the process's record
    of the endpoints that answered the LLM preflight check (gapbench.llm.preflight) starts empty in every test, or a
    test that counts the checks depends on which tests ran before it in its process."""
    import sys

    module = sys.modules.get("gapbench.llm.preflight")
    if module is not None:
        module._ANSWERED.clear()
    yield


_CONNECTS: list | None = None  # while a test holds the `connections` fixture: every socket address it tried


def _record_connects(event: str, args: tuple) -> None:
    if _CONNECTS is not None and event == "socket.connect":
        _CONNECTS.append(args[1])


@pytest.fixture()
def connections():
    """The addresses of every socket connection tried while the test runs (Python's ``socket.connect`` audit event),
    so that "fails fast offline" is asserted as "tried no connection", not as a wall-clock bound."""
    global _CONNECTS
    import sys

    if not getattr(sys, "_gapbench_connect_hook", False):  # audit hooks cannot be removed: add it once per process
        sys.addaudithook(_record_connects)
        sys._gapbench_connect_hook = True
    _CONNECTS = []
    try:
        yield _CONNECTS
    finally:
        _CONNECTS = None


def pytest_addoption(parser):
    parser.addoption("--write-slow-list", action="store_true",
                     help="after a whole-suite run that passed, rewrite tests/slow_tests.txt from the measured "
                          "durations (setup + call + teardown of each test, SLOW_SECONDS or more)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "model: computes through a model or a fit (MiniLM, ColBERT, spaCy, sklearn, xgboost), whose numbers "
        "differ in the last bits between machines and thread counts; CI runs these again on one thread (.ci/run)")


_SLOW_LIST = os.path.join(os.path.dirname(__file__), "slow_tests.txt")
# a test that took this long (setup + call + teardown, measured in a whole `-n 2` run) leaves the fast loop
SLOW_SECONDS = 0.25
_DURATIONS: dict[str, float] = {}


def slow_node_ids() -> set[str]:
    """The node ids of tests/slow_tests.txt: tests measured at SLOW_SECONDS or more, left out of the fast loop."""
    with open(_SLOW_LIST, encoding="utf-8") as fh:
        return {line.strip() for line in fh if line.strip() and not line.startswith("#")}


def pytest_collection_modifyitems(config, items):
    listed = slow_node_ids()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)
    if config.getoption("--write-slow-list"):
        _FIXTURES_OF.update((item.nodeid, list(getattr(item, "fixturenames", ()))) for item in items)


# With --write-slow-list each test process also measures the set-up of every fixture wider than one test, and records
# which fixtures each test asks for: a test that looked fast only because an earlier one paid for a shared fixture
# (a model, a server, a prepared task) is slow as well, since in the fast loop it would be the first to pay.
_FIXTURE_SECONDS: dict[str, float] = {}
_FIXTURES_OF: dict[str, list[str]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    import time

    start = time.perf_counter()
    yield
    if fixturedef.scope != "function" and request.config.getoption("--write-slow-list"):
        seconds = time.perf_counter() - start  # its own body: the fixtures it needs were set up before this hook
        _FIXTURE_SECONDS[fixturedef.argname] = max(_FIXTURE_SECONDS.get(fixturedef.argname, 0.0), seconds)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    # xdist's controller: what each worker measured (sent in its workeroutput at its session's end)
    got = getattr(node, "workeroutput", {}).get("gapbench_slow_list")
    if got:
        for name, seconds in got["fixtures"].items():
            _FIXTURE_SECONDS[name] = max(_FIXTURE_SECONDS.get(name, 0.0), seconds)
        _FIXTURES_OF.update(got["uses"])


def pytest_runtest_logreport(report):
    # under xdist the controller receives every worker's reports here, so a `-n 2` run sees all durations
    _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not config.getoption("--write-slow-list"):
        return
    if hasattr(config, "workerinput"):  # an xdist worker: its measures go to the controller, which writes the list
        config.workeroutput["gapbench_slow_list"] = {"fixtures": _FIXTURE_SECONDS, "uses": _FIXTURES_OF}
        return
    whole = (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword
             and not config.option.markexpr)
    if exitstatus != 0 or not whole:
        print(f"\n--write-slow-list: tests/slow_tests.txt left as it is: it is written from a whole-suite run "
              f"(no paths, -k or -m) that passed; this one {'failed' if exitstatus else 'was a selection'}.")
        return
    args = [a for a in config.invocation_params.args if a != "--write-slow-list"]
    write_slow_list(_DURATIONS, _SLOW_LIST, " ".join(["python -m pytest", *args]), fixtures=_FIXTURE_SECONDS,
                    uses=_FIXTURES_OF)


def write_slow_list(durations: dict[str, float], path: str, command: str, source: str = "",
                    fixtures: dict[str, float] | None = None, uses: dict[str, list[str]] | None = None) -> list[str]:
    """Rewrite PATH with the node ids that took SLOW_SECONDS or more, and those that ask for a shared fixture
    (``uses``: node id -> fixture names) whose set-up took that long (``fixtures``: name -> seconds), sorted, under a
    header that says how and when they were measured (``source`` replaces "Generated by `COMMAND --write-slow-list`
    (tests/conftest.py)" when the durations came another way); returns them."""
    import datetime
    import platform

    costly = {name for name, seconds in (fixtures or {}).items() if seconds >= SLOW_SECONDS}
    by_time = {node for node, seconds in durations.items() if seconds >= SLOW_SECONDS}
    by_fixture = {node for node, names in (uses or {}).items() if costly & set(names)} - by_time
    slow = sorted(by_time | by_fixture)
    total = sum(durations.values())
    left = sum(seconds for node, seconds in durations.items() if node not in slow)
    source = source or f"Generated by `{command} --write-slow-list` (tests/conftest.py)"
    header = (f"# {source} on "
              f"{datetime.date.today().isoformat()}, {os.cpu_count()} cores, Python {platform.python_version()}: "
              f"the {len(by_time)} tests of {len(durations)} that took {SLOW_SECONDS:g} s or more (setup + call + "
              f"teardown)"
              + (f" and {len(by_fixture)} that ask for a fixture shared across tests whose set-up took as long "
                 f"({', '.join(sorted(costly))})" if by_fixture else "")
              + ". They are marked `slow`, so the fast loop (`pytest -m \"not slow\" -n 2`) leaves them out: "
              f"{left:.0f} s of the run's {total:.0f} s of test time stays in it. Regenerate after a change that "
              "makes a test slow or fast; tests/test_slow_list.py fails on a listed test that no longer exists.")
    import textwrap

    lines = ["# " + line for line in textwrap.wrap(header[2:], 118)]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join([*lines, *slow]) + "\n")
    return slow
