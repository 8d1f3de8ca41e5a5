"""Leaderboard submissions given to ``gapbench submit validate|score`` and ``gapbench leaderboard
build|export-mteb|export-trec``.

A stranger's submission must never forge a board, read or write outside its folder (or ``--out``), or cost unbounded
work: malformed and hostile ``submission.json`` (syntax, types, unknown and missing fields, versions, huge or deep
JSON, BOM, NaN), run files with wrong names, hidden or code files, links, folders, pipes, gzip bombs, wrong hashes and
bad lines, a tampered ``scores.json``, path escapes in every path field and injection in every text field. Most cases
use a small one-task submission (the first 200 lines of the shipped bm25 run on impliret/unispeaker/wknow), so each
takes a fraction of a second; the valid cases next to them copy the shipped submissions under
leaderboards/impliret/submissions into the case's folder and validate, score, build and export them.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
from pathlib import Path

from . import Case

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "leaderboards" / "impliret" / "submissions"
TASK = "impliret/unispeaker/wknow"
RUN = "runs/impliret__unispeaker__wknow.trec"
with gzip.open(SHIPPED / "bm25" / "runs" / "impliret__unispeaker__wknow.trec.gz", "rt", encoding="utf-8") as _fh:
    RUN_TEXT = "".join(line for _, line in zip(range(200), _fh))  # queries 0 and 1, 100 documents each
REVISION = json.loads((SHIPPED / "bm25" / "submission.json").read_text(encoding="utf-8"))["tasks"][TASK]["revision"]
S = "{tmp}/s"


def _sha(content: str | bytes) -> str:
    return hashlib.sha256(content.encode("utf-8") if isinstance(content, str) else content).hexdigest()


def meta(run: str | bytes = RUN_TEXT, **changes) -> dict:
    """A valid submission.json for the small run, with ``changes`` applied (a value of None removes the field)."""
    m = {
        "format_version": 1, "system": "tiny-bm25", "description": "The first two queries of the shipped bm25 run.",
        "suite": "impliret", "gapbench_version": "0.1.0", "models": [], "adapter": {"name": "bm25", "config": {}},
        "contact": "ci@example.org", "tasks": {TASK: {"revision": REVISION, "run": RUN, "sha256": _sha(run)}},
    }
    for key, value in changes.items():
        if value is None:
            m.pop(key, None)
        else:
            m[key] = value
    return m


def sub(m: dict | str | bytes | None = None, run: str | bytes = RUN_TEXT, extra: dict | None = None) -> dict:
    """The files of a submission folder ``s``: submission.json (a dict is dumped; text or bytes are written as they
    are), the run (its hash in the default meta follows it) and ``extra`` files."""
    if m is None:
        m = meta(run)
    files = {"s/submission.json": json.dumps(m, indent=1) if isinstance(m, dict) else m, f"s/{RUN}": run}
    files.update({f"s/{k}": v for k, v in (extra or {}).items()})
    return files


def validate(case_id: str, files: dict, names=(), *, setup=None, expect: int = 2) -> Case:
    return Case(case_id, ["submit", "validate", S], files=files, names=("{tmp}/s", *names), setup=setup, expect=expect)


def task_entry(**changes) -> dict:
    entry = {"revision": REVISION, "run": RUN, "sha256": _sha(RUN_TEXT)}
    entry.update(changes)
    return {TASK: entry}


def lines(edit) -> str:
    """The small run with ``edit(list of line fields)`` applied to its lines."""
    rows = [line.split() for line in RUN_TEXT.splitlines()]
    edit(rows)
    return "".join(" ".join(r) + "\n" for r in rows)


def _set(row: int, col: int, value: str):
    def edit(rows):
        rows[row][col] = value
    return edit


# ---------------------------------------------------------------- setups: links, pipes, bombs, scored copies

def _link_run_outside(tmp: Path) -> None:
    (tmp / "outside.trec").write_text(RUN_TEXT, encoding="utf-8")
    (tmp / "s" / RUN).unlink()
    os.symlink(tmp / "outside.trec", tmp / "s" / RUN)


def _link_runs_folder_outside(tmp: Path) -> None:
    shutil.move(tmp / "s" / "runs", tmp / "elsewhere")
    os.symlink(tmp / "elsewhere", tmp / "s" / "runs")


def _link_run_inside(tmp: Path) -> None:
    os.replace(tmp / "s" / RUN, tmp / "s" / "data.json")
    os.symlink("../data.json", tmp / "s" / RUN)


def _link_submission_json(tmp: Path) -> None:
    (tmp / "s" / "submission.json").rename(tmp / "real.json")
    os.symlink(tmp / "real.json", tmp / "s" / "submission.json")


def _link_submission_folder(tmp: Path) -> None:
    (tmp / "s").rename(tmp / "real")
    os.symlink(tmp / "real", tmp / "s")


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "s" / "runs" / "more.trec")


def _executable(tmp: Path) -> None:
    os.chmod(tmp / "s" / RUN, 0o755)


def _bomb(tmp: Path) -> None:
    """A 2 MB gzip that inflates to 2 GB of digits (200 members of 10 MB), with its true sha256."""
    data = gzip.compress(b"0" * 10_000_000, compresslevel=9) * 200
    path = tmp / "s" / f"{RUN}.gz"
    path.parent.mkdir()
    path.write_bytes(data)
    m = meta(data)
    m["tasks"][TASK]["run"] = f"{RUN}.gz"
    (tmp / "s" / "submission.json").write_text(json.dumps(m), encoding="utf-8")


def _corrupt_gzip(tmp: Path) -> None:
    data = gzip.compress(RUN_TEXT.encode("utf-8"))
    data = data[:40] + bytes(b ^ 0xFF for b in data[40:80]) + data[80:]
    (tmp / "s" / "runs").mkdir()
    (tmp / "s" / f"{RUN}.gz").write_bytes(data)
    m = meta(data)
    m["tasks"][TASK]["run"] = f"{RUN}.gz"
    (tmp / "s" / "submission.json").write_text(json.dumps(m), encoding="utf-8")


def _scored(edit=None):
    """Score ``s`` with gapbench itself, then apply ``edit`` to its scores.json (a dict) or call it with the folder."""
    def setup(tmp: Path) -> None:
        from gapbench.products.submissions.write import score_submission

        score_submission(tmp / "s")
        if edit is not None:
            path = tmp / "s" / "scores.json"
            doc = json.loads(path.read_text(encoding="utf-8"))
            edit(doc)
            path.write_text(json.dumps(doc), encoding="utf-8")
    return setup


def _forge_query(doc: dict) -> None:
    doc["tasks"][TASK]["per_query"]["nDCG@10"]["1"] = 1.0


def _forge_mean(doc: dict) -> None:
    doc["tasks"][TASK]["measures"]["nDCG@10"] = 0.99


def _empty_inputs(doc: dict) -> None:
    doc["manifest"]["inputs"] = {}


def _swap_run_path(doc: dict) -> None:
    doc["manifest"]["inputs"] = {}
    doc["tasks"][TASK]["run"] = "/etc/passwd"


def _dotdot_inputs(doc: dict) -> None:
    doc["manifest"]["inputs"] = {"../../../etc/passwd": "0" * 64}


def _forge_average(doc: dict) -> None:
    doc["full_benchmark_avg"] = {"nDCG@10": 0.9}


def _huge_resamples(doc: dict) -> None:
    doc["manifest"]["n_resamples"] = 10**12


def _scores_link(tmp: Path) -> None:
    (tmp / "scores.json").write_text("{}", encoding="utf-8")
    os.symlink(tmp / "scores.json", tmp / "s" / "scores.json")


def _copy_shipped(system: str, dest: str = "sub"):
    def setup(tmp: Path) -> None:
        shutil.copytree(SHIPPED / system, tmp / dest)
    return setup


def _board_of(system: str):
    return _copy_shipped(system, f"lb/impliret/submissions/{system}")


def _board_with_linked_suite(tmp: Path) -> None:
    (tmp / "lb").mkdir()
    (tmp / "real" / "submissions").mkdir(parents=True)
    os.symlink(tmp / "real", tmp / "lb" / "impliret")


def _board_of_tampered(tmp: Path) -> None:
    _scored(_forge_query)(tmp)
    (tmp / "lb" / "impliret" / "submissions").mkdir(parents=True)
    shutil.move(tmp / "s", tmp / "lb" / "impliret" / "submissions" / "tiny-bm25")


def _out_link(tmp: Path) -> None:
    _scored()(tmp)
    (tmp / "out").mkdir()
    (tmp / "victim.txt").write_text("keep me", encoding="utf-8")
    os.symlink(tmp / "victim.txt", tmp / "out" / "impliret__unispeaker__wknow.trec")


def _mteb_model(name: str):
    def setup(tmp: Path) -> None:
        m = meta(models=[{"name": name, "revision": "main"}])
        (tmp / "s" / "submission.json").write_text(json.dumps(m), encoding="utf-8")
    return setup


SHIPPED_CACHED = ("shipped_cached",)
WRONG_IDS = RUN_TEXT + "".join(f"q-{i} Q0 {i} 1 {i}.5 bm25\n" for i in range(15_000))

CASES = [
    # ---- valid submissions: the small one, and the shipped ones copied into the case's folder
    validate("valid-small", sub(), expect=0),
    # (the committed runs validated, scored and profiled once in the session: tests/fx_boards.py's shipped_cached)
    Case("valid-shipped-bm25", ["submit", "validate", "{tmp}/sub"], setup=_copy_shipped("bm25"), expect=0,
         fixtures=SHIPPED_CACHED),
    Case("valid-score-shipped-bm25-lucene", ["submit", "score", "{tmp}/sub"], setup=_copy_shipped("bm25-lucene"),
         expect=0, fixtures=SHIPPED_CACHED),
    Case("valid-build-shipped-dense", ["leaderboard", "build", "--root", "{tmp}/lb"], setup=_board_of("dense"), expect=0,
         fixtures=SHIPPED_CACHED),
    Case("valid-export-mteb-shipped-dense", ["leaderboard", "export-mteb", "{tmp}/sub", "--out", "{tmp}/out"],
         setup=_copy_shipped("dense"), expect=0, fixtures=SHIPPED_CACHED),
    Case("valid-export-trec-small", ["leaderboard", "export-trec", S, "--out", "{tmp}/out"], files=sub(),
         setup=_scored(), expect=0),
    validate("valid-names-with-markup", sub(meta(description="Pipes | <b>tags</b> [links](x) **stars** are shown as text.",
                                                 url="https://example.org/x?a=1&b=2", date="2025-01-31",
                                                 system="tiny_bm25+v2.1")), expect=0),

    # ---- submission.json: syntax and encoding
    validate("json-syntax", sub('{\n  "system": "x",\n}\n'), ["submission.json, line 3", "malformed JSON"]),
    validate("json-not-object", sub("[1, 2, 3]"), ["submission.json", "must hold a JSON object, found list"]),
    validate("json-empty", sub(""), ["submission.json, line 1", "malformed JSON (Expecting value"]),
    validate("json-bom", sub(b"\xef\xbb\xbf" + json.dumps(meta()).encode()), ["submission.json", "byte-order mark (BOM)"]),
    validate("json-nan", sub(json.dumps(meta()).replace('"format_version": 1', '"format_version": NaN')),
             ["submission.json", "literal NaN, which is not JSON"]),
    validate("json-infinity", sub('{"k": Infinity}'), ["submission.json", "literal Infinity"]),
    validate("json-overflow", sub('{"k": 1e400}'), ["submission.json", "1e400, which overflows to infinity"]),
    validate("json-duplicate-key", sub(json.dumps(meta())[:-1] + ', "system": "other"}'),
             ["submission.json", "key 'system' appears twice"]),
    validate("json-deep", sub("[" * 100_000 + "]" * 100_000), ["submission.json", "nested too deeply"]),
    validate("json-huge", sub('{"description": "' + "x" * 1_200_000 + '"}'),
             ["submission.json", "is 1,200,019 bytes, over the 1,000,000-byte cap"]),
    validate("json-latin1", sub(json.dumps(meta(description="caf\u00e9"), ensure_ascii=False).encode("latin-1")),
             ["submission.json", "is not UTF-8 text"]),
    validate("json-long-integer", sub('{"k": ' + "7" * 10_000 + "}"), ["submission.json", "JSON readers refuse"]),

    # ---- submission.json: schema
    validate("missing-field", sub(meta(contact=None)), ["submission.json", "missing field 'contact'"]),
    validate("unknown-field", sub(meta(sytem="x")), ["unknown field 'sytem'", "Did you mean 'system'?"]),
    validate("wrong-type", sub(meta(models="bm25")), ["field 'models' is a string ('bm25'); expected list"]),
    validate("format-version-2", sub(meta(format_version=2)), ["format_version 2 is not supported"]),
    validate("format-version-string", sub(meta(format_version="1")), ["field 'format_version' is a string ('1')"]),
    validate("k-zero", sub(meta(k=0)), ["field 'k' is 0; give 1 to 1000"]),
    validate("tasks-empty", sub(meta(tasks={})), ["field 'tasks' is empty"]),
    validate("task-unknown", sub(meta(tasks={"impliret/unispeaker/wknw": task_entry()[TASK]})),
             ["unknown task 'impliret/unispeaker/wknw'", "Did you mean 'impliret/unispeaker/wknow'"]),
    validate("suite-unknown", sub(meta(suite="implirett")), ["unknown suite 'implirett'"]),
    validate("revision-mismatch", sub(meta(tasks=task_entry(revision="github:x/y@0000"))),
             ["revision 'github:x/y@0000' differs from the registered task's"]),
    validate("task-entry-not-object", sub(meta(tasks={TASK: "runs/x.trec"})), ["entry is a string; expected an object"]),
    validate("task-entry-unknown-field", sub(meta(tasks=task_entry(sha="x"))), ["unknown field 'sha'"]),
    validate("sha256-not-hex", sub(meta(tasks=task_entry(sha256="xyz"))), ["sha256 'xyz' is not 64 hex digits"]),
    validate("sha256-mismatch", sub(meta(tasks=task_entry(sha256="0" * 64))),
             [f"sha256 mismatch for {RUN}", "the file hashes to " + _sha(RUN_TEXT)]),
    validate("model-without-revision", sub(meta(models=[{"name": "org/model"}])), ["models[0].revision is missing"]),
    validate("adapter-not-object", sub(meta(adapter=["bm25"])), ["field 'adapter' is a list"]),

    # ---- the folder: names, hidden and code files, links, folders, pipes
    validate("run-wrong-name", {**sub(meta(tasks=task_entry(run="runs/wknow.trec"))), "s/runs/wknow.trec": RUN_TEXT},
             ["run path 'runs/wknow.trec' should be runs/impliret__unispeaker__wknow.trec"]),
    validate("hidden-file", sub(extra={"runs/.impliret__unispeaker__temporal.trec": RUN_TEXT}),
             ["runs/.impliret__unispeaker__temporal.trec: not allowed"]),
    validate("code-file", sub(extra={"setup.py": "import os\nos.system('rm -rf ~')\n"}),
             ["setup.py: not allowed: a submission is data only"]),
    validate("extra-folder", sub(extra={"src/a.trec": RUN_TEXT}), ["src/: unexpected folder"]),
    validate("git-folder", sub(extra={".git/config": "[core]\n"}), [".git/: unexpected folder"]),
    validate("executable-run", sub(), [f"{RUN}: is executable (mode 755)", f"chmod a-x {RUN}"], setup=_executable),
    validate("run-linked-outside", sub(), [f"{RUN}: is a symbolic link"], setup=_link_run_outside),
    validate("runs-folder-linked-outside", sub(), ["runs: is a symbolic link", "goes through the symbolic link runs"],
             setup=_link_runs_folder_outside),
    validate("run-linked-inside", sub(), [f"{RUN}: is a symbolic link"], setup=_link_run_inside),
    validate("submission-json-linked", sub(), ["submission.json: is a symbolic link"], setup=_link_submission_json),
    validate("submission-folder-linked", sub(), ["is a symbolic link; submit a real directory"],
             setup=_link_submission_folder),
    validate("fifo-in-runs", sub(), ["runs/more.trec: is not a regular file"], setup=_fifo),
    validate("run-unlisted", sub(extra={"runs/impliret__unispeaker__temporal.trec": RUN_TEXT}),
             ["runs/impliret__unispeaker__temporal.trec: is not listed in submission.json"]),
    validate("run-missing", {"s/submission.json": json.dumps(meta()), "s/runs/.keep.trec": ""},
             [f"run file {RUN} does not exist"]),
    validate("submission-json-missing", {f"s/{RUN}": RUN_TEXT}, ["submission.json: missing"]),
    Case("folder-missing", ["submit", "validate", "{tmp}/nope"], names=("{tmp}/nope", "is not a directory")),
    Case("folder-is-a-file", ["submit", "validate", "{tmp}/s"], files={"s": "x"}, names=("{tmp}/s", "is not a directory")),

    # ---- run files: size, compression, encoding, lines
    validate("gzip-bomb", {"s/submission.json": "{}"}, [f"{RUN}.gz", "inflates to more than 100,000,000 bytes"],
             setup=_bomb),
    validate("gzip-corrupt", {"s/submission.json": "{}"}, [f"{RUN}.gz", "truncated or corrupt gzip file"],
             setup=_corrupt_gzip),
    validate("run-empty", sub(run=""), [f"{RUN}: is empty"]),
    validate("run-not-utf8", sub(run=RUN_TEXT.encode() + b"1 Q0 \xff 1 1.0 x\n"), [f"{RUN}, line 201", "is not UTF-8"]),
    validate("run-one-long-line", sub(run="0 Q0 " + "9" * 20_000), [f"{RUN}, line 1", "longer than 10,000 bytes"]),
    validate("run-five-columns", sub(run=lines(lambda r: r[3].pop())), [f"{RUN}, line 4", "expected 6 columns"]),
    validate("run-score-nan", sub(run=lines(_set(2, 4, "nan"))), [f"{RUN}, line 3", "score 'nan' is not a decimal"]),
    validate("run-score-underscore", sub(run=lines(_set(2, 4, "3_0"))), [f"{RUN}, line 3", "score '3_0'"]),
    validate("run-score-overflow", sub(run=lines(_set(5, 4, "1e999"))), [f"{RUN}, line 6", "is not finite"]),
    validate("run-rank-text", sub(run=lines(_set(1, 3, "first"))), [f"{RUN}, line 2", "rank 'first' is not an integer"]),
    validate("run-bom", sub(run="\ufeff" + RUN_TEXT), [f"{RUN}, line 1", "byte-order mark"]),
    validate("run-duplicate-doc", sub(run=RUN_TEXT + RUN_TEXT.splitlines(keepends=True)[0]),
             [f"{RUN}, line 201", "appears twice for query '0'"]),
    validate("run-all-equal", sub(run=lines(lambda rows: [r.__setitem__(4, "1.0") for r in rows])),
             [f"{RUN}: every score is 1.0"]),
    validate("run-15000-wrong-ids", sub(run=WRONG_IDS),
             [f"{RUN}, line 201", "query id 'q-0'", "15,000 lines in all name a query id"]),
    validate("run-unknown-doc", sub(run=lines(_set(0, 2, "no-such-doc"))), [f"{RUN}, line 1", "'no-such-doc'"]),

    # ---- path escapes in every path field
    validate("run-path-absolute", sub(meta(tasks=task_entry(run="/etc/passwd"))), ["run path '/etc/passwd' is absolute"]),
    validate("run-path-dotdot", sub(meta(tasks=task_entry(run="runs/../../../etc/passwd"))), ["contains '..'"]),
    validate("run-path-backslash", sub(meta(tasks=task_entry(run="runs\\..\\x.trec"))), ["uses backslashes"]),
    validate("run-path-through-link", sub(meta(tasks=task_entry(run="elsewhere/x.trec"))),
             ["goes through the symbolic link elsewhere"],
             setup=lambda tmp: os.symlink("/etc", tmp / "s" / "elsewhere")),
    Case("scores-run-path-swapped", ["leaderboard", "export-trec", S, "--out", "{tmp}/out"], files=sub(),
         setup=_scored(_swap_run_path), names=("scores.json", f"run is '/etc/passwd' in scores.json")),
    Case("scores-inputs-dotdot", ["leaderboard", "export-mteb", S, "--out", "{tmp}/out"], files=sub(),
         setup=_scored(_dotdot_inputs), names=("scores.json", "manifest.inputs[../../../etc/passwd] is not produced")),
    validate("scores-linked", sub(), ["scores.json: is a symbolic link"], setup=_scores_link),

    # ---- scores.json that does not match its runs
    validate("scores-forged-query", sub(), ["scores.json", f"task {TASK}, measure nDCG@10, query 1 is 1.0"],
             setup=_scored(_forge_query)),
    validate("scores-forged-mean", sub(), ["scores.json", f"task {TASK}, mean nDCG@10 is 0.99"], setup=_scored(_forge_mean)),
    validate("scores-inputs-emptied", sub(), ["manifest.inputs[submission.json] is missing"], setup=_scored(_empty_inputs)),
    validate("scores-forged-average", sub(), ["full_benchmark_avg is not produced by a recomputation"],
             setup=_scored(_forge_average)),
    validate("scores-huge-resamples", sub(), ["manifest n_resamples 1000000000000 is not an integer from 1 to 10,000"],
             setup=_scored(_huge_resamples)),
    validate("scores-malformed", sub(extra={"scores.json": '{"kind": "submission_scores",'}),
             ["scores.json, line 1", "malformed JSON"]),
    Case("board-of-forged-scores", ["leaderboard", "build", "--root", "{tmp}/lb"], files=sub(),
         setup=_board_of_tampered, names=("tiny-bm25: invalid submission", "measure nDCG@10, query 1 is 1.0")),

    # ---- injection in every text field
    validate("system-pipe", sub(meta(system="x | 1.0 | 1.0 |")), ["field 'system' ('x | 1.0 | 1.0 |') has characters"]),
    validate("system-newline", sub(meta(system="x\n| 1 | forged |")), ["field 'system'", "U+000A"]),
    validate("system-html", sub(meta(system="<img src=x onerror=alert(1)>")), ["field 'system'", "not accepted"]),
    validate("description-newline", sub(meta(description="ok.\n| 1 | **forged** | 0.99 |")),
             ["field 'description'", "U+000A"]),
    validate("description-bidi", sub(meta(description="abc\u202edcba")), ["field 'description'", "U+202E"]),
    validate("contact-carriage-return", sub(meta(contact="me@example.org\r")), ["field 'contact'", "U+000D"]),
    validate("url-javascript", sub(meta(url="javascript:alert(1)")), ["field 'url' ('javascript:alert(1)')"]),
    validate("url-angle-brackets", sub(meta(url="https://x.org/><script>")), ["field 'url'", "not accepted"]),
    validate("date-injection", sub(meta(date="2024|01|01")), ["field 'date' ('2024|01|01')"]),
    validate("version-injection", sub(meta(gapbench_version="0.1 <b>")), ["field 'gapbench_version'"]),
    validate("adapter-name-pipe", sub(meta(adapter={"name": "a|b", "config": {}})), ["adapter.name ('a|b')"]),
    validate("model-name-dotdot", sub(meta(models=[{"name": "../x", "revision": "main"}])), ["models[0].name ('../x')"]),
    validate("model-name-absolute", sub(meta(models=[{"name": "/abs", "revision": "main"}])), ["models[0].name ('/abs')"]),
    validate("model-revision-escape", sub(meta(models=[{"name": "org/m", "revision": "a/../../b"}])),
             ["models[0].revision ('a/../../b')"]),
    validate("task-name-newline", sub(meta(tasks={TASK + "\n| forged": task_entry()[TASK]})),
             ["unknown task 'impliret/unispeaker/wknow\\n| forged'"]),
    Case("export-mteb-model-dotdot", ["leaderboard", "export-mteb", S, "--out", "{tmp}/box/out"], files=sub(),
         setup=_mteb_model(".."), names=("models[0].name ('..') has characters that are not accepted",)),
    Case("export-trec-link-in-out", ["leaderboard", "export-trec", S, "--out", "{tmp}/out"], files=sub(),
         setup=_out_link, names=("{tmp}/out/impliret__unispeaker__wknow.trec: is a symbolic link",)),

    # ---- commands and options
    Case("build-linked-suite", ["leaderboard", "build", "--root", "{tmp}/lb"], files=sub(),
         setup=_board_with_linked_suite, names=("{tmp}/lb/impliret: is a symbolic link",)),
    Case("build-root-missing", ["leaderboard", "build", "--root", "{tmp}/nope"], names=("{tmp}/nope: no such folder",)),
    # a board of your own tasks whose suite.toml is broken: one line, naming the file and the line (issue 27)
    Case("build-own-board-bad-toml", ["leaderboard", "build", "--root", "{tmp}/lb"],
         files={"lb/mine/suite.toml": 'name = "mine"\n[[tasks]\n', "lb/mine/submissions/x/submission.json": "{}"},
         names=("{tmp}/lb/mine/suite.toml, line 2: malformed TOML",)),
    Case("build-own-board-no-tasks", ["leaderboard", "build", "--root", "{tmp}/lb"],
         files={"lb/mine/suite.toml": 'name = "mine"\nmeasure = "nDCG@10"\n',
                "lb/mine/submissions/x/submission.json": "{}"},
         names=("{tmp}/lb/mine/suite.toml: lists no task; each task is a [[tasks]] table",)),
    Case("build-folder-neither-suite-nor-board", ["leaderboard", "build", "--root", "{tmp}/lb"],
         files={"lb/mine/submissions/x/submission.json": "{}"},
         names=("'mine' is not a registered suite and the folder holds no suite.toml",
                "gapbench leaderboard init {tmp}/lb/mine --task DIR")),
    Case("build-alpha-nan", ["leaderboard", "build", "--root", "{tmp}/lb", "--alpha", "nan"], setup=_board_of("bm25"),
         names=("--alpha must be a finite number, got nan",)),
    Case("score-negative-seed", ["submit", "score", S, "--seed", "-1"], files=sub(), names=("seed -1 is not an integer",)),
    Case("score-invalid", ["submit", "score", S], files=sub(meta(system="a b")), names=("{tmp}/s", "field 'system'")),
]


# `submit validate` and `leaderboard build` print a submission's problems one per line under each file's path (issue
# 27; tests/test_hostile.py checks the layout): an expectation written as "FILE: message" or "FILE, line N: message"
# (the one-line form every other command keeps) is read as that file's heading followed by the indented error.
_IN_SUBMISSION = re.compile(r"^(submission\.json|scores\.json|setup\.py|src/|\.git/|runs(?:/[^\s:,]*)?)"
                            r"(?:, line (\d+))?(?::? (.*))?$")


def _grouped(name: str) -> str:
    m = _IN_SUBMISSION.match(name)
    if m is None or (m[2] is None and m[3] is None):
        return name
    return f"{m[1]}:\n  " + (f"line {m[2]}: " if m[2] else "") + (m[3] or "")


CASES = [dataclasses.replace(c, names=tuple(_grouped(n).replace("tiny-bm25: invalid submission",
                                                                "submissions/tiny-bm25: 2 errors in 1 file")
                                            for n in c.names))
         if list(c.argv[:2]) in (["submit", "validate"], ["leaderboard", "build"]) else c for c in CASES]
