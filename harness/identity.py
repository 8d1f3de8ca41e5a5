"""Task identity of a run directory: a local task is its content, not its path.

A local task (a BEIR folder, ``local/trec`` files, ``beir/NAME:data_dir=DIR``; its manifest records the revision
``local``) is named by the fingerprints of its corpus, queries and qrels, as the key ``local:<16 hex digits>``. So the
same folder copied to another path, or checked out on a CI runner, is the same task for ``compare``, ``regress`` and
``report``, while another folder at the old path is not. Every other task is its name, as before.

The manifest also records how to make the task again (``task.spec``: the folder or files and their options), which is
where re-scoring looks for the data first; run directories written before ``spec`` existed have it rebuilt from what
their manifest recorded (:func:`recorded_spec`).

>>> identity_of(Path("runs/bm25"), load_results("runs/bm25")).key  # doctest: +SKIP
'local:3f0c9a1be2d47a55'
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from .errors import DataFormatError

LOCAL_REVISION = "local"
LOCAL_PREFIX = "local:"
_REMAKE = "re-create the run directory with `gapbench run TASK -r RETRIEVER --output DIR`"
_TREC_SOURCE = re.compile(r"^local TREC files: topics (?P<topics>.+), qrels (?P<qrels>.+), corpus (?P<corpus>.+)$")
_BEIR_COPY = re.compile(r"^local BEIR copy (?P<dir>.+)$")


def content_key(corpus: str, queries: str, qrels: str) -> str:
    """``local:<16 hex>``: the identity of a local task with these corpus, queries and qrels fingerprints."""
    digest = hashlib.sha256(f"{corpus}\n{queries}\n{qrels}".encode()).hexdigest()
    return f"{LOCAL_PREFIX}{digest[:16]}"


def data_key(data) -> str:
    """The identity key of loaded :class:`gapbench.types.TaskData` of a local task (all its queries, as a run
    records them)."""
    return content_key(data.corpus.fingerprint, data.queries.fingerprint, data.qrels.fingerprint)


def is_local_key(key: str) -> bool:
    return key.startswith(LOCAL_PREFIX)


@dataclass(frozen=True)
class RunIdentity:
    """What a run directory says about its task.

    ``key`` pairs run directories (``local:<hex>`` for a local task, else the task name); ``name`` is the task name
    results.json holds; ``spec`` how to make the task again (None when unknown); ``k`` the depth searched (None when
    no manifest records it)."""

    key: str
    name: str
    spec: str | None = None
    revision: str | None = None
    qrels: str | None = None
    seed: int = 0
    k: int | None = None
    split: str | None = None
    fingerprints: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def local(self) -> bool:
        return is_local_key(self.key)

    @property
    def label(self) -> str:
        """A short name for tables: a local task as its folder or file name with its key (paths differ by machine)."""
        return task_label(self.name, self.key)


def task_label(name: str, key: str) -> str:
    if not is_local_key(key):
        return name
    base = PurePath(name).name if PurePath(name).is_absolute() else name
    return f"{base or name} [{key}]"


def identity_of(directory: str | os.PathLike[str], results, *, check_name: bool = True) -> RunIdentity:
    """The :class:`RunIdentity` of the run directory ``directory`` whose Results are ``results`` (its manifest is
    read and checked by :func:`gapbench.store.read_manifest`). A manifest naming another task than results.json is an
    error, or with ``check_name=False`` (pairing directories, before the costly checks that report it) left to them."""
    from .store import read_manifest

    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        return RunIdentity(results.task, results.task)
    task = manifest["task"]
    name = task["name"]
    # Always the task of results.json as well: no directory can have another task's data read for it.
    if name != results.task and check_name:
        raise DataFormatError(f"names task {name!r}, but results.json in the same directory holds task "
                              f"{results.task!r}; one of the two was edited: {_REMAKE}.",
                              path=directory / "manifest.json")
    fps = manifest["fingerprints"]
    local = task["revision"] == LOCAL_REVISION
    key = content_key(fps["corpus"], fps["queries"], fps["qrels"]) if local else results.task
    # a registered local task (a plugin's own copy) is made again by its name
    spec = task.get("spec") or ((recorded_spec(task) or name) if local else None)
    return RunIdentity(key, results.task, spec, task["revision"], fps["qrels"], manifest["seed"], manifest.get("k"),
                       task.get("split"), dict(fps))


def check_run_data(directory: str | Path, data, *, instruction: str | None = None) -> None:
    """Refuse a run directory whose manifest's corpus or queries fingerprint is not that of ``data`` (the
    :class:`gapbench.types.TaskData` of the task it names, loaded here): a run made on another task that shares its
    ids (or an edited manifest) must not be taken in as a run of this one. ``instruction``: the task's query
    instruction (a run records its queries with it applied); looked up by the manifest's task name when not given.
    A directory without a manifest has nothing to check."""
    from .errors import GapbenchError
    from .store import read_manifest

    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        return
    name, fps = manifest["task"]["name"], manifest["fingerprints"]
    if instruction is None:
        from .task import get_task

        try:
            instruction = get_task(name).instruction
        except GapbenchError:
            instruction = ""
    queries = {data.queries.fingerprint}
    if instruction:
        queries.add(data.queries.with_instruction(instruction).fingerprint)
    for what, recorded, here in (("corpus", fps["corpus"], {data.corpus.fingerprint}), ("queries", fps["queries"],
                                                                                         queries)):
        if recorded not in here:
            raise DataFormatError(
                f"names task {name!r}, but records the {what} fingerprint {recorded[:16]}..., and the {what} of task "
                f"{name!r} here has {min(here)[:16]}...: the run was made on other data (another task sharing its ids, "
                f"another revision) or the manifest was edited; {_REMAKE} on task {name!r}.",
                path=directory / "manifest.json")


def recorded_spec(task: dict) -> str | None:
    """The task string of a local task from a manifest written before ``task.spec`` was recorded: a BEIR folder's
    name is its absolute path; ``beir/NAME`` from a local copy and ``local/trec`` name their files in ``source``."""
    name, source, split = task["name"], task.get("source", ""), task.get("split") or "test"
    if PurePath(name).is_absolute():
        return name if split == "test" else f"{name}:split={split}"
    copy = _BEIR_COPY.match(source)
    if name.startswith("beir/") and copy:
        return f"{name}:data_dir={copy['dir']},split={split}"
    files = _TREC_SOURCE.match(source)
    if files:
        return f"local/trec:topics={files['topics']},qrels={files['qrels']},corpus={files['corpus']}"
    return None
