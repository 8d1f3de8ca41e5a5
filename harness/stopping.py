"""The process-wide sign that the command is ending (Ctrl-C or SIGTERM, set by the CLI's signal handler), and what
an interrupted stage kept.

Signal handlers run in the main thread only; threads that wait on the network (LLM calls) look at this flag between
short waits and give up, so the main thread's clean-up does not sit for minutes on answers nobody will read.

A long stage that keeps finished work on disk (the embedding caches' chunks and pieces) says how much when it is
interrupted (:func:`note_kept`); the CLI's interruption line then names it instead of the generic "finished work is
kept", and a library caller finds the same sentence in the exception's notes (Python 3.11+).
"""

from __future__ import annotations

import threading

STOP = threading.Event()

_KEPT: dict[str, str] = {}  # where -> "kept N of M ... in WHERE", the last word per place
_LOCK = threading.Lock()


def start_command() -> None:
    """A command starts: no stop asked for and no note of what an earlier command kept, so that in a process that runs
    several (a notebook, a test run) one command's interruption line never names another's work."""
    STOP.clear()
    with _LOCK:
        _KEPT.clear()


def note_kept(where: str, sentence: str, exc: BaseException | None = None) -> None:
    """Record that an interrupted stage kept ``sentence``'s worth of finished work at ``where`` (a later note for the
    same place replaces it); also added to ``exc``'s notes, so a traceback outside the CLI shows it."""
    with _LOCK:
        _KEPT.pop(where, None)
        _KEPT[where] = sentence
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(f"gapbench: {sentence}; run the same command again to resume.")


def take_kept() -> list[str]:
    """The notes recorded since the last call, oldest first, and forget them (one command's interruption)."""
    with _LOCK:
        out = list(_KEPT.values())
        _KEPT.clear()
    return out
