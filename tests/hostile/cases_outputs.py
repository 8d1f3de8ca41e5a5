"""Output folders of the analysis commands (report, argus audit): a file, a device or a dangling link where the folder
should be, or above it. Each is refused in one line naming the path and what stands in the way, and nothing is
written; a new nested folder, or one holding a dead writer's temporary and a live writer's, is written as usual."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import Case

TASK = "impliret/multispeaker/wknow"
_BUILT: dict[str, Path] = {}


def _run_dir() -> Path:
    """A bm25 run directory of TASK, built on first use and copied into each case."""
    if "run" not in _BUILT:
        import gapbench

        root = Path(tempfile.mkdtemp(prefix="gapbench-outputs-"))
        atexit.register(shutil.rmtree, root, True)
        gapbench.run(TASK, "bm25", measures=["nDCG@10"], k=100, output=root / "bm25")
        _BUILT["run"] = root / "bm25"
    return _BUILT["run"]


def _setup(*steps, run: bool = False):
    if not steps and not run:
        return None

    def setup(tmp: Path) -> None:
        if run:
            shutil.copytree(_run_dir(), tmp / "rd")
        for step in steps:
            step(tmp)

    return setup


def _file(rel: str):
    def step(tmp: Path) -> None:
        (tmp / rel).write_text("keep me\n")

    return step


def _dangling(rel: str):
    def step(tmp: Path) -> None:
        (tmp / rel).symlink_to(tmp / "nowhere")

    return step


def _stale_and_live(tmp: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp / "rep").mkdir()
    (tmp / "rep" / f".report.md.tmp{dead.pid}").write_text("# half a report")
    (tmp / "rep" / f".report.html.tmp{os.getppid()}").write_text("<html>")  # a writer that still runs


def _report(id_: str, out: str, *steps, expect: int = 2, names: tuple[str, ...] = ()) -> Case:
    return Case(id_, ["report", TASK, "{tmp}/rd", "-o", out], setup=_setup(*steps, run=True), expect=expect,
                names=names)


def _audit(id_: str, out: str, *steps, expect: int = 2, names: tuple[str, ...] = ()) -> Case:
    return Case(id_, ["argus", "audit", "-r", "random:dim=8", "--no-plot", "-o", out], setup=_setup(*steps),
                expect=expect, names=names)


CASES = [
    _report("report-out-under-a-file", "{tmp}/taken/report", _file("taken"),
            names=("--out {tmp}/taken/report lies under the file {tmp}/taken",)),
    _report("report-out-deep-under-a-file", "{tmp}/taken/a/b/report", _file("taken"),
            names=("--out {tmp}/taken/a/b/report lies under the file {tmp}/taken",)),
    _report("report-out-is-a-file", "{tmp}/taken", _file("taken"),
            names=("--out {tmp}/taken is an existing file",)),
    _report("report-out-is-a-device", "/dev/null", names=("--out /dev/null is not a folder",)),
    _report("report-out-under-a-device", "/dev/null/report", names=("--out /dev/null/report lies under /dev/null, which is not a folder",)),
    _report("report-out-under-a-dangling-link", "{tmp}/gone/report", _dangling("gone"),
            names=("{tmp}/gone/report", "{tmp}/gone is a link to nothing")),
    _audit("audit-out-under-a-file", "{tmp}/taken/audit", _file("taken"),
           names=("--out {tmp}/taken/audit lies under the file {tmp}/taken",)),
    _audit("audit-out-is-a-file", "{tmp}/taken", _file("taken"), names=("--out {tmp}/taken is an existing file",)),
    _audit("audit-out-is-a-dangling-link", "{tmp}/gone", _dangling("gone"),
           names=("{tmp}/gone: it is a link to nothing",)),
    # valid: a new nested folder, and a folder holding a dead writer's temporary (swept) and a live one's (kept)
    _report("report-into-a-new-nested-folder", "{tmp}/new/deep/report", expect=0),
    _report("report-beside-stale-temporaries", "{tmp}/rep", _stale_and_live, expect=0),
    _audit("audit-into-a-new-folder", "{tmp}/new/audit", expect=0),
]
