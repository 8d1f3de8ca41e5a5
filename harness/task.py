"""Task metadata and the task registry."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .errors import ConfigError
from .registry import Registry, provides, resolve_lazy
from .types import TaskData


@dataclass(frozen=True)
class Task:
    """Validated metadata plus a loader. ``loader`` returns :class:`TaskData`."""

    name: str
    loader: Callable[[], TaskData] = field(repr=False, compare=False)
    source: str = ""
    revision: str = ""
    split: str = "test"
    license: str = ""
    citation: str = ""
    description: str = ""
    main_measure: str = "nDCG@10"
    measures: tuple[str, ...] = ("nDCG@10", "R@100", "RR@10")
    n_docs: int | None = None
    n_queries: int | None = None
    instruction: str = ""
    # options a reranker takes on this task unless the user gives them, by reranker name: the settings a dataset's
    # authors ran their verifier with ({"tournament": {"batch_size": 6, "promote": 2, "max_final": 16}})
    reranker_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)
    # the corpus and queries a verifier reads when they differ from what the retrievers index (problems shown with
    # their solutions): data -> (corpus, queries)
    verifier_view: Callable[[TaskData], tuple[Any, Any]] | None = field(default=None, compare=False, repr=False)
    # more judgements an analysis reports beside the task's own, by label (OBLIQ's pooled qrels as "P"):
    # data -> {label: Qrels}; a declared hook, so no analysis special-cases a task by name
    extra_qrels: Callable[[TaskData], Mapping[str, Any]] | None = field(default=None, compare=False, repr=False)
    # the task string that makes this task again where it differs from the name (a local task: its folder or files
    # and options, ``/data/scifact:split=dev``); recorded in manifests, so re-scoring finds the data
    spec: str = ""
    # whether the data this task's revision names is on this machine, so that loading it downloads nothing: () -> ""
    # when it is, else why not and how to put it there. Set by a plugin whose data comes from a cache (ir_datasets'
    # home, BEIR's extracted zip); re-scoring asks it (``available_offline``) rather than knowing plugins by name
    data_on_disk: Callable[[], str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip():
            raise ConfigError(f"task name {self.name!r} is empty or has surrounding whitespace.")
        if self.main_measure not in self.measures:
            raise ConfigError(f"task {self.name}: main measure {self.main_measure} is not among {self.measures}.")

    def load(self) -> TaskData:
        data = self.loader()
        data.validate(self.name)
        return data

    def available_offline(self) -> tuple[bool, str]:
        """(True, "") when :meth:`load` reads only what is on this machine, else (False, why not and how to fix it).
        Local data (revision ``local``) and data shipped inside gapbench always are; another task only when its
        plugin's ``data_on_disk`` says so (whether the files match the revision a manifest recorded is the caller's
        comparison of ``revision``)."""
        if self.revision == "local" or self.source.startswith("gapbench package data"):
            return True, ""
        if self.data_on_disk is None:
            return False, f"its data would be downloaded ({self.source})"
        why = self.data_on_disk()
        return not why, why

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "revision": self.revision,
            "split": self.split,
            "license": self.license,
            "citation": self.citation,
            "main_measure": self.main_measure,
            "n_docs": self.n_docs,
            "n_queries": self.n_queries,
            **({"spec": self.spec} if self.spec else {}),
        }


TASKS: Registry[Task] = Registry(
    "task", hint="List them with `gapbench tasks`; a path to a BEIR folder also works (DIR:split=dev).",
    expects=provides(Task, factories=True), expected="a Task, or a function f(**options) -> Task",
)


def get_task(name: str | Task | os.PathLike[str]) -> Task:
    """A registered task by name (``NAME`` or ``NAME:key=value,...``), or a local BEIR-format folder given as a path."""
    if isinstance(name, Task):
        return name
    from .settings import build
    from .specs import check_one_line, parse_spec

    if isinstance(name, os.PathLike):
        name = os.fspath(name)

    check_one_line(name, "task name")
    if not name.strip():
        raise ConfigError("empty task name; name a task (list them with `gapbench tasks`) or a BEIR folder.")
    if name.strip().startswith("irds:"):
        # an ir_datasets id holds '/' (irds:beir/scifact/test:fields=title+text): its plugin parses the whole spec
        task: Task = _plugin("gapbench.tasks.irds:from_spec")(name)
        return task
    path = _as_path(name)
    if path is not None and path.is_dir():
        # a lazy "module:attr" string, as the registry keeps plugins: the core never imports a plugin statically;
        # a folder of SMART files (Cranfield, CACM) is told from a BEIR folder by its content
        folder_task: Task = _plugin(_SMART_TASK)(path) or _plugin(_FOLDER_TASK)(path)
        return folder_task
    folder = _folder_with_options(name)
    if folder is not None:
        with_options: Task = build(_plugin(_FOLDER_OPTIONS)(folder[0]), folder[1], f"BEIR folder {folder[0]}")
        return with_options
    _ensure_builtin()
    from .suites import SUITES

    registered = name.partition(":")[0].strip() in TASKS or name.partition(":")[0].strip() in SUITES
    if path is not None and path.exists() and not registered:
        raise ConfigError(
            f"task {name!r} is a file, not a task: give a registered task name (see `gapbench tasks`) or a BEIR folder "
            "holding corpus.jsonl, queries.jsonl and qrels/."
        )
    if _looks_like_path(name) or (not registered and path is not None and _parent_exists(path)):
        from .nearest import nearest_folder

        raise ConfigError(f"no such folder {name!r} (nor a registered task).{nearest_folder(path or name)}")
    base, options = parse_spec(name, "task")
    _reject_suite(base, options)
    entry = TASKS.get(base)
    if isinstance(entry, Task):
        if options:
            raise ConfigError(
                f"task {base!r} takes no options (got {', '.join(options)}); write it as {base!r} alone."
            )
        return entry
    made: Task = build(entry, options, f"task {base!r}")
    return made


def _plugin(target: str) -> Callable[..., Any]:
    """The plugin function a lazy ``"module:attr"`` string names (the core imports no plugin statically)."""
    return cast("Callable[..., Any]", resolve_lazy(target))


_FOLDER_TASK = "gapbench.tasks.local:beir_folder_task"
_FOLDER_OPTIONS = "gapbench.tasks.local:folder_options"
_SMART_TASK = "gapbench.tasks.smart:smart_folder_task"


def _parent_exists(path: Path) -> bool:
    """A name such as ``data/cranfeld`` whose first folder ``data`` exists is a mistyped path, not an unknown task."""
    return len(path.parts) > 1 and path.parts[0] not in (".", "") and path.parents[len(path.parts) - 2].is_dir()


def _folder_with_options(name: str) -> tuple[Path, dict[str, str]] | None:
    """(folder, options) for ``DIR:key=value,...`` where ``DIR`` is an existing folder, else None. A path may hold
    ':' itself, so each ':' is tried from the right: the longest folder before a ``key=value`` list wins."""
    from .specs import parse_spec

    cut = len(name)
    while (cut := name.rfind(":", 0, cut)) > 0:
        head, rest = name[:cut], name[cut + 1:]
        path = _as_path(head)
        if path is not None and path.is_dir() and "=" in rest.partition(",")[0]:
            _, options = parse_spec(f"folder:{rest}", "task")
            return path, options
    return None


def _as_path(name: str) -> Path | None:
    """``name`` as a local path, or None when it cannot be one (a null byte, an unknown ~user, a name too long)."""
    try:
        path = Path(name).expanduser()
        path.exists()
    except (OSError, ValueError, RuntimeError):
        return None
    return path


def _looks_like_path(name: str) -> bool:
    # registered names contain '/' too (beir/arguana), so only explicit path forms count
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "./", "~")) or "\\" in name or ".." in parts or "." in parts


def _reject_suite(base: str, options: dict[str, str]) -> None:
    """A suite names several tasks: it is run whole by ``gapbench run SUITE`` and takes no options."""
    from .suites import SUITES

    if base not in SUITES:
        return
    suite = SUITES.get(base)
    if options:
        raise ConfigError(
            f"suite {base!r} takes no options (got {', '.join(options)}); options belong to single tasks, for "
            f"example {suite.tasks[0]}:OPTION=VALUE."
        )
    raise ConfigError(
        f"{base!r} is a suite of {len(suite.tasks)} tasks, not a single task; run it with `gapbench run {base} -r "
        f"RETRIEVER`, or name one of its tasks, for example {suite.tasks[0]!r}."
    )


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


def check_plain_name(value: object, option: str, where: str, example: str = "test") -> str:
    """``value`` when it is a plain name (letters, digits and ``._+-``, no path separator, not ``.`` or ``..``),
    else a :class:`ConfigError`: an option that becomes part of a file name (a split: ``qrels/<split>.tsv``) must not
    name a file elsewhere, since task strings also come back from run manifests and ``--data``."""
    text = str(value)
    if not isinstance(value, str) or not _PLAIN_NAME.fullmatch(text) or text.strip(".") == "":
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise ConfigError(f"{where}: {option}={shown!r} is not a plain name; {option} names a file inside the folder "
                          f"(letters, digits and ._+-, no '/', '\\' or '..'), for example {option}={example}.")
    return text


def confined(path: Path, folder: Path, what: str) -> Path:
    """``path`` resolved, when it lies inside ``folder`` resolved (a symbolic link out of the folder is refused):
    a task's files are its folder's, wherever a task string came from."""
    real, root = path.resolve(), folder.resolve()
    if real != root and root not in real.parents:
        raise ConfigError(f"{what} {path} leads outside its folder {folder} (to {real}); a task reads only the files "
                          "inside its folder: copy the file in instead of linking to it.")
    return real


def register_task(name: str, obj: Task | Callable[..., Task] | str | None = None, *, replace: bool = False) -> Any:
    """Register a :class:`Task` or a factory ``f(**options) -> Task`` (decorator without ``obj``)."""
    return TASKS.register(name, obj, replace=replace)


def list_tasks() -> list[Task]:
    _ensure_builtin()
    return [get_task(n) for n in TASKS.names()]


def _ensure_builtin() -> None:
    # the plugin package is named, not imported statically: the core never depends on a plugin (tests/test_layers.py)
    importlib.import_module("gapbench.tasks")  # registers the built-in tasks (light module: no heavy imports)
