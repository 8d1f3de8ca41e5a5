"""The committed ImpliRet board (leaderboards/impliret), rebuilt once in the whole test session, and what that build
leaves in gapbench's submissions cache (each committed run's validation, scores and miss-profile facts, kept under
the run's sha256, the task data and the code that made them: :mod:`gapbench.products.submissions.score_cache`).

Several test files read or rebuild the committed board's submissions: its rebuild byte for byte
(tests/test_leaderboard_page.py), the README's submitter's path and seed script (tests/test_leaderboard_docs.py), the
hostile corpus' valid shipped submissions (tests/hostile/cases_submissions.py), ``load_scores`` of each committed
submission. Each of them re-read, re-scored and re-profiled 18 run files of 1,500 queries cold in its own worker;
now the first asker pays for it once (the cold build, in-process) and the others start from its cache, as a
maintainer's second ``gapbench leaderboard build`` does.

Loaded as a pytest plugin by tests/conftest.py (every tests/fx_*.py is); ``once_per_session`` is tests/fx_models.py's.
"""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IMPLIRET = REPO / "leaderboards" / "impliret"


@pytest.fixture(scope="session")
def shipped_board(once_per_session) -> Path:
    """A folder with ``lb/impliret/`` (the committed submissions and reference.json, the board rebuilt from them by
    ``build_boards`` with a cold cache), ``written.json`` (the files that build wrote, relative to ``lb/impliret``)
    and ``home/``, the GAPBENCH_HOME it ran in. Made once per session; tests read it and never write into it."""

    def make(root: Path) -> None:
        from gapbench.products.leaderboard import build_boards

        board = root / "lb" / "impliret"
        shutil.copytree(IMPLIRET / "submissions", board / "submissions")
        shutil.copy(IMPLIRET / "reference.json", board / "reference.json")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(root / "home"))
            written = build_boards(root / "lb")
        (root / "written.json").write_text(json.dumps(sorted(p.relative_to(board).as_posix() for p in written)))

    return once_per_session("shipped-board", make)


@pytest.fixture()
def shipped_cached(shipped_board) -> Path:
    """The submissions cache of ``shipped_board``'s build copied into this test's GAPBENCH_HOME (whatever it is
    now): validating, scoring or profiling a committed submission finds its results there. Returns the cache folder."""
    from gapbench.cache import cache_dir

    target = cache_dir("submissions")
    shutil.copytree(shipped_board / "home" / "cache" / "submissions", target, dirs_exist_ok=True)
    return target


# ---------------------------------------------------------------- a small board of real runs (tests/test_leaderboard*)

MINI_SUITE = "test-mini-impliret"
MINI_TASKS = ("impliret/unispeaker/wknow", "impliret/multispeaker/wknow")


@contextmanager
def mini_suite():
    """The suite ``MINI_SUITE`` (two ImpliRet sets) registered while inside (left as it was found)."""
    import gapbench.tasks  # noqa: F401  built-in suites first
    from gapbench.suites import SUITES, Suite

    if MINI_SUITE in SUITES:
        yield
        return
    SUITES.register(MINI_SUITE, Suite(MINI_SUITE, MINI_TASKS, "two ImpliRet sets, for tests"), replace=True)
    try:
        yield
    finally:
        SUITES.unregister(MINI_SUITE)


@pytest.fixture(scope="session")
def mini_board(once_per_session) -> Path:
    """A folder with ``root/<MINI_SUITE>/submissions/``: three scored submissions of real runs at k=20 on
    ``MINI_TASKS``, bm25, bm25-lucene (with a model named, for the MTEB export) and bm25 whose gold documents of every
    second query it hits are sunk to the bottom of its list (tests/planted.py); ``board.json``, the
    :class:`~gapbench.schemas.leaderboard.Leaderboard` that ``build_board`` made of them with default settings; and
    ``home/``, the GAPBENCH_HOME that build ran in (its submissions cache holds every run's validation, scores and
    miss profile). Made once per session; tests copy ``root/`` before they change or build anything in it."""

    def make(folder: Path) -> None:
        import gapbench
        from planted import hit_queries, sink_relevant

        from gapbench.products.leaderboard import build_board
        from gapbench.products.submissions.write import score_submission, write_submission

        root = folder / "root"
        with mini_suite(), pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(folder / "home"))
            runs: dict[str, dict] = {"bm25": {}, "bm25-lucene": {}, "bm25-damaged": {}}
            for t in MINI_TASKS:
                qrels = gapbench.get_task(t).load().qrels
                runs["bm25"][t] = gapbench.run(t, "bm25", k=20).run
                runs["bm25-lucene"][t] = gapbench.run(t, "bm25-lucene", k=20).run
                bm25 = runs["bm25"][t]
                runs["bm25-damaged"][t] = sink_relevant(bm25, qrels, hit_queries(bm25, qrels)[::2]).renamed(
                    "damaged")
            models = {"bm25-lucene": [{"name": "org/lucene-model", "revision": "rev1"}]}
            for system, r in runs.items():
                d = write_submission(root / MINI_SUITE / "submissions" / system, system=system,
                                     description=f"{system}.", suite=MINI_SUITE, runs=r,
                                     adapter={"name": system, "config": {}}, contact="ci@example.org",
                                     models=models.get(system, []), k=20)
                score_submission(d)
            board = build_board(sorted((root / MINI_SUITE / "submissions").iterdir()), MINI_SUITE)
        (folder / "board.json").write_text(board.model_dump_json(exclude_unset=True))

    return once_per_session("mini-board", make)


@pytest.fixture()
def mini_cached(mini_board) -> Path:
    """The submissions cache of ``mini_board``'s build copied into this test's GAPBENCH_HOME; returns ``root/``."""
    from gapbench.cache import cache_dir

    shutil.copytree(mini_board / "home" / "cache" / "submissions", cache_dir("submissions"), dirs_exist_ok=True)
    return mini_board / "root"
