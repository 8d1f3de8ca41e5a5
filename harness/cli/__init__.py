"""The ``gapbench`` command line. Bad input prints one line on stderr and exits with code 2."""

from __future__ import annotations

import difflib
import importlib
import itertools
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from .. import stopping
from ..errors import GapbenchError
from ..extras import missing_dependency
from .common import as_flags, one_line
from .quiet import verbose_given

app = typer.Typer(
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish and PowerShell
    no_args_is_help=True,
    help="gapbench: evaluate retrievers, and find where and why they miss.",
    epilog="The libraries gapbench drives keep their progress bars, load reports and Future/Deprecation warnings "
           "to themselves, and any other warning of theirs to one line; GAPBENCH_WARNINGS=show lets them through. "
           "So does --verbose, anywhere on the command line.",
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"gapbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True,
                                 help="Print gapbench's version and exit."),
    verbose: bool = typer.Option(False, "--verbose", help="Show the libraries' warnings and logs as they print them "
                                                           "(taken anywhere on the command line)."),
) -> None:
    """gapbench: evaluate retrievers, and find where and why they miss."""


def _register_commands() -> None:
    """Each command group of the core lives in its own module and adds its commands to the app (no heavy imports);
    the analyses add theirs through the entry-point group ``gapbench.analyses`` (:mod:`gapbench.plugins`), as an
    outside package's analysis does. A registration that cannot be used is named on stderr by :func:`main`; every
    other command still works."""
    from ..plugins import usable_analyses
    from . import board as cli_board
    from . import cache_command as cli_cache
    from . import compare as cli_compare
    from . import evaluate as cli_evaluate
    from . import local_llm as cli_local_llm
    from . import report_command as cli_report
    from . import reproduce as cli_reproduce
    from . import run as cli_run
    from . import submit as cli_submit
    from . import tasks as cli_tasks
    from . import trec_eval_command as cli_trec_eval

    # the order is the one `gapbench --help` lists: the core's commands, then the analyses' by name
    for module in (cli_tasks, cli_run, cli_evaluate, cli_compare, cli_cache, cli_board, cli_submit, cli_local_llm,
                   cli_report, cli_reproduce, cli_trec_eval):
        module.register(app)
    found, problems = usable_analyses()
    PLUGIN_PROBLEMS.extend(problems)
    for analysis in found.values():
        try:
            analysis.add_commands(app)
        except GapbenchError as exc:
            PLUGIN_PROBLEMS.append(f"analysis {analysis.name!r}: {exc}")


PLUGIN_PROBLEMS: list[str] = []  # one line per analysis registration that could not be used
_register_commands()


class _Interrupted(BaseException):
    """SIGINT or SIGTERM. Not a KeyboardInterrupt: typer turns that into a silent exit code 130 (older versions also
    print an empty line), and every ``finally`` and ``with`` between here and the signal still runs its clean-up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Watch:
    """Makes sure a SIGINT or SIGTERM reaches the main thread's handler, and its exception the command.

    Two ways one can be lost. (1) The kernel gives a process's signal to any of its threads that does not block it;
    numpy's BLAS and torch start native threads at import. Python then only notes the signal, and a main thread
    blocked in a system call (reading a pipe that never gets data) is never woken to run the handler. (2) The
    handler's exception lands in a ``__del__`` or a weakref callback, where Python drops it.

    Every delivery, in whichever thread, writes its number to the wakeup pipe (``signal.set_wakeup_fd``). A daemon
    thread reads it; when the main thread has not run the handler a quarter second later, it sends the signal to the
    main thread itself (``pthread_kill``), which interrupts its system call. A dropped exception is sent again the
    same way. A nudge that finds the command already interrupted is swallowed, so it never cuts into clean-up.
    """

    WAIT = 0.25  # seconds the main thread has to run the handler before it is nudged
    NUDGES = 40  # at most this many nudges per delivery (10 s), for a main thread stuck in C code

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.lock = threading.Lock()
        self.last_handled = 0.0  # monotonic time the handler last ran
        self.nudged: set[int] = set()  # signals sent to the main thread by the watch, not yet seen by the handler
        self.dropped = False  # the last interruption was dropped by Python: the next nudge raises again
        self.closed = threading.Event()
        self.main = threading.main_thread().ident

    def handler(self, signum, frame):
        with self.lock:
            self.last_handled = time.monotonic()
            nudge = signum in self.nudged
            self.nudged.discard(signum)
            if nudge and self.caught and not self.dropped:
                return  # the command is already being interrupted: let its clean-up run
            self.dropped = False
        self.caught.append(signum)
        stopping.STOP.set()  # worker threads waiting on the network give up too
        raise _Interrupted(signum)

    def nudge(self, signum: int) -> None:
        if self.closed.is_set() or self.main is None or not hasattr(signal, "pthread_kill"):
            return
        with self.lock:
            self.nudged.add(signum)
        try:
            signal.pthread_kill(self.main, signum)
        except (OSError, ValueError):  # the main thread is gone: the process is ending anyway
            pass

    def dropped_again(self, signum: int) -> None:
        """Python dropped the handler's exception: raise it once more where it counts."""
        with self.lock:
            self.dropped = True
        threading.Timer(0.05, self.nudge, (signum,)).start()

    def read(self, fd: int) -> None:
        """The watch thread: one byte per signal delivered, until the pipe's write end is closed."""
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                return
            if not data or self.closed.is_set():
                return
            for signum in dict.fromkeys(b for b in data if b in (signal.SIGINT, signal.SIGTERM)):
                arrived = time.monotonic()
                for _ in range(self.NUDGES):
                    if self.closed.wait(self.WAIT) or self.last_handled >= arrived:
                        break
                    self.nudge(signum)


def _forget_the_watch_in_a_child() -> None:
    """A forked child (a library's worker pool) must not write its own signals into the parent's watch pipe."""
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread: nothing was set here
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_the_watch_in_a_child)


@contextmanager
def _signals_interrupt() -> Iterator[list[int]]:
    """While the command runs, SIGINT and SIGTERM raise :class:`_Interrupted` in the main thread (see :class:`_Watch`
    for how a signal is kept from being lost). Yields the signals caught; a command that ends first is reported as
    interrupted all the same."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    watch = _Watch()

    def unraisable(info):
        if isinstance(info.exc_value, _Interrupted):
            watch.dropped_again(info.exc_value.signum)
        else:
            hook(info)

    hook = sys.unraisablehook
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    reader = threading.Thread(target=watch.read, args=(read_end,), name="gapbench-signal-watch", daemon=True)
    reader.start()
    previous = {s: signal.signal(s, watch.handler) for s in (signal.SIGINT, signal.SIGTERM)}
    sys.unraisablehook = unraisable
    stopping.STOP.clear()
    try:
        yield watch.caught
    finally:
        stopping.STOP.clear()  # the threads that saw it have been joined: the next command (in-process) starts afresh
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        sys.unraisablehook = hook
        watch.closed.set()
        signal.set_wakeup_fd(previous_fd)
        os.close(write_end)  # the watch thread reads the end of the pipe and stops
        reader.join(timeout=1.0)
        if not reader.is_alive():
            os.close(read_end)


def _interrupted(signum: int) -> int:
    name = signal.Signals(signum).name
    kept = stopping.take_kept()  # what the interrupted stages said they kept (stopping.note_kept)
    if kept:
        _say(f"gapbench: interrupted by {name}; nothing half-written was left; {'; '.join(kept)}; run the same "
             "command again to resume.")
        return 128 + signum
    _say(f"gapbench: interrupted by {name}; nothing half-written was left, and finished work (caches) is kept.")
    return 128 + signum


def _say(line: str) -> None:
    try:
        typer.echo(line, err=True)
    except (OSError, ValueError):  # stderr closed or gone: the exit code still tells
        pass


def _click_classes(name: str) -> tuple[type, ...]:
    """Class ``name`` from every click typer may use: its own copy (``typer._click``, typer >= 0.24) or the click
    package (older typer), plus whatever typer itself derives from, should the copy move again."""
    found: list[type] = []
    for module in ("typer._click.exceptions", "click.exceptions", "typer.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type):
            found.append(cls)
    for exported in (typer.BadParameter, typer.Abort):
        found.extend(c for c in type.mro(exported) if c.__name__ == name)
    return tuple(dict.fromkeys(found))


def _given_value(argv: list[str], exc) -> str | None:
    """What the user gave for the option a BadParameter is about (click does not keep it)."""
    opts = list(getattr(getattr(exc, "param", None), "opts", None) or [])
    value = None
    for i, token in enumerate(argv):
        for opt in opts:
            if not opt.startswith("-"):
                continue
            if token == opt and i + 1 < len(argv):
                value = argv[i + 1]
            elif opt.startswith("--") and token.startswith(opt + "="):
                value = token[len(opt) + 1:]
    return value if value is None or len(value) <= 60 else value[:57] + "..."


def _close(word: str, choices: list[str]) -> list[str]:
    """Near matches, compared without the leading dashes that every option shares."""
    bare = {c.lstrip("-"): c for c in choices}
    close = [bare[c] for c in difflib.get_close_matches(word.lstrip("-"), list(bare), n=3, cutoff=0.6)]
    # a long option's name at the start or end of the word typed (--topk: --k; --retrievers: --retriever)
    typed = re.sub(r"[-_]", "", word.lstrip("-"))
    inside = [c for c in choices if c.startswith("--") and (name := c[2:].replace("-", "")) and c not in close
              and typed != name and (typed.startswith(name) or typed.endswith(name) or name.startswith(typed))]
    return (close + sorted(inside, key=len, reverse=True))[:3]


def _command_path(args: list[str]) -> str:
    """'gapbench run' for the sub-command the arguments name, for errors raised before click knew it."""
    import typer.main

    command = typer.main.get_command(app)
    path = ["gapbench"]
    for token in args:
        sub = getattr(command, "commands", {}).get(token)
        if sub is None:
            break
        command, path = sub, [*path, token]
    return " ".join(path)


def _usage_message(exc, argv: list[str]) -> str:
    """One line for a click usage error: what was wrong, near matches, and where help is."""
    ctx = getattr(exc, "ctx", None)
    text = exc.format_message().strip()
    option = getattr(exc, "option_name", None)
    if option is not None and hasattr(exc, "possibilities"):  # no such option
        params = ctx.command.params if ctx is not None else []
        known = sorted({o for p in params for o in getattr(p, "opts", []) if o.startswith("-")})
        close = _close(option, list(exc.possibilities or []) or known)
        text = f"no such option {option!r}" + (f"; the options are {', '.join(known)}" if known else "")
        if close:
            text = f"no such option {option!r}. Did you mean " + " or ".join(repr(c) for c in close) + "?"
    command = re.match(r"No such command '(.*)'\.?$", text, re.S)
    if command and ctx is not None and hasattr(ctx.command, "list_commands"):
        names = list(ctx.command.list_commands(ctx))
        close = _close(command.group(1), names)
        text = f"no such command {command.group(1)!r}; the commands are {', '.join(names)}"
        if close:
            text = f"no such command {command.group(1)!r}. Did you mean " + " or ".join(repr(c) for c in close) + "?"
    if getattr(exc, "param", None) is not None and not text.startswith("Missing"):
        value = _given_value(argv, exc)
        if value is not None:
            text = f"{text.rstrip('.')} (got {value!r})"
    if text[:1].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    spaced = _spaced_measures(argv)
    if spaced and text.startswith("got unexpected extra argument"):  # `-m nDCG@10 R@100`: one value, commas
        text = (f"{text.rstrip('.')}; several measures are one value with commas: "
                f"{spaced[0]} {','.join(spaced[1])}")
    for token in sorted({t for t in argv if len(t) > 60}, key=len, reverse=True):
        text = text.replace(token, token[:57] + "...")  # click may quote whatever was typed, however long
    where = ctx.command_path if ctx is not None else _command_path(argv)
    return f"{text if text.endswith('?') else text.rstrip('.') + '.'} Try '{where} --help'."


MEASURE_FLAGS = ("-m", "--measures", "--measure")


def _spaced_measures(argv: list[str]) -> tuple[str, list[str]] | None:
    """(flag, values) when a measures flag is followed by two or more bare words (``-m nDCG@10 R@100``): a list of
    measures written with spaces where the flag takes one comma-separated value."""
    for i, arg in enumerate(argv):
        if arg in MEASURE_FLAGS:
            words = list(itertools.takewhile(lambda t: not t.startswith("-"), argv[i + 1:]))
            if len(words) >= 2 and all("@" in w or w.replace("_", "").isalnum() for w in words[1:]):
                return arg, words
    return None


COMPLETION_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def _completion_for_named_shell(args: list[str]) -> int | None:
    """``--install-completion SHELL`` / ``--show-completion SHELL`` done for the shell named (exit 0), an unknown
    shell refused before anything is written; None when no shell is named (typer then uses the detected one). typer
    reads both as flags when it can detect the shell, so it would install for that shell whatever name followed."""
    from ..errors import ConfigError

    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            return None  # a command: the completion flags belong to gapbench itself, before any command
        flag, eq, value = arg.partition("=")
        if flag not in ("--install-completion", "--show-completion"):
            continue
        shell = value if eq else (args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None)
        if shell is None:
            return None
        if shell not in COMPLETION_SHELLS:
            shown = shell if len(shell) <= 40 else shell[:37] + "..."
            raise ConfigError(f"{flag} {shown!r}: not a shell gapbench completes; give one of "
                              f"{', '.join(COMPLETION_SHELLS)}, or {flag} alone for the shell you run it from "
                              "(nothing was written).")
        from typer._completion_shared import get_completion_script, install

        if flag == "--install-completion":
            done, path = install(shell=shell, prog_name="gapbench", complete_var="_GAPBENCH_COMPLETE")
            typer.echo(f"{done} completion installed in {path}\nCompletion will take effect once you restart the "
                       "terminal")
        else:
            typer.echo(get_completion_script(prog_name="gapbench", complete_var="_GAPBENCH_COMPLETE", shell=shell))
        return 0
    return None


def main(argv: list[str] | None = None) -> int:
    """The command line: 0 done, 1 a significant regression (regress), 2 bad input, 128+N ended by signal N."""
    args = list(sys.argv[1:] if argv is None else argv)
    for problem in PLUGIN_PROBLEMS:
        _say(f"gapbench: warning: {one_line(problem)}")
    # --verbose, anywhere on the line, keeps the libraries' warnings as they print them (quiet.py; read at start-up)
    args = verbose_given(args)[0]
    stopping.start_command()  # the one place commands start: nothing of an earlier command's interruption is said
    try:
        if (done := _completion_for_named_shell(args)) is not None:
            return done
        with _signals_interrupt() as caught:
            rv = app(args=args, prog_name="gapbench", standalone_mode=False)
        if caught:
            return _interrupted(caught[0])
    except _Interrupted as exc:
        return _interrupted(exc.signum)
    except KeyboardInterrupt:  # raised by other means than our handler (another thread, interrupt_main)
        return _interrupted(signal.SIGINT)
    except GapbenchError as exc:
        _say(f"gapbench: error: {one_line(as_flags(str(exc)))}")
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):
            # typer's answer when the reader of our output went away (`gapbench ... | head`) is exit 1, which here
            # means "a significant regression"; end as a process killed by SIGPIPE would, silently
            return 141
        raise
    except Exception as exc:
        help_text = getattr(exc, "format_message", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and isinstance(exc, _click_classes("UsageError")) \
                and callable(help_text):
            # `gapbench` or `gapbench cache` alone: the help, as --help gives it (rich printed it already)
            typer.echo(help_text(), nl=False)
            return 0
        if isinstance(exc, _click_classes("UsageError") + _click_classes("ClickException")):
            _say(f"gapbench: error: {one_line(_usage_message(exc, args))}")
            return 2
        if isinstance(exc, _click_classes("Abort")):
            if isinstance(exc.__cause__, KeyboardInterrupt):  # older typer's answer to one
                return _interrupted(signal.SIGINT)
            _say("gapbench: aborted.")
            return 130
        if isinstance(exc, ModuleNotFoundError) and (missing := missing_dependency(exc, args)):
            _say(f"gapbench: error: {missing}")
            return 2
        raise
    if isinstance(rv, int) and not isinstance(rv, bool):
        if rv == 130:  # typer's own answer to a KeyboardInterrupt it caught
            return _interrupted(signal.SIGINT)
        return rv
    return 0


if __name__ == "__main__":
    sys.exit(main())
