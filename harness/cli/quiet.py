"""Keep third-party chatter out of the way of gapbench's own lines on the command line.

Libraries gapbench drives print progress bars when loading weights (transformers, huggingface_hub), load reports and
advice through their loggers, and FutureWarning/DeprecationWarning blocks about their own internals. On stderr these
bury gapbench's progress and its one-line errors. The console command (``gapbench``, ``python -m gapbench``) therefore
starts with :func:`quiet_third_parties`; the Python API is left alone (a library does not configure its host).

``GAPBENCH_WARNINGS=show`` keeps everything as the libraries print it (to debug a library); so does any ``-W`` option
or ``PYTHONWARNINGS`` for Python's warnings. An environment variable the user set (``TRANSFORMERS_VERBOSITY``,
``HF_HUB_DISABLE_PROGRESS_BARS``, ``TOKENIZERS_PARALLELISM``) is never overridden.
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


def quiet_third_parties() -> None:
    """Quiet the libraries' progress bars, log records below ERROR and warnings about their internals (see module)."""
    if os.environ.get("GAPBENCH_WARNINGS", "").strip().lower() == "show":
        return
    for name, value in _LIBRARY_SETTINGS.items():
        os.environ.setdefault(name, value)
    if not sys.warnoptions:
        for category in _NOISY:
            # a warning attributed to a third-party module (gapbench's own warnings, if any, still show)
            warnings.filterwarnings("ignore", category=category, module=r"(?!gapbench\b)")
    root = logging.getLogger()
    if not root.handlers:  # records of loggers without a handler go to logging's last resort: one line instead
        handler = _OneLine(level=logging.ERROR)
        root.addHandler(handler)
