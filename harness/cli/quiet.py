"""Keep third-party chatter out of the way of gapbench's own lines on the command line.

Libraries gapbench drives print progress bars when loading weights (transformers, huggingface_hub), load reports and
advice through their loggers, and FutureWarning/DeprecationWarning blocks about their own internals. On stderr these
bury gapbench's progress and its one-line errors. The console command (``gapbench``, ``python -m gapbench``) therefore
starts with :func:`quiet_third_parties`; the Python API is left alone (a library does not configure its host).

Any other warning a library raises from its own code (a UserWarning that a dense run printed on every run, say)
becomes at most one line for the whole command, ``gapbench: LIBRARY warned: MESSAGE (...)``, and the rest are
hidden. A warning is a library's when the code that raised it lies under site-packages (or dist-packages) outside
gapbench; gapbench's own and the user's code keep Python's usual display.

``--verbose`` anywhere on the command line, or ``GAPBENCH_WARNINGS=show``, keeps everything as the libraries print it
(to debug a library); so does any ``-W`` option or ``PYTHONWARNINGS`` for Python's warnings. An environment
variable the user set (``TRANSFORMERS_VERBOSITY``, ``HF_HUB_DISABLE_PROGRESS_BARS``, ``TOKENIZERS_PARALLELISM``) is
never overridden.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

# Set before the libraries are imported, which read them once: quiet transformers' logger (load reports, advice),
# hide huggingface_hub's and transformers' progress bars, and the tokenizers warning printed after every fork.
_LIBRARY_SETTINGS = {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
_NOISY = (FutureWarning, DeprecationWarning, PendingDeprecationWarning)
_OWN = ("gapbench", "__main__")


class _OneLine(logging.Handler):
    """A library's ERROR (or worse) record as one line on stderr, naming the library; lesser records are dropped."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
            if len(text) > 300:
                text = text[:297] + "..."
            sys.stderr.write(f"gapbench: {record.name}: {text}\n")
        except Exception:  # a handler must never raise into the library that logged
            pass


VERBOSE = "--verbose"


def verbose_given(args: list[str]) -> tuple[list[str], bool]:
    """(the arguments without ``--verbose``, whether it was given): it may stand anywhere before a ``--``."""
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != VERBOSE] + args[end:]
    return kept, len(kept) != len(args)


class _OneWarning:
    """``warnings.showwarning`` for the command: a warning raised in a library's own code is shown as one line, the
    first time only; gapbench's own warnings (and any raised from the user's code) go to the previous handler."""

    def __init__(self, previous) -> None:
        self.previous = previous
        self.hidden = 0

    def __call__(self, message, category, filename, lineno, file=None, line=None) -> None:
        library = _library(str(filename))
        if library is None:
            self.previous(message, category, filename, lineno, file, line)
            return
        self.hidden += 1
        if self.hidden == 1:
            text = " ".join(str(message).split())
            text = text if len(text) <= 160 else text[:157] + "..."
            try:
                sys.stderr.write(f"gapbench: {library} warned: {text} ({category.__name__}; library warnings are "
                                 "kept to this one line: --verbose shows them all)\n")
            except Exception:  # a warning handler must never raise into the library that warned
                pass


def _library(filename: str) -> str | None:
    """The top-level package of a file installed as a library (under site-packages or dist-packages), except
    gapbench; None for gapbench, the standard library and the user's own code."""
    parts = filename.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            name = parts[i + 1].removesuffix(".py")
            return None if name in _OWN else name
    return None


def quiet_third_parties(verbose: bool | None = None) -> None:
    """Quiet the libraries' progress bars, log records below ERROR and warnings about their internals (see module);
    ``verbose`` (by default: ``--verbose`` among the command's arguments) leaves them all as they are."""
    if verbose is None:
        verbose = verbose_given(sys.argv[1:])[1]
    if verbose or os.environ.get("GAPBENCH_WARNINGS", "").strip().lower() == "show":
        return
    for name, value in _LIBRARY_SETTINGS.items():
        os.environ.setdefault(name, value)
    if not sys.warnoptions:
        for category in _NOISY:
            # a warning attributed to a third-party module (gapbench's own warnings, if any, still show)
            warnings.filterwarnings("ignore", category=category, module=r"(?!gapbench\b)")
        if not isinstance(warnings.showwarning, _OneWarning):
            warnings.showwarning = _OneWarning(warnings.showwarning)
    root = logging.getLogger()
    if not root.handlers:  # records of loggers without a handler go to logging's last resort: one line instead
        handler = _OneLine(level=logging.ERROR)
        root.addHandler(handler)
