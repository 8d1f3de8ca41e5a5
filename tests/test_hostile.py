"""Replays the corpus of malformed and hostile inputs in tests/hostile/ through the command line (see its __init__)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import hostile
from hostile import Case

from gapbench.cli import main

CATEGORIES = sorted(m.name for m in pkgutil.iter_modules(hostile.__path__) if m.name.startswith("cases_"))
ALL: list[tuple[str, Case]] = [
    (cat, case) for cat in CATEGORIES for case in importlib.import_module(f"hostile.{cat}").CASES
]


def _run(case: Case, tmp: Path, capsys, monkeypatch) -> tuple[int, str, str]:
    argv = case.materialise(tmp)
    work = tmp
    for key, value in case.env.items():
        monkeypatch.setenv(key, value.replace("{tmp}", str(tmp)))
    if case.process:
        env = dict(os.environ)
        env.update({k: v.replace("{tmp}", str(tmp)) for k, v in case.env.items()})
        proc = subprocess.run([sys.executable, "-m", "gapbench", *argv], cwd=work, env=env, input=case.stdin,
                              capture_output=True, timeout=10 * case.timeout)
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    monkeypatch.chdir(work)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# a case that hangs (reads /dev/zero, waits on a pipe) is stopped at ten times its bound: a hang, never a slow machine
@pytest.mark.parametrize("category, case", [pytest.param(cat, case, marks=pytest.mark.timeout(10 * case.timeout))
                                            for cat, case in ALL], ids=[f"{cat[6:]}-{case.id}" for cat, case in ALL])
def test_hostile_input(category, case, tmp_path, capsys, monkeypatch, request):
    for name in case.fixtures:
        request.getfixturevalue(name)
    code, out, err = _run(case, tmp_path, capsys, monkeypatch)
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert code == case.expect, (code, out[-2000:], err[-2000:])
    if case.check is not None:
        case.check(tmp_path)
    if case.expect == 2:
        assert err.startswith("gapbench: error: "), err[-2000:]
        if _lists_errors(case):
            _assert_grouped(err)
        else:
            assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
        for name in case.expected_names(tmp_path):
            assert name in err, f"{name!r} not named in: {err!r}"


# `submit validate` and `leaderboard build` list a submission's problems one per line, grouped by file (issue 27):
# a submission holds several files and may have twenty problems, which one line made unreadable. Every other command's
# error stays one line. Their first line says how many errors in how many files and the exit code.
def _lists_errors(case: Case) -> bool:
    return list(case.argv[:2]) in (["submit", "validate"], ["leaderboard", "build"])


def _assert_grouped(err: str) -> None:
    import re

    lines = err.splitlines()
    assert err.endswith("\n") and all(line.strip() for line in lines), f"blank or unterminated lines: {err!r}"
    head = re.fullmatch(r"gapbench: error: .*: (\d+) errors? in (\d+) files? \(exit 2\)", lines[0])
    if head is None:  # an error that is not about a submission's files (no such root, a bad flag): one line
        assert len(lines) == 1, f"not one line: {err!r}"
        return
    headings = [line for line in lines[1:] if not line.startswith("  ")]
    errors = [line for line in lines[1:] if line.startswith("  ")]
    assert all(h.endswith(":") for h in headings) and lines[1] in headings, err
    assert (len(errors), len(headings)) == (int(head[1]), int(head[2])), err


def test_corpus_size_and_ids():
    ids = [f"{cat}:{case.id}" for cat, case in ALL]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    bad = [c for _, c in ALL if c.expect == 2]
    assert len(bad) >= 150, f"only {len(bad)} malformed or hostile inputs"
    assert any(c.expect == 0 for _, c in ALL) and any(c.expect == 1 for _, c in ALL)


# The run file of a re-run with the same ranked lists is the one kept in the cache (cache kind runs), put in place by a
# hard link or, across file systems, a copy into a temporary renamed over run.trec.gz. A SIGTERM landing in that step
# (raised in the main thread as soon as link() returns, or half-way through the copy) must leave no run directory, no
# temporary, the earlier run's file (the same inode when linked) and the kept file whole, and a later run that takes it.
@pytest.mark.parametrize("route", ["link", "copy"])
def test_sigterm_while_taking_the_kept_run_file(route, tmp_path, capsys, monkeypatch):
    import hashlib
    import json
    import re
    import shutil
    import signal

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    argv = ["run", "impliret/multispeaker/wknow", "-r", "bm25", "-m", "nDCG@10", "-o"]
    assert main([*argv, str(tmp_path / "first")]) == 0
    first = (tmp_path / "first" / "run.trec.gz").read_bytes()
    [kept] = (tmp_path / "home" / "cache" / "runs").glob("*.trec.gz")
    capsys.readouterr()

    real_link, real_copy, taken = os.link, shutil.copyfile, []

    def into_the_run_dir(dst) -> bool:
        return re.fullmatch(r"\.out\.tmp[0-9]+", Path(dst).parent.name) is not None

    def link(src, dst, *args, **kwargs):
        if not into_the_run_dir(dst):
            return real_link(src, dst, *args, **kwargs)
        if route == "copy":
            raise OSError(18, "Invalid cross-device link")  # EXDEV: the cache is on another file system
        real_link(src, dst, *args, **kwargs)
        taken.append(dst)
        os.kill(os.getpid(), signal.SIGTERM)

    def copyfile(src, dst, *args, **kwargs):
        if not into_the_run_dir(dst):
            return real_copy(src, dst, *args, **kwargs)
        data = Path(src).read_bytes()
        Path(dst).write_bytes(data[: len(data) // 2])
        taken.append(dst)
        os.kill(os.getpid(), signal.SIGTERM)
        Path(dst).write_bytes(data)  # never reached: the signal's exception is raised first

    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(shutil, "copyfile", copyfile)
    assert main([*argv, str(tmp_path / "out")]) == 143
    assert len(taken) == 1, "the re-run did not take the kept run file"
    assert capsys.readouterr().err == ("gapbench: interrupted by SIGTERM; nothing half-written was left, and finished "
                                       "work (caches) is kept.\n")
    assert not (tmp_path / "out").exists()
    left = [p for p in tmp_path.rglob("*") if re.fullmatch(r"\..+\.(tmp|old)[0-9]+", p.name)]
    assert left == []
    assert (tmp_path / "first" / "run.trec.gz").read_bytes() == first
    meta = json.loads(kept.with_suffix("").with_suffix(".json").read_text())
    assert (meta["bytes"], meta["sha256"]) == (len(first), hashlib.sha256(first).hexdigest())
    assert kept.read_bytes() == first

    monkeypatch.undo()
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert main([*argv, str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "run.trec.gz").read_bytes() == first
    assert os.stat(tmp_path / "again" / "run.trec.gz").st_ino == kept.stat().st_ino  # the kept file, taken
