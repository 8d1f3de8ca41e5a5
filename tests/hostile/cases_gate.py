"""The CI gate (``gapbench regress``) and ``gapbench compare``: options that would switch the gate off, and result
directories that are missing, malformed, edited to hide a drop, or laid out to escape the named folders.

Every case works on copies of real run directories: bm25 on ImpliRet wknow (multispeaker), and a planted regression of
it (the gold document of every second query bm25 answers in its top 10 pushed to the bottom, then evaluated and
stored like any run). They are built once per test session in a private temporary folder.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

from . import Case

TASK = "impliret/multispeaker/wknow"
_BUILT: dict[str, Path] = {}
_OUTPUTS = Path(__file__).resolve().parent.parent / "fixtures" / "outputs_v0_1"


def _fixture(name: str) -> str:
    """The text of an output file gapbench 0.1 wrote (tests/fixtures/outputs_v0_1)."""
    return (_OUTPUTS / name).read_text(encoding="utf-8")


def _sets() -> Path:
    """The folder holding base/wknow, planted/wknow and subset/wknow (one query fewer), built on first use."""
    if "root" in _BUILT:
        return _BUILT["root"]
    import gapbench
    from gapbench.evaluation.evaluation import evaluate
    from gapbench.store import load_manifest, load_run, save_run_dir
    from gapbench.types import Qrels
    from planted import hit_queries, sink_relevant

    root = Path(tempfile.mkdtemp(prefix="gapbench-gate-"))
    atexit.register(shutil.rmtree, root, True)
    base = root / "base" / "wknow"
    gapbench.run(TASK, "bm25", measures=["nDCG@10", "R@100"], k=100, output=base)
    run, data = load_run(base), gapbench.get_task(TASK).load()
    planted = sink_relevant(run, data.qrels, hit_queries(run, data.qrels)[::2])  # every second query with a hit
    measures = ["nDCG@10", "R@100"]
    save_run_dir(root / "planted" / "wknow", planted, evaluate(planted, data.qrels, measures, task=TASK),
                 load_manifest(base))
    fewer = Qrels({q: j for q, j in data.qrels.items() if q != "7"})
    save_run_dir(root / "subset" / "wknow", run, evaluate(run, fewer, measures, task=TASK), load_manifest(base))
    _BUILT["root"] = root
    return root


def _copy(tmp: Path, src: str, dst: str) -> Path:
    return Path(shutil.copytree(_sets() / src, tmp / dst, symlinks=True))


def _pair(tmp: Path) -> None:
    _copy(tmp, "base", "base")
    _copy(tmp, "base", "cand")


def _metrics(tmp: Path) -> Path:
    return tmp / "cand" / "wknow" / "metrics.tsv"


def _results(tmp: Path) -> Path:
    return tmp / "cand" / "wknow" / "results.json"


def _edit_lines(edit):
    """A setup that copies the pair, then rewrites the candidate's metrics.tsv lines with ``edit(lines)``."""
    def setup(tmp: Path) -> None:
        _pair(tmp)
        path = _metrics(tmp)
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(edit(lines)), encoding="utf-8")
    return setup


def _value(line_no: int, text: str):
    """Replace the value on ``line_no`` (1-based) of the candidate's metrics.tsv with ``text``."""
    def edit(lines):
        qid, m, _ = lines[line_no - 1].rstrip("\n").split("\t")
        return lines[:line_no - 1] + [f"{qid}\t{m}\t{text}\n"] + lines[line_no:]
    return _edit_lines(edit)


def _results_text(text: str | bytes):
    def setup(tmp: Path) -> None:
        _pair(tmp)
        (_results(tmp).write_bytes if isinstance(text, bytes) else _results(tmp).write_text)(text)
    return setup


def _results_edit(edit):
    def setup(tmp: Path) -> None:
        _pair(tmp)
        doc = json.loads(_results(tmp).read_text())
        _results(tmp).write_text(json.dumps(edit(doc), indent=2))
    return setup


def _replace_file(name: str, make):
    """Replace the candidate's ``name`` with what ``make(path, tmp)`` puts there (a folder, a link, a pipe)."""
    def setup(tmp: Path) -> None:
        _pair(tmp)
        path = tmp / "cand" / "wknow" / name
        path.unlink()
        make(path, tmp)
    return setup


def _link_outside(path: Path, tmp: Path) -> None:
    outside = _copy(tmp, "base", "outside")
    path.symlink_to(outside / "wknow" / path.name)


def _forge(keep: str):
    """The planted regression, with one file copied from the baseline so that it claims no drop."""
    def setup(tmp: Path) -> None:
        _copy(tmp, "base", "base")
        _copy(tmp, "planted", "cand")
        shutil.copy(tmp / "base" / "wknow" / keep, tmp / "cand" / "wknow" / keep)
    return setup


def _gate(*extra: str, baseline: str = "{tmp}/base", candidate: str = "{tmp}/cand") -> list[str]:
    return ["regress", "--baseline", baseline, "--candidate", candidate, *extra]


def _opt(id_: str, *extra: str, names: tuple[str, ...]) -> Case:
    return Case(id_, _gate(*extra), setup=_pair, names=names)


MET = "{tmp}/cand/wknow/metrics.tsv"
RES = "{tmp}/cand/wknow/results.json"

OPTIONS = [
    _opt("max-drop-nan", "--max-drop", "nan", names=("--max-drop must be a finite number, got nan",)),
    _opt("max-drop-inf", "--max-drop", "inf", names=("--max-drop must be a finite number, got inf",)),
    _opt("max-drop-negative", "--max-drop", "-0.1", names=("--max-drop must be greater than or equal to 0, got -0.1",)),
    _opt("max-drop-huge", "--max-drop", "1e308", names=("--max-drop must be below 1, got 1e+308", "nDCG@10",
                                                        "always pass")),
    _opt("max-drop-whole-range", "--max-drop", "1", names=("--max-drop must be below 1, got 1.0",)),
    _opt("alpha-nan", "--alpha", "nan", names=("--alpha must be a finite number, got nan",)),
    _opt("alpha-zero", "--alpha", "0", names=("--alpha must be strictly between 0 and 1", "got 0.0")),
    _opt("alpha-one", "--alpha", "1", names=("--alpha must be strictly between 0 and 1", "got 1.0")),
    _opt("alpha-negative", "--alpha", "-0.05", names=("--alpha must be strictly between 0 and 1", "got -0.05")),
    _opt("alpha-inf", "--alpha", "inf", names=("--alpha must be a finite number, got inf",)),
    _opt("permutations-zero", "--permutations", "0", names=("--permutations must be greater than or equal to 1, got 0",)),
    _opt("permutations-negative", "--permutations", "-100", names=("--permutations must be greater than or equal to 1",
                                                                   "got -100")),
    _opt("permutations-huge", "--permutations", str(10**12), names=("--permutations must be at most 10,000,000, got "
                                                                   "1,000,000,000,000",)),
    _opt("permutations-too-few", "--permutations", "19",
         names=("--permutations is 19, which over 1 task(s)", "could never fail")),
    _opt("permutations-too-few-for-alpha", "--permutations", "500", "--alpha", "0.001",
         names=("--permutations is 500", "alpha 0.001")),
    _opt("seed-negative", "--seed", "-1", names=("--seed must be greater than or equal to 0, got -1",)),
    _opt("measure-not-stored", "--measure", "P@5", names=("no stored P@5", "nDCG@10, R@100")),
    _opt("measure-empty", "--measure", "", names=("--measure is ''",)),
    _opt("measure-blank", "--measure", "  ", names=("--measure is '  '",)),
]

FOLDERS = [
    Case("baseline-missing", _gate(baseline="{tmp}/nowhere"), setup=_pair, names=("{tmp}/nowhere", "no such folder")),
    Case("baseline-is-a-file", _gate(baseline="{tmp}/base.txt"), files={"base.txt": "not a folder\n"}, setup=_pair,
         names=("{tmp}/base.txt", "a file, not a folder")),
    Case("candidate-empty-folder", _gate(candidate="{tmp}/empty"),
         setup=lambda t: (_pair(t), (t / "empty").mkdir()), names=("{tmp}/empty", "holds no run directory")),
    Case("candidate-symlink-loop", _gate(candidate="{tmp}/loop"),
         setup=lambda t: (_pair(t), (t / "loop").symlink_to(t / "loop")), names=("{tmp}/loop", "loops")),
    Case("results-json-missing", _gate(), setup=_replace_file("results.json", lambda p, t: None),
         names=(RES, "missing")),
    Case("metrics-missing", _gate(), setup=_replace_file("metrics.tsv", lambda p, t: None), names=(MET, "missing")),
    Case("results-json-is-a-folder", _gate(), setup=_replace_file("results.json", lambda p, t: p.mkdir()),
         names=(RES, "not a regular file")),
    Case("metrics-is-a-pipe", _gate(), setup=_replace_file("metrics.tsv", lambda p, t: os.mkfifo(p)),
         names=(MET, "pipe")),
    Case("results-json-symlink-loop", _gate(), setup=_replace_file("results.json", lambda p, t: p.symlink_to(p)),
         names=(RES, "loops")),
    Case("results-json-dangling-link", _gate(),
         setup=_replace_file("results.json", lambda p, t: p.symlink_to(t / "gone.json")), names=(RES, "points nowhere")),
    Case("metrics-symlink-outside", _gate(), setup=_replace_file("metrics.tsv", _link_outside),
         names=(MET, "outside the run directory")),
    Case("run-dir-symlink-outside", _gate(), setup=lambda t: (
        _copy(t, "base", "base"), (t / "cand").mkdir(), _copy(t, "base", "outside"),
        (t / "cand" / "wknow").symlink_to(t / "outside" / "wknow")), names=("{tmp}/cand/wknow", "outside {tmp}/cand")),
    Case("run-dir-symlink-loop", _gate(), setup=lambda t: (
        _pair(t), (t / "cand" / "zz").symlink_to(t / "cand" / "zz")), names=("{tmp}/cand/zz", "loops")),
    Case("damaged-task-folder-in-baseline", _gate(), setup=lambda t: (
        _pair(t), (t / "base" / "other").mkdir(), (t / "base" / "other" / "metrics.tsv").write_text("x\n")),
        names=("{tmp}/base/other/results.json", "missing")),
    Case("two-folders-one-task", _gate(), setup=lambda t: (_pair(t), _copy(t, "base/wknow", "cand/wknow-again")),
         names=("wknow and wknow-again", TASK)),
    Case("candidate-lacks-task", _gate(), setup=lambda t: (
        _copy(t, "base", "base"), _copy(t, "base", "cand"), shutil.copytree(t / "base" / "wknow", t / "base" / "uni"),
        _rename_task(t / "base" / "uni", "impliret/unispeaker/wknow")),
        names=("lacks task(s) impliret/unispeaker/wknow",)),
    Case("candidate-other-queries", _gate(), setup=lambda t: (_copy(t, "base", "base"), _copy(t, "subset", "cand")),
         names=("the query sets differ (1 only in the baseline", "'7'")),
    Case("junit-is-a-folder", _gate("--junit", "{tmp}/junit"), setup=lambda t: (_pair(t), (t / "junit").mkdir()),
         names=("{tmp}/junit", "is a folder", "--junit")),
    Case("summary-is-a-folder", _gate("--summary", "{tmp}/sum"), setup=lambda t: (_pair(t), (t / "sum").mkdir()),
         names=("{tmp}/sum", "is a folder", "--summary")),
]


def _rename_task(run_dir: Path, task: str) -> None:
    path = run_dir / "results.json"
    doc = json.loads(path.read_text())
    doc["task"] = task
    path.write_text(json.dumps(doc, indent=2))


RESULTS_JSON = [
    Case("results-json-garbled", _gate(), setup=_results_text('{"task": "impliret/multi'),
         names=(RES, "line 1", "malformed JSON")),
    Case("results-json-is-a-list", _gate(), setup=_results_text("[0.15, 0.98]\n"), names=(RES, "JSON list")),
    Case("results-json-empty", _gate(), setup=_results_text(""), names=(RES, "malformed JSON")),
    Case("results-json-without-measures", _gate(),
         setup=_results_edit(lambda d: {k: v for k, v in d.items() if k != "measures"}),
         names=(RES, "lacks the key 'measures'")),
    Case("results-json-n-queries-text", _gate(), setup=_results_edit(lambda d: {**d, "n_queries": "1500"}),
         names=(RES, "'n_queries' is '1500'")),
    Case("results-json-n-queries-bool", _gate(), setup=_results_edit(lambda d: {**d, "n_queries": True}),
         names=(RES, "'n_queries' is True")),
    Case("results-json-measures-list", _gate(), setup=_results_edit(lambda d: {**d, "measures": ["nDCG@10"]}),
         names=(RES, "'measures' is ['nDCG@10']")),
    Case("results-json-mean-text", _gate(),
         setup=_results_edit(lambda d: {**d, "measures": {**d["measures"], "nDCG@10": "0.15"}}),
         names=(RES, "'measures.nDCG@10' is '0.15'")),
    Case("results-json-system-null", _gate(), setup=_results_edit(lambda d: {**d, "system": None}),
         names=(RES, "'system' is None")),
    Case("results-json-ci-reversed", _gate(),
         setup=_results_edit(lambda d: {**d, "ci95": {**d["ci95"], "R@100": d["ci95"]["R@100"][::-1]}}),
         names=(RES, "ci95.R@100")),
    Case("results-json-nan-mean", _gate(), setup=lambda t: (_pair(t), _results(t).write_text(
        _results(t).read_text().replace('"nDCG@10": 0.15', '"nDCG@10": NaN, "x": 0.15', 1))),
        names=(RES, "holds the literal NaN, which is not JSON")),
    Case("results-json-overflowing-mean", _gate(), setup=lambda t: (_pair(t), _results(t).write_text(
        _results(t).read_text().replace('"nDCG@10": 0.15', '"nDCG@10": 1e999, "x": 0.15', 1))),
        names=(RES, "holds the number 1e999, which overflows to infinity")),
    Case("results-json-duplicate-key", _gate(), setup=lambda t: (_pair(t), _results(t).write_text(
        _results(t).read_text().replace('"system"', '"n_queries": 1500, "system"', 1))),
        names=(RES, "'n_queries' appears twice")),
    Case("results-json-deeply-nested", _gate(), setup=_results_text("[" * 100_000 + "]" * 100_000),
         names=(RES, "nested too deeply")),
    Case("results-json-not-utf8", _gate(), setup=_results_text(b'{"system": "bm\xff25"}'),
         names=(RES, "not UTF-8", "0xff")),
]

METRICS = [
    Case("metrics-nan", _gate(), setup=_value(2, "nan"), names=(MET, "line 2", "query '0'", "'nan'")),
    Case("metrics-inf", _gate(), setup=_value(3, "inf"), names=(MET, "line 3", "query '1'", "'inf'")),
    Case("metrics-huge", _gate(), setup=_value(2, "1e308"), names=(MET, "line 2", "'1e308'", "from 0 to 1")),
    Case("metrics-overflow", _gate(), setup=_value(2, "1e999"), names=(MET, "line 2", "'1e999'")),
    Case("metrics-negative", _gate(), setup=_value(4, "-0.5"), names=(MET, "line 4", "'-0.5'")),
    Case("metrics-above-one", _gate(), setup=_value(5, "1.5"), names=(MET, "line 5", "'1.5'")),
    Case("metrics-not-a-number", _gate(), setup=_value(2, "abc"), names=(MET, "line 2", "'abc'")),
    Case("metrics-underscore-number", _gate(), setup=_value(2, "0_5"), names=(MET, "line 2", "'0_5'")),
    Case("metrics-padded-number", _gate(), setup=_value(2, " 0.5"), names=(MET, "line 2", "' 0.5'")),
    Case("metrics-duplicate-line", _gate(), setup=_edit_lines(lambda ls: ls[:3] + [ls[1]] + ls[3:]),
         names=(MET, "line 4", "query '0' has a second nDCG@10 value", "line 2")),
    Case("metrics-query-removed", _gate(), setup=_edit_lines(lambda ls: [ls[0]] + [
        x for x in ls[1:] if x.split("\t")[0] != "1"]), names=(MET, "1499 queries", "n_queries is 1500")),
    Case("metrics-measure-missing-for-a-query", _gate(), setup=_edit_lines(lambda ls: [
        x for x in ls if not x.startswith("0\tR@100\t")]),
        names=(MET, "query '0' has nDCG@10 (line 2) but no R@100")),
    Case("metrics-unknown-measure", _gate(), setup=_edit_lines(lambda ls: ls + ["0\tP@5\t0.2\n"]),
         names=(MET, "'P@5'", "nDCG@10, R@100")),
    Case("metrics-two-fields", _gate(), setup=_edit_lines(lambda ls: ls[:2] + ["1\t0.0\n"] + ls[3:]),
         names=(MET, "line 3", "'1\\t0.0'")),
    Case("metrics-empty-query-id", _gate(), setup=_edit_lines(lambda ls: ls[:2] + ["\tnDCG@10\t0.0\n"] + ls[3:]),
         names=(MET, "line 3")),
    Case("metrics-bad-header", _gate(), setup=_edit_lines(lambda ls: ["qid\tmetric\tscore\n"] + ls[1:]),
         names=(MET, "line 1", "'qid\\tmetric\\tscore'")),
    Case("metrics-bom", _gate(), setup=_edit_lines(lambda ls: ["\ufeff" + ls[0]] + ls[1:]),
         names=(MET, "line 1", "\\ufeff")),
    Case("metrics-crlf", _gate(), setup=_edit_lines(lambda ls: [x.replace("\n", "\r\n") for x in ls]),
         names=(MET, "line 1", "\\r")),
    Case("metrics-empty-file", _gate(), setup=_edit_lines(lambda ls: []), names=(MET, "no header")),
    Case("metrics-header-only", _gate(), setup=_edit_lines(lambda ls: ls[:1]), names=(MET, "only the header")),
    Case("metrics-blank-line", _gate(), setup=_edit_lines(lambda ls: ls[:3] + ["\n"] + ls[3:]),
         names=(MET, "line 4", "found ''")),
    Case("metrics-endless-line", _gate(), setup=_edit_lines(lambda ls: ls[:5] + ["9" * 2_000_000 + "\n"] + ls[5:]),
         names=(MET, "line 6", "longer than 4,096 bytes")),
    # 1.1 GiB that take no disk space (a sparse file): refused by its size, before a byte is read.
    Case("metrics-sparse-gigabytes", _gate(), setup=lambda t: (_pair(t), os.truncate(_metrics(t), 1100 * 2**20)),
         names=(MET, "1,153,433,600 bytes", "1024 MiB")),
    Case("metrics-not-utf8", _gate(), setup=lambda t: (_pair(t), _metrics(t).write_bytes(
        _metrics(t).read_bytes().replace(b"\n0\t", b"\n\xe90\t", 1))), names=(MET, "line 2", "not UTF-8")),
    # Within range, but no longer the numbers results.json was computed from: one query raised from 0 to 1.
    Case("metrics-edited-value", _gate(), setup=_value(3, "1.0"),
         names=(MET, "the mean nDCG@10", "{tmp}/cand/wknow/results.json stores")),
    # A planted regression dressed as the baseline: per-query values copied over so that the drop disappears.
    Case("forged-metrics-hide-a-drop", _gate(), setup=_forge("metrics.tsv"),
         names=(MET, "the mean nDCG@10", "one of the two files was edited")),
    # The other way: the baseline's means pasted into the planted regression's results.json.
    Case("forged-means-hide-a-drop", _gate(), setup=_forge("results.json"),
         names=(MET, "the mean nDCG@10", "stores 0.1517593583971234")),
]

COMPARE = [
    Case("compare-one-directory", ["compare", "{tmp}/base/wknow"], setup=_pair,
         names=("needs two or more run directories", "{tmp}/base/wknow")),
    Case("compare-alpha-nan", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "--alpha", "nan"], setup=_pair,
         names=("--alpha must be a finite number, got nan",)),
    Case("compare-alpha-two", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "--alpha", "2"], setup=_pair,
         names=("--alpha must be strictly between 0 and 1 (e.g. 0.05), got 2.0",)),
    Case("compare-measure-not-stored", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "-m", "AP"], setup=_pair,
         names=("{tmp}/base/wknow", "no stored AP", "nDCG@10, R@100")),
    Case("compare-measures-empty", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "-m", ""], setup=_pair,
         names=("--measures",)),
    Case("compare-measure-twice", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "-m", "R@100,R@100"],
         setup=_pair, names=("lists R@100 twice",)),
    Case("compare-other-task", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow"],
         setup=lambda t: (_pair(t), _rename_task(t / "cand" / "wknow", "impliret/unispeaker/wknow")),
         names=("{tmp}/cand/wknow holds task 'impliret/unispeaker/wknow'", TASK)),
    Case("compare-other-queries", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow"],
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "subset", "cand")),
         names=("{tmp}/base/wknow and {tmp}/cand/wknow scored different queries", "'7'")),
    Case("compare-same-directory-twice", ["compare", "{tmp}/base/wknow", "{tmp}/base/./wknow"], setup=_pair,
         names=("given twice",)),
    Case("compare-tampered", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow"], setup=_value(2, "nan"),
         names=(MET, "line 2", "query '0'")),
    # an analysis' folder where a run directory goes (report's --analyses forgotten)
    Case("compare-an-analysis-folder", ["compare", "{tmp}/base/wknow", "{tmp}/gap"], setup=_pair,
         files={"gap/gap.json": _fixture("gap.json")}, names=("{tmp}/gap", "holds gap.json", "--analyses DIR")),
    Case("report-an-analysis-folder-as-a-run", ["report", TASK, "{tmp}/base/wknow", "{tmp}/gap", "-o", "{tmp}/r"],
         setup=_pair, files={"gap/gap.json": _fixture("gap.json")},
         names=("{tmp}/gap", "holds gap.json", "--analyses DIR")),
    # `gapbench gate` (signals): runs of one task gated with signals calibrated on another
    Case("signals-gate-of-another-task", ["gate", "{tmp}/base/wknow", "--signals", "{tmp}/sig"], setup=_pair,
         files={"sig/signals.json": _fixture("signals.json").replace('"/tmp/p2/wknow80"',
                                                                     '"impliret/unispeaker/wknow"')},
         names=("{tmp}/base/wknow", f"a run of task '{TASK}'", "calibrated on 'impliret/unispeaker/wknow'")),
]

VALID = [
    Case("identical-candidate-passes", _gate("--junit", "{tmp}/out/junit.xml", "--output", "{tmp}/out"),
         setup=_pair, expect=0),
    Case("baseline-against-itself-passes", _gate(candidate="{tmp}/base"), setup=_pair, expect=0),
    Case("planted-regression-fails", _gate(), setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")),
         expect=1),
    Case("planted-regression-single-run-dirs-fail", _gate(baseline="{tmp}/base/wknow", candidate="{tmp}/cand/wknow"),
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")), expect=1),
    Case("planted-drop-within-tolerance-passes", _gate("--max-drop", "0.5"),
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")), expect=0),
    Case("planted-recall-unchanged-passes", _gate("--measure", "R@100"),
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")), expect=0),
    Case("readme-and-hidden-leftovers-are-ignored", _gate(), setup=lambda t: (
        _pair(t), (t / "cand" / "README.md").write_text("# candidate\n"),
        (t / "cand" / ".wknow.tmp123").mkdir()), expect=0),
    Case("compare-valid", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "--json"],
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")), expect=0),
]

# ---------------------------------------------------------------- re-scoring run.trec.gz (--rescore)

RUN = "{tmp}/cand/wknow/run.trec.gz"
MAN = "{tmp}/cand/wknow/manifest.json"


def _consistent(side: str, src: str, edit):
    """``src`` copied in as ``side`` (base or cand), the other side the baseline, with its nDCG@10 values changed by
    ``edit(query, value)`` and its stored mean with them: the directory agrees with itself, and only re-scoring its
    run file tells that the values are not its own."""
    def setup(tmp: Path) -> None:
        _copy(tmp, src if side == "base" else "base", "base")
        _copy(tmp, src if side == "cand" else "base", "cand")
        folder = tmp / side / "wknow"
        lines = (folder / "metrics.tsv").read_text().splitlines(keepends=True)
        out, values = lines[:1], []
        for line in lines[1:]:
            qid, m, v = line.rstrip("\n").split("\t")
            if m == "nDCG@10":
                v = repr(edit(qid, float(v)))
                values.append(float(v))
            out.append(f"{qid}\t{m}\t{v}\n")
        (folder / "metrics.tsv").write_text("".join(out))
        doc = json.loads((folder / "results.json").read_text())
        doc["measures"]["nDCG@10"] = sum(values) / len(values)
        (folder / "results.json").write_text(json.dumps(doc, indent=2))
    return setup


def _dressed_as_baseline(tmp: Path) -> None:
    """The planted regression with the baseline's metrics.tsv and results.json: consistent, and claiming no drop."""
    _copy(tmp, "base", "base")
    _copy(tmp, "planted", "cand")
    for name in ("metrics.tsv", "results.json"):
        shutil.copy(tmp / "base" / "wknow" / name, tmp / "cand" / "wknow" / name)


def _manifest(edit, then=_dressed_as_baseline):
    """``then``, followed by ``edit(doc)`` of the candidate's manifest.json."""
    def setup(tmp: Path) -> None:
        then(tmp)
        path = tmp / "cand" / "wknow" / "manifest.json"
        path.write_text(json.dumps(edit(json.loads(path.read_text())), indent=2))
    return setup


def _rename_everywhere(tmp: Path, task: str) -> None:
    _pair(tmp)
    for side in ("base", "cand"):
        _rename_task(tmp / side / "wknow", task)
        path = tmp / side / "wknow" / "manifest.json"
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "task": {**doc["task"], "name": task}}, indent=2))


def _run_file(make):
    """The pair, with the candidate's run.trec.gz replaced by what ``make(path, tmp)`` puts there."""
    def setup(tmp: Path) -> None:
        _pair(tmp)
        path = tmp / "cand" / "wknow" / "run.trec.gz"
        path.unlink()
        make(path, tmp)
    return setup


# The forged candidate's first differing query: '0', 0.5 in the baseline, 0.0 once its gold document is pushed down.
FORGED = (MET, TASK, "nDCG@10", "query '0' has 0.5 here", "gives 0.0", "249 of 1500 queries differ")

RESCORE = [
    Case("rescore-forged-copy-hides-drop", _gate(), setup=_dressed_as_baseline, names=FORGED),
    Case("rescore-forged-values-raised", _gate(), setup=_consistent("cand", "planted", lambda q, v: min(1.0, v + 0.05)),
         names=(MET, "query '0' has 0.05 here", "gives 0.0", "1471 of 1500")),
    Case("rescore-forged-values-lowered", _gate(), setup=_consistent("cand", "base", lambda q, v: v / 2),
         names=(MET, "query '0' has 0.25 here", "gives 0.5")),
    # Below load_results's 1e-9 on the mean (1e-10 / 1500), above re-scoring's 1e-12 on each value.
    Case("rescore-forged-one-value-by-1e-10", _gate(),
         setup=_consistent("cand", "base", lambda q, v: v + 1e-10 if q == "1" else v),
         names=(MET, "query '1' has 1e-10 here", "gives 0.0", "1 of 1500")),
    # The baseline forged upwards, so that an unchanged candidate would fail: both sides are re-scored.
    Case("rescore-forged-baseline", _gate(), setup=_consistent("base", "base", lambda q, v: min(1.0, v + 0.1)),
         names=("{tmp}/base/wknow/metrics.tsv", "query '0' has 0.6 here", "gives 0.5")),
    Case("rescore-swapped-run-file", _gate(), setup=_run_file(
        lambda p, t: shutil.copy(_sets() / "planted" / "wknow" / "run.trec.gz", p)), names=FORGED),
    Case("rescore-manifest-qrels-fingerprint", _gate(), setup=_manifest(
        lambda d: {**d, "fingerprints": {**d["fingerprints"], "qrels": "0" * 64}}, then=_pair),
        names=(MAN, TASK, "qrels fingerprint 0000000000000000")),
    # A forger who names a task revision not on this machine is re-scored on the baseline's data all the same.
    Case("rescore-forgery-names-another-revision", _gate(), setup=_manifest(
        lambda d: {**d, "task": {**d["task"], "revision": "hf:zeinabTaghavi/ImpliRet@0000000"}}), names=FORGED),
    Case("rescore-forgery-without-manifest", _gate(), setup=lambda t: (
        _dressed_as_baseline(t), (t / "cand" / "wknow" / "manifest.json").unlink()), names=FORGED),
    Case("rescore-manifest-names-other-task", _gate(), setup=_manifest(
        lambda d: {**d, "task": {**d["task"], "name": "impliret/unispeaker/wknow"}}, then=_pair),
        names=(MAN, "names task 'impliret/unispeaker/wknow'", f"holds task '{TASK}'")),
    Case("rescore-manifest-not-json", _gate(), setup=lambda t: (_pair(t), (t / "cand/wknow/manifest.json").write_text(
        '{"task": ')), names=(MAN, "malformed JSON")),
    Case("rescore-manifest-is-a-list", _gate(), setup=lambda t: (_pair(t), (t / "cand/wknow/manifest.json").write_text(
        "[]")), names=(MAN, "JSON list")),
    Case("rescore-manifest-seed-negative", _gate(), setup=_manifest(lambda d: {**d, "seed": -1}, then=_pair),
         names=(MAN, "'seed' is -1")),
    Case("rescore-run-file-missing", _gate(), setup=_run_file(lambda p, t: None), names=(RUN, "missing")),
    Case("rescore-run-file-garbled", _gate(), setup=_run_file(lambda p, t: p.write_text("0 Q0 0 1 high bm25\n")),
         names=(RUN, "line 1", "score 'high'")),
    Case("rescore-run-file-truncated-gzip", _gate(), setup=_run_file(lambda p, t: p.write_bytes(
        (_sets() / "base" / "wknow" / "run.trec.gz").read_bytes()[:5000])), names=(RUN,)),
    Case("rescore-run-file-link-outside", _gate(), setup=_run_file(_link_outside),
         names=(RUN, "outside the run directory")),
    Case("rescore-bogus", _gate("--rescore", "bogus"), setup=_pair,
         names=("--rescore must be 'auto', 'always' or 'never', got 'bogus'",)),
    Case("rescore-empty", _gate("--rescore", ""), setup=_pair,
         names=("--rescore must be 'auto', 'always' or 'never', got ''",)),
    Case("rescore-always-unknown-task", _gate("--rescore", "always"),
         setup=lambda t: _rename_everywhere(t, "private/wknow"),
         names=("rescore is 'always', but task private/wknow cannot be re-scored here: unknown task "
                "'private/wknow'",)),
    Case("compare-rescore-forged", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow"], setup=_dressed_as_baseline,
         names=FORGED),
    Case("compare-rescore-upper-case", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "--rescore", "ALWAYS"],
         setup=_pair, names=("--rescore is 'ALWAYS'",)),
]

RESCORE_VALID = [
    Case("rescore-always-passes", _gate("--rescore", "always"), setup=_pair, expect=0),
    Case("rescore-always-planted-regression-fails", _gate("--rescore", "always"),
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")), expect=1),
    # Opting out of re-scoring leaves only the consistency checks, which a consistent forgery passes.
    Case("rescore-never-trusts-a-consistent-directory", _gate("--rescore", "never"), setup=_dressed_as_baseline,
         expect=0),
    Case("rescore-auto-unknown-task-consistency-only", _gate(), setup=lambda t: _rename_everywhere(t, "private/wknow"),
         expect=0),
    Case("compare-rescore-always", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow", "--rescore", "always"],
         setup=lambda t: (_copy(t, "base", "base"), _copy(t, "planted", "cand")), expect=0),
]

CASES = OPTIONS + FOLDERS + RESULTS_JSON + METRICS + COMPARE + VALID + RESCORE + RESCORE_VALID
