"""The command line itself: usage errors of every kind across commands, bad numeric and empty arguments, output paths
that are files or someone else's folders, cache kinds that would reach outside the cache, and signals.

A usage error names the option, argument or command and where help is (``Try 'gapbench CMD --help'``). Signals are
arranged by ``setup``: a thread waits for the gapbench process to reach the moment (blocked reading a named pipe, or
writing its run directory) and then signals it, so the case ends with 130 or 143 whatever the machine's speed.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

from . import Case

TASK = "impliret/multispeaker/wknow"
RUN = "q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\n"
QRELS = "q1 0 d1 1\n"
EVAL = {"run.txt": RUN, "qrels.txt": QRELS}


def usage(case_id: str, argv: list[str], names, *, process: bool = False) -> Case:
    return Case(case_id, argv, names=tuple(names), process=process)


def _in_thread(work) -> None:
    threading.Thread(target=work, daemon=True).start()


def _signal_holders(path: str, sig: int) -> bool:
    """Send ``sig`` to every other process that has ``path`` open (Linux /proc); whether there was one."""
    found = False
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if path in links:
            os.kill(pid, sig)
            found = True
    return found


def _signal_fifo_reader(sig: int):
    """Setup: a named pipe ``run.fifo``; once gapbench opens it to read (found through /proc), send ``sig``."""

    def setup(tmp: Path) -> None:
        fifo = tmp / "run.fifo"
        os.mkfifo(fifo)
        target = os.path.realpath(fifo)

        def work() -> None:
            end = time.monotonic() + 25
            while time.monotonic() < end:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # succeeds once a reader has it open
                    break
                except OSError:
                    time.sleep(0.005)
            else:
                return
            try:
                # the reader's open() returns a moment after ours, and only then is the pipe among its files
                while time.monotonic() < end and not _signal_holders(target, sig):
                    time.sleep(0.005)
                time.sleep(5)  # keep the pipe open, so the reader is still waiting when the signal lands
            finally:
                os.close(fd)

        _in_thread(work)

    return setup


def _signal_run_dir_writer(sig: int):
    """Setup: once ``out``'s hidden sibling holds a partial run.trec.gz, signal the process named in its name."""

    def setup(tmp: Path) -> None:
        def work() -> None:
            end = time.monotonic() + 25
            while time.monotonic() < end:
                for entry in os.scandir(tmp):
                    m = re.fullmatch(r"\.out\.tmp([0-9]+)", entry.name)
                    if m and (Path(entry.path) / f".run.trec.gz.tmp{m[1]}").exists():
                        os.kill(int(m[1]), sig)
                        return
                time.sleep(0.001)

        _in_thread(work)

    return setup


def _nothing_half_written(tmp: Path) -> None:
    """Check: the interrupted run left no run directory, no temporary (its hidden sibling, a ``.NAME.tmpPID`` file) and
    no run file kept in its fresh cache for a later run to take."""
    assert not (tmp / "out").exists()
    left = [p for p in tmp.rglob("*") if re.fullmatch(r"\..+\.(tmp|old)[0-9]+", p.name)]
    assert left == [], left
    assert list((tmp / "home").rglob("*.trec.gz")) == []


def _run_dir_beside(tmp: Path) -> None:
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("keep me\n")


def _empty_folder(tmp: Path) -> None:
    (tmp / "empty").mkdir()


def _cache_home(tmp: Path) -> None:
    (tmp / "home" / "cache" / "embeddings").mkdir(parents=True)
    (tmp / "home" / "keep.txt").write_text("outside the cache\n")


CACHE_ENV = {"GAPBENCH_HOME": "{tmp}/home"}

CASES = [
    # ---- usage errors: unknown options (near and far), missing arguments and options, values missing or not wanted
    usage("unknown-option-near", ["run", TASK, "-r", "bm25", "--retriver", "bm25"],
          ["no such option '--retriver'", "Did you mean '--retriever'", "Try 'gapbench run --help'"]),
    usage("unknown-option-far", ["tasks", "--bogus"], ["no such option '--bogus'", "the options are --json"]),
    usage("unknown-option-evaluate", ["evaluate", "--runn", "{tmp}/run.txt"],
          ["no such option '--runn'", "Did you mean '--run'", "Try 'gapbench evaluate --help'"]),
    usage("unknown-short-option", ["run", TASK, "-x", "bm25"], ["no such option '-x'", "Try 'gapbench run --help'"]),
    usage("missing-task-argument", ["run", "-r", "bm25"], ["missing argument 'task'", "Try 'gapbench run --help'"]),
    usage("missing-retriever-option", ["run", TASK], ["missing option '--retriever' / '-r'"]),
    usage("missing-run-option", ["evaluate", "--qrels", "{tmp}/qrels.txt"], ["missing option '--run'"]),
    usage("missing-gap-task", ["gap", "--retrievers", "bm25"], ["missing argument 'task'", "gapbench gap --help"]),
    usage("option-without-value", ["run", TASK, "-r"], ["option '-r' requires an argument", "gapbench run --help"]),
    usage("depth-without-value", ["gap", TASK, "--depth"], ["option '--depth' requires an argument"]),
    usage("flag-given-a-value", ["tasks", "--json=yes"], ["option '--json' does not take a value"]),
    usage("extra-argument", ["tasks", "extra"], ["got unexpected extra argument(s) (extra)", "gapbench tasks --help"]),
    usage("extra-argument-cache-info", ["cache", "info", "embeddings"], ["unexpected extra argument(s) (embeddings)"]),
    usage("two-cache-kinds", ["cache", "clear", "a", "b"], ["unexpected extra argument(s) (b)"]),
    # ---- mistyped commands and sub-commands suggest the close one; a far miss lists them
    usage("mistyped-command", ["rnu"], ["no such command 'rnu'", "Did you mean 'run'", "Try 'gapbench --help'"]),
    usage("mistyped-cache-sub", ["cache", "clr"], ["no such command 'clr'", "Did you mean 'clear'"]),
    usage("mistyped-argus-sub", ["argus", "audt"], ["no such command 'audt'", "Did you mean 'audit'"]),
    usage("mistyped-submit-sub", ["submit", "valdate"], ["Did you mean 'validate'", "gapbench submit --help"]),
    usage("mistyped-board-sub", ["leaderboard", "bild"], ["Did you mean 'build'", "gapbench leaderboard --help"]),
    usage("unknown-command", ["xyzzy"], ["no such command 'xyzzy'", "the commands are tasks, run, evaluate"]),
    # ---- values of the wrong type
    usage("k-not-a-number", ["run", TASK, "-r", "bm25", "--k", "abc"], ["invalid value for '--k'", "(got 'abc')"]),
    usage("k-fraction", ["run", TASK, "-r", "bm25", "--k=2.5"], ["invalid value for '--k'", "(got '2.5')"]),
    usage("alpha-not-a-number", ["compare", "a", "b", "--alpha", "five"], ["invalid value for '--alpha'", "'five'"]),
    usage("max-queries-word", ["gap", TASK, "--max-queries", "all"], ["invalid value for '--max-queries'", "'all'"]),
    usage("huge-integer-text", ["run", TASK, "-r", "bm25", "--k", "9" * 5000], ["invalid value for '--k'", "...')"]),
    # ---- numbers out of range, refused before any work
    usage("k-zero", ["run", TASK, "-r", "bm25", "--k", "0"], ["--k must be greater than or equal to 1, got 0"]),
    usage("k-negative", ["run", TASK, "-r", "bm25", "--k", "-5"], ["--k must be greater than or equal to 1, got -5"]),
    usage("k-absurd", ["run", TASK, "-r", "bm25", "--k", "1" + "0" * 30], ["--k must be at most 100,000", "31-digit"]),
    usage("seed-negative", ["run", TASK, "-r", "bm25", "--seed", "-1"], ["--seed must be greater than or equal to 0, got -1"]),
    usage("depth-zero", ["gap", TASK, "--depth", "0"], ["--depth must be greater than or equal to 1, got 0"]),
    usage("depth-absurd", ["gap", TASK, "--depth", "50000000"], ["--depth must be at most 100,000", "got 50,000,000"]),
    usage("pool-sizes-word", ["gap", TASK, "--pool-sizes", "abc"], ["--pool-sizes: 'abc' is not a whole number"]),
    usage("pool-sizes-negative", ["gap", TASK, "--pool-sizes", "10,-5"], ["--pool-sizes must be at least 1, got -5"]),
    usage("pool-sizes-exponent", ["gap", TASK, "--pool-sizes", "1e3"], ["--pool-sizes: '1e3' is not a whole number"]),
    usage("pool-sizes-absurd", ["gap", TASK, "--pool-sizes", "100," + "9" * 40],
          ["--pool-sizes must be at most 100000", "got a 40-digit number"]),
    usage("pool-sizes-endless", ["gap", TASK, "--pool-sizes", "5" * 6000], ["got a 6000-digit number"]),
    usage("max-queries-zero", ["gap", TASK, "--max-queries", "0"], ["--max-queries must be at least 1, got 0"]),
    usage("max-queries-negative", ["gap", TASK, "--max-queries", "-7"], ["--max-queries must be at least 1, got -7"]),
    # ---- empty values (an unset shell variable) are refused, not read as "the defaults"
    usage("measures-empty", ["run", TASK, "-r", "bm25", "-m", ""], ["no measures given", "omit -m for the defaults"]),
    usage("measures-only-commas", ["run", TASK, "-r", "bm25", "--measures", " , "], ["-m/--measures is ' , '"]),
    usage("retrievers-empty", ["gap", TASK, "--retrievers", ""], ["--retrievers is empty"]),
    usage("reranker-empty", ["run", TASK, "-r", "bm25", "--reranker", ""], ["--reranker is empty"]),
    usage("augment-empty", ["run", TASK, "-r", "bm25", "--augment", " "], ["--augment is empty"]),
    usage("gap-measure-empty", ["gap", TASK, "--measure", ""], ["--measure is empty"]),
    usage("llm-model-empty", ["gap", TASK, "--llm-model", ""], ["--llm-model is empty"]),
    usage("suite-with-reranker", ["run", "impliret", "-r", "bm25", "--reranker", "tournament"],
          ["impliret is a suite", "takes no --reranker"]),
    # ---- output paths: files, files as folders, and folders that are not run directories stay untouched
    Case("output-is-a-file", ["run", TASK, "-r", "bm25", "-o", "{tmp}/taken"], files={"taken": "keep me\n"},
         names=("{tmp}/taken is an existing file",)),
    Case("output-under-a-file", ["run", TASK, "-r", "bm25", "-o", "{tmp}/taken/run"], files={"taken": "keep me\n"},
         names=("{tmp}/taken/run", "is a file, so no folder can be made inside it")),
    Case("output-foreign-folder", ["run", TASK, "-r", "bm25", "-o", "{tmp}/mine"], setup=_run_dir_beside,
         names=("{tmp}/mine already holds 'notes.txt'", "not a gapbench run directory")),
    Case("output-root", ["run", TASK, "-r", "bm25", "-o", "/"], names=("/ already holds", "give a new or empty folder")),
    Case("gap-output-is-a-file", ["gap", TASK, "-o", "{tmp}/taken"], files={"taken": "x"},
         names=("--output {tmp}/taken is an existing file",)),
    # ---- cache kinds that would reach outside one kind of the cache
    Case("cache-kind-parent", ["cache", "clear", ".."], setup=_cache_home, env=CACHE_ENV,
         names=("unknown cache kind '..'", "Available: embeddings")),
    Case("cache-kind-root", ["cache", "clear", "/"], setup=_cache_home, env=CACHE_ENV, names=("unknown cache kind '/'",)),
    Case("cache-kind-absolute", ["cache", "clear", "{tmp}/home"], setup=_cache_home, env=CACHE_ENV,
         names=("unknown cache kind '{tmp}/home'",)),
    Case("cache-kind-mistyped", ["cache", "clear", "embedings"], setup=_cache_home, env=CACHE_ENV,
         names=("Did you mean 'embeddings'",)),
    Case("cache-kind-empty", ["cache", "clear", ""], setup=_cache_home, env=CACHE_ENV, names=("cache KIND is empty",)),
    # ---- the same through a real process
    usage("process-unknown-option", ["run", "nope", "-r", "bm25", "--bogus"], ["no such option '--bogus'"],
          process=True),
    usage("process-mistyped-sub", ["cache", "clr"], ["Did you mean 'clear'"], process=True),
    usage("process-bad-type", ["evaluate", "--run", "r", "--qrels", "q", "-m", "nDCG@10", "--json=1"],
          ["option '--json' does not take a value"], process=True),
    # ---- signals: one line and 128 + N, arranged to land while reading a pipe or writing the run directory
    Case("sigint-reading-a-pipe", ["evaluate", "--run", "{tmp}/run.fifo", "--qrels", "{tmp}/qrels.txt"],
         files={"qrels.txt": QRELS}, setup=_signal_fifo_reader(signal.SIGINT), process=True, expect=130),
    Case("sigterm-reading-a-pipe", ["evaluate", "--run", "{tmp}/run.fifo", "--qrels", "{tmp}/qrels.txt"],
         files={"qrels.txt": QRELS}, setup=_signal_fifo_reader(signal.SIGTERM), process=True, expect=143),
    # a cache of its own: with the session's, a run of the same ranked lists kept by an earlier test would be taken
    # (cache kind runs) and run.trec.gz never written, so the signal would have no write to land in
    Case("sigterm-writing-run-dir", ["run", TASK, "-r", "bm25", "-m", "nDCG@10", "-o", "{tmp}/out"],
         setup=_signal_run_dir_writer(signal.SIGTERM), process=True, expect=143, env={"GAPBENCH_HOME": "{tmp}/home"},
         check=_nothing_half_written),
    # ---- valid inputs next to them
    Case("valid-tasks-json", ["tasks", "--json"], expect=0),
    Case("valid-help", ["--help"], expect=0),
    Case("valid-no-arguments", [], expect=0),
    Case("valid-run-json", ["run", TASK, "-r", "bm25", "-m", "nDCG@10", "--json"], expect=0),
    Case("valid-run-into-empty-folder", ["run", TASK, "-r", "bm25", "-m", "nDCG@10", "--k", "10", "-o", "{tmp}/empty"],
         setup=_empty_folder, expect=0),
    Case("valid-evaluate", ["evaluate", "--run", "{tmp}/run.txt", "--qrels", "{tmp}/qrels.txt", "-m", "RR"],
         files=EVAL, expect=0),
    Case("valid-cache-clear-kind", ["cache", "clear", "embeddings"], setup=_cache_home, env=CACHE_ENV, expect=0),
]
