"""Whether a ``--data`` copy is the set a published number was measured on, before ``gapbench reproduce`` grades it.

A row's published identity is the matrix's ``[[identity]]`` table for its task (cited counts: documents, judged queries
of the split, judgements, and a corpus fingerprint where gapbench knows the published files), completed by the
counts the task itself declares (``Task.n_docs``, ``Task.n_queries``). A copy is identified when every published count
it can be compared on matches; one that differs, or a task with no published identity at all, is refused
(:class:`DataIdentityError`, exit 2) unless the caller runs it ungraded.

The copy's folder is confined as ``gapbench run DIR`` confines a folder: a link inside it that leads out of it is
refused, except the corpus and queries files (large files are shared by linking), so judgements read through a link
never grade a row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError
from ..schemas.reproduce import DataIdentity, PublishedIdentity
from ..types import TaskData

# the entries a task folder may hold as links to elsewhere, as `gapbench run DIR` allows for its corpus and queries
SHAREABLE = frozenset({"corpus", "corpus.jsonl", "corpus.jsonl.gz", "queries.jsonl", "queries.jsonl.gz"})
COUNTS = ("documents", "queries", "judgements")


class DataIdentityError(ConfigError):
    """A ``--data`` copy that is not the published set (or cannot be told to be): refused before it is graded."""


def published_identity(task_name: str, task, identities: Mapping[str, PublishedIdentity]) -> DataIdentity | None:
    """The identity a row's number was published on: the matrix's table for ``task_name`` (no options), with the
    task's own declared counts where the table has none; None when neither says anything."""
    table = identities.get(task_name)
    counts = {"documents": getattr(task, "n_docs", None), "queries": getattr(task, "n_queries", None),
              "judgements": None, "fingerprint": None}
    if table is not None:
        counts.update({k: v for k, v in table.model_dump(include={*COUNTS, "fingerprint"}).items() if v is not None})
    if all(v is None for v in counts.values()):
        return None
    return DataIdentity(**counts)


def identity_of(data: TaskData, fingerprint: bool = False) -> DataIdentity:
    """What loaded data holds (the corpus fingerprint only when asked: hashing a large corpus takes a while)."""
    judgements = sum(len(data.qrels[q]) for q in data.qrels)
    return DataIdentity(documents=len(data.corpus), queries=len(data.queries), judgements=judgements,
                        fingerprint=data.corpus.fingerprint if fingerprint else None)


def differences(published: DataIdentity, found: DataIdentity) -> list[str]:
    """Each published count the copy differs on, as ``documents 40 (published 5183)``; empty when it matches."""
    out = []
    for name in (*COUNTS, "fingerprint"):
        want, got = getattr(published, name), getattr(found, name)
        if want is not None and got != want:
            shown = (f"{got[:12]}... (published {want[:12]}...)" if name == "fingerprint"
                     else f"{got} (published {want})")
            out.append(f"{name} {shown}")
    return out


def check_copy(row_task: str, folder: str, published: DataIdentity | None, found: DataIdentity) -> str:
    """'' when the copy in ``folder`` is the published set of ``row_task``, else why not (one sentence)."""
    if published is None:
        return (f"gapbench knows no published identity (counts or fingerprint) of {row_task}, so the copy in "
                f"{folder} cannot be told to be the set its numbers were measured on")
    diff = differences(published, found)
    if not diff:
        return ""
    return f"the copy of {row_task} in {folder} is not the published set: {', '.join(diff)}"


def refusal(row_id: str, why: str) -> DataIdentityError:
    return DataIdentityError(f"row {row_id!r}: {why}; give a complete, unchanged copy of the published set, or run "
                             "it with --ungraded to record the row as not comparable.")


def confine_copy(folder: str | os.PathLike, task_name: str) -> None:
    """Refuse a link in the task's folder (``DIR/<set>`` when it exists, else ``DIR``) that leads out of ``DIR``,
    except the corpus and queries files."""
    from ..task import confined

    root = Path(folder).expanduser().resolve()
    rest = task_name.split("/", 1)[1] if "/" in task_name else ""
    top = root / rest if rest and (root / rest).is_dir() else root
    for here, dirs, files in os.walk(top, followlinks=False):
        for name in (*dirs, *files):
            path = Path(here) / name
            if name not in SHAREABLE and path.is_symlink():
                confined(path, root, f"--data {task_name}: the file")
