"""TREC qrels and run files given to ``gapbench evaluate --qrels Q --run R``, and runs given with ``--task``.

Each malformed file must be refused with one line naming the file and the line (or the id) and saying what is
accepted: wrong column counts, numbers Python would read but trec_eval would not (``3_0``, ``+1``, Arabic-Indic
digits, ``nan``, ``1e400``), grades that would make pytrec_eval allocate gigabytes, duplicate pairs, empty, missing,
unreadable and binary files, broken gzip, invalid UTF-8, invisible characters between columns or inside ids, old Mac
line ends, endless lines, and runs that do not match the task. Named pipes and standard input are read once, so they
work like files. Valid files next to them (plain, BOM, CRLF, gzip, pipe, stdin) must evaluate.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from pathlib import Path

from . import Case

QRELS = "q1 0 d1 2\nq1 0 d3 1\nq2 0 d2 1\nq2 0 d6 0\nq3 0 d4 2\n"
RUN = "".join(f"{q} Q0 {d} {i} {10 - i}.5 sys\n" for q in ("q1", "q2", "q3") for i, d in enumerate(("d1", "d2", "d3",
                                                                                                  "d4", "d5", "d6"), 1))
Q, R = "{tmp}/qrels.txt", "{tmp}/run.txt"


def evaluate(case_id: str, names=(), *, qrels: str | bytes = QRELS, run: str | bytes = RUN, expect: int = 2,
             setup=None, qrels_arg: str = Q, run_arg: str = R, process: bool = False,
             stdin: bytes | None = None) -> Case:
    files = {"qrels.txt": qrels, "run.txt": run}
    argv = ["evaluate", "--qrels", qrels_arg, "--run", run_arg, "-m", "nDCG@10"]
    return Case(case_id, argv, files=files, expect=expect, names=tuple(names), setup=setup, process=process,
                stdin=stdin)


def bad_qrels(case_id: str, text: str | bytes, names=()) -> Case:
    return evaluate(case_id, (Q, *names), qrels=text)


def bad_run(case_id: str, text: str | bytes, names=()) -> Case:
    return evaluate(case_id, (R, *names), run=text)


def run_line(line: str) -> str:
    """The valid run with ``line`` put in as its second line."""
    lines = RUN.splitlines(keepends=True)
    return "".join([lines[0], line, *lines[1:]])


def qrels_line(line: str) -> str:
    lines = QRELS.splitlines(keepends=True)
    return "".join([lines[0], line, *lines[1:]])


# ---- a BEIR folder for --task: the run's ids are checked against its corpus and queries
_DOCS = {f"d{i}": f"document number {i} about topic {i}" for i in range(1, 7)}
_QUERIES = {"q1": "topic one", "q2": "topic two", "q3": "topic four"}
TASK_FILES = {
    "beir/corpus.jsonl": "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in _DOCS.items()),
    "beir/queries.jsonl": "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in _QUERIES.items()),
    "beir/qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, _, d, g in (line.split() for line in QRELS.splitlines())),
}


def with_task(case_id: str, run: str | bytes, names=(), expect: int = 2) -> Case:
    argv = ["evaluate", "--task", "{tmp}/beir", "--run", R, "-m", "nDCG@10"]
    return Case(case_id, argv, files={**TASK_FILES, "run.txt": run}, expect=expect, names=tuple(names))


# ---- named pipes: a writer thread feeds the FIFO once, as a shell pipe would
def fifo(name: str, payload: bytes):
    """A setup replacing the file ``name`` (under {tmp}) by a FIFO that a thread writes ``payload`` to, once.

    A reader that opened it a second time would wait forever for a writer; a guard thread opens it once more after
    20 s, which turns such a hang into an empty read, and so into a failing case rather than a stuck suite.
    """
    def setup(tmp: Path) -> None:
        path = tmp / name
        path.unlink()
        os.mkfifo(path)

        def write() -> None:
            try:
                with open(path, "wb") as fh:
                    fh.write(payload)
            except OSError:
                pass

        def guard() -> None:
            writer.join()
            time.sleep(20)
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader waits (ENXIO), or the case's folder is gone
                pass

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        threading.Thread(target=guard, daemon=True).start()
    return setup


def _unreadable(name: str):
    def setup(tmp: Path) -> None:
        (tmp / name).chmod(0)
    return setup


def _directory(name: str):
    def setup(tmp: Path) -> None:
        (tmp / name).unlink()
        (tmp / name).mkdir()
    return setup


def _missing(name: str):
    def setup(tmp: Path) -> None:
        (tmp / name).unlink()
    return setup


BOM = b"\xef\xbb\xbf"
LONG_ID = "d" * 1025

CASES = [
    # ---- column counts
    bad_qrels("qrels-three-columns", qrels_line("q1 0 d2\n"), ["line 2", "expected 4 columns", "found 3"]),
    bad_qrels("qrels-five-columns", qrels_line("q1 0 d2 1 extra\n"), ["line 2", "found 5"]),
    bad_run("run-five-columns", run_line("q1 Q0 d9 2 8.5\n"), ["line 2", "expected 6 columns", "found 5"]),
    # words after the tag are ignored, as trec_eval reads its own results.trunc (issue 42): evaluated, not refused;
    # that the score equals the six-column run's is tested byte for byte on out.test.aqc (test_trec_eval_command)
    evaluate("run-seven-columns", run=run_line("q1 Q0 d9 2 8.5 sys extra\n"), expect=0),
    evaluate("qrels-and-run-swapped", (Q, "line 1", "expected 6 columns", "found 4"), qrels_arg=R, run_arg=Q),
    # ---- numbers Python reads but trec_eval does not
    bad_qrels("qrels-grade-underscore", qrels_line("q1 0 d2 3_0\n"), ["line 2", "relevance '3_0' is not an integer"]),
    bad_qrels("qrels-grade-plus", qrels_line("q1 0 d2 +1\n"), ["line 2", "relevance '+1'"]),
    bad_qrels("qrels-grade-arabic-digits", qrels_line("q1 0 d2 \u0661\u0662\n"), ["line 2", "ASCII digits"]),
    bad_qrels("qrels-grade-float", qrels_line("q1 0 d2 1.0\n"), ["line 2", "relevance '1.0'"]),
    bad_qrels("qrels-grade-huge", qrels_line("q1 0 d2 2147483647\n"),
              ["line 2", "relevance 2147483647 is outside the grades trec_eval accepts (-127 to 127)"]),
    bad_qrels("qrels-grade-very-negative", qrels_line("q1 0 d2 -99999\n"), ["line 2", "relevance -99999 is outside"]),
    bad_qrels("qrels-grade-6000-digits", qrels_line(f"q1 0 d2 {'9' * 6000}\n"), ["line 2", "' is outside the grades"]),
    bad_run("run-score-6000-digits", run_line(f"q1 Q0 d9 2 {'9' * 6000} sys\n"), ["line 2", "' is not a finite number"]),
    bad_run("run-score-nan", run_line("q1 Q0 d9 2 nan sys\n"), ["line 2", "score nan is not a finite number"]),
    bad_run("run-score-inf", run_line("q1 Q0 d9 2 -inf sys\n"), ["line 2", "score -inf is not a finite number"]),
    bad_run("run-score-overflow", run_line("q1 Q0 d9 2 1e400 sys\n"), ["line 2", "score 1e400 is not a finite"]),
    bad_run("run-score-underscore", run_line("q1 Q0 d9 2 1_000.5 sys\n"),
            ["line 2", "score '1_000.5' is not a number"]),
    bad_run("run-score-word", run_line("q1 Q0 d9 2 high sys\n"), ["line 2", "score 'high' is not a number"]),
    bad_run("run-score-fullwidth", run_line("q1 Q0 d9 2 \uff19.5 sys\n"), ["line 2", "is not a number"]),
    bad_run("run-rank-float", run_line("q1 Q0 d9 2.5 8.5 sys\n"), ["line 2", "rank '2.5' is not an integer"]),
    bad_run("run-rank-underscore", run_line("q1 Q0 d9 1_0 8.5 sys\n"), ["line 2", "rank '1_0'"]),
    # ---- duplicates: trec_eval refuses them ("duplicate docs"), so does gapbench
    bad_qrels("qrels-duplicate-pair", QRELS + "q1 0 d1 0\n", ["line 6", "'d1' is judged twice for query 'q1'"]),
    bad_run("run-duplicate-doc", RUN + "q1 Q0 d1 7 0.5 sys\n", ["line 19", "'d1' appears twice for query 'q1'"]),
    # ---- empty, missing, not a file
    bad_qrels("qrels-empty", "", ["the qrels file is empty"]),
    bad_run("run-blank-lines-only", "\n  \n\t\n", ["the run file is empty"]),
    evaluate("run-missing", (R, "file not found"), setup=_missing("run.txt")),
    evaluate("qrels-is-directory", (Q, "is a directory, expected a file"), setup=_directory("qrels.txt")),
    # ---- bytes that are not UTF-8 text, and broken gzip
    bad_run("run-latin1", run_line("q1 Q0 caf\u00e9 2 8.5 sys\n").encode("latin-1"),
            ["line 2", "not valid UTF-8: byte 0xe9 at byte 10 of the line"]),
    bad_run("run-png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", ["line 1", "not valid UTF-8: byte 0x89"]),
    bad_qrels("qrels-truncated-gzip", gzip.compress("".join(f"q{i} 0 d{i} 1\n" for i in range(5000)).encode())[:300],
              ["truncated or corrupt gzip"]),
    bad_run("run-gzip-magic-then-junk", b"\x1f\x8b" + b"junk" * 20, ["truncated or corrupt gzip"]),
    # ---- invisible characters: between columns, inside ids, a BOM after the first line
    bad_run("run-nbsp-separator", run_line("q1\u00a0Q0 d9 2 8.5 sys\n"), ["line 2", "U+00A0 (NO-BREAK SPACE)"]),
    bad_run("run-nul-in-id", run_line("q1 Q0 d\x009 2 8.5 sys\n"), ["line 2", "column 8", "U+0000"]),
    bad_run("run-zero-width-in-id", run_line("q1 Q0 d\u200b9 2 8.5 sys\n"), ["line 2", "U+200B (ZERO WIDTH SPACE)"]),
    bad_qrels("qrels-bom-mid-file", qrels_line("\ufeffq1 0 d2 1\n"), ["line 2", "U+FEFF"]),
    bad_qrels("qrels-old-mac-line-ends", QRELS.replace("\n", "\r"), ["line 1", "old Mac line ends"]),
    bad_run("run-overlong-id", run_line(f"q1 Q0 {LONG_ID} 2 8.5 sys\n"), ["line 2", "is 1025 characters long"]),
    # ---- endless input: a line with no end is cut off at 64 KiB, whatever produces it
    bad_run("run-one-huge-line", "q1 Q0 " + "d" * 2_000_000, ["line 1", "line longer than 65,536 bytes"]),
    evaluate("run-dev-zero", ("/dev/zero", "line 1", "line longer than"), run_arg="/dev/zero"),
    # ---- a pipe and standard input carry bad lines like a file does
    evaluate("qrels-fifo-bad-grade", (Q, "line 2", "relevance 'x'"),
             setup=fifo("qrels.txt", qrels_line("q1 0 d2 x\n").encode())),
    evaluate("run-stdin-bad-score", ("/dev/stdin", "line 2", "score 'NaN?' is not a number"), run_arg="/dev/stdin",
             process=True, stdin=run_line("q1 Q0 d9 2 NaN? sys\n").encode()),
    # ---- runs given with --task: every id must be in the task
    with_task("task-unknown-document", run_line("q1 Q0 d99 2 8.5 sys\n"), [R, "document 'd99'", "query 'q1'"]),
    with_task("task-unknown-query", RUN + "q9 Q0 d1 1 1.5 sys\n", [R, "query 'q9'"]),
    with_task("task-run-empty", "", [R, "the run file is empty"]),
    # ---- valid input: plain, BOM, CRLF, gzip, BOM inside gzip, a pipe, standard input, a task
    evaluate("valid-pair", expect=0),
    evaluate("valid-bom", qrels=BOM + QRELS.encode(), run=BOM + RUN.encode(), expect=0),
    evaluate("valid-crlf", qrels=QRELS.replace("\n", "\r\n"), run=RUN.replace("\n", "\r\n"), expect=0),
    evaluate("valid-gzip", qrels=gzip.compress(QRELS.encode()), run=gzip.compress(RUN.encode()), expect=0),
    evaluate("valid-gzip-bom", qrels=gzip.compress(BOM + QRELS.encode()), expect=0),
    evaluate("valid-fifo-gzip", setup=fifo("run.txt", gzip.compress(RUN.encode())), expect=0),
    evaluate("valid-stdin", run_arg="/dev/stdin", process=True, stdin=RUN.encode(), expect=0),
    with_task("valid-task", RUN, expect=0),
]

if os.geteuid() != 0:  # root reads any file, so an unreadable one cannot be made
    CASES.append(evaluate("run-unreadable", (R, "permission denied"), setup=_unreadable("run.txt")))
