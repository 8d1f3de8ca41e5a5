"""One contract over every registered task (PyTerrier/ir_datasets style): gapbench.testing's TaskContract, the one plugin
authors subclass, parametrized over the registry.

Hub-backed suites read the fixtures in tests/fixtures (their real file layouts) through GAPBENCH_DATA_<SUITE>. A task
whose data is not in a fixture must fail fast with a GapbenchError that says how to provide it, never another
exception or a hang.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gapbench.errors import GapbenchError
from gapbench.task import TASKS, Task, get_task, list_tasks
from gapbench.testing import TaskContract

FIXTURES = Path(__file__).parent / "fixtures"
ENV = {
    "GAPBENCH_DATA_BRIGHT": FIXTURES / "bright",
    "GAPBENCH_DATA_BEIR": FIXTURES / "beir",
    "GAPBENCH_DATA_OBLIQ": FIXTURES / "obliq",
    "GAPBENCH_DATA_RARB": FIXTURES / "rarb",
}
# at least these must load from the shipped data or the fixtures
MUST_LOAD = {
    "impliret/multispeaker/wknow", "impliret/unispeaker/temporal", "bright/biology", "bright/leetcode",
    "bright/biology/long", "beir/scifact", "beir/arguana", "obliq/math", "obliq/congress", "rarb/ARC-Challenge",
    "rarb-mcr/piqa", "rarb-mcr/ARC-Challenge",
}


def all_names() -> list[str]:
    get_task("impliret/multispeaker/wknow")  # registers the built-in tasks
    return sorted(TASKS.names())


@pytest.fixture(autouse=True, scope="module")
def fixture_data():
    with pytest.MonkeyPatch.context() as mp:  # module scope: the class-scoped loads below read these
        for key, path in ENV.items():
            mp.setenv(key, str(path))
        yield


def test_every_task_is_registered_with_its_metadata():
    tasks = list_tasks()
    assert len(tasks) >= 80 and sorted(t.name for t in tasks) == all_names()


class TestTasks(TaskContract):
    """gapbench.testing's task contract, over every registered task."""

    @pytest.fixture(scope="class", params=all_names())
    @classmethod
    def task_under_test(cls, request) -> Task:
        return get_task(request.param)

    @pytest.fixture(scope="class")
    @classmethod
    def loaded(cls, task_under_test):
        """The task's data, or None where it is not in a fixture: then it must fail fast with a GapbenchError that
        says how to provide it, never another exception or a hang."""
        name = task_under_test.name
        try:
            return task_under_test.load()
        except GapbenchError as exc:
            assert name not in MUST_LOAD, f"{name} should load from shipped data or fixtures: {exc}"
            message = str(exc)
            assert any(w in message for w in ("data_dir", "GAPBENCH_DATA", "local copy", "topics=", "option",
                                              "expected")), message
            return None

    def test_loaded_data(self, loaded, task_under_test):
        if loaded is not None:
            self.check_data(task_under_test.name, loaded)
