"""The analyses a gap report shows: which kinds it knows, and finding the analysis files of a task on disk.

An analysis directory holds ``<kind>.json`` files (keys ``kind``, ``task``, ``version`` and the content) and the PNGs
the analysis drew; each directory is searched together with its immediate sub-directories. Every file of a kind
:mod:`gapbench.schemas` models is validated against its model when read (:func:`gapbench.schemas.validate_analysis`),
with the strict reader of every file gapbench writes (no NaN, no key twice).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataFormatError
from ..formats import StrictJSONError, parse_json_strict
from ..schemas import validate_analysis
from ..schemas.report import Ignored

# the analyses a full report carries, in page order: kind -> (title, what it shows)
KNOWN_ANALYSES: dict[str, tuple[str, str]] = {
    "gap": (
        "Retrieval-verification gap",
        "An LLM verifier reranks the pooled candidates of the retrievers (a lower bound of retrieve-then-verify) and "
        "the same pool with every missing gold document infused (an upper bound). The gap is the gold-infused verifier "
        "minus the best retriever; the pool-scaling curve shows both as the pool grows.",
    ),
    "coverage": (
        "Coverage of the corpus by the query set",
        "How the queries and their gold documents cover the corpus, cluster by cluster.",
    ),
    "argus_audit": (
        "ARGUS audit: retrieval-proneness scores",
        "The distribution of retrieval-proneness scores (RPS) over the task's queries.",
    ),
    "argus_compare": (
        "ARGUS before and after",
        "The task's measures before and after the ARGUS intervention.",
    ),
    "signals": (
        "Weak-retrieval signals and the gate",
        "How well each query-level signal predicts a retrieval failure (AUC), and the gate built from them.",
    ),
}


@dataclass
class Analysis:
    """An analysis file of the task: its kind, path, content and the PNGs shown with it."""

    kind: str
    source: Path
    data: dict
    pngs: list[Path]


def find_analyses(dirs: Iterable[str | os.PathLike], task: str,
                  aliases: Iterable[str] = ()) -> tuple[list[Analysis], list[Ignored]]:
    """The analyses of ``task`` under ``dirs`` (each searched with its immediate sub-directories), and the ignored ones;
    ``aliases`` are other names of the same task (a local folder's path on the machine its runs were made on)."""
    names = {task, *aliases}
    found: list[tuple[str, Path, dict]] = []
    ignored: list[Ignored] = []
    seen: set[Path] = set()
    for d in dirs:
        d = Path(d)
        if not d.exists():
            raise ConfigError(f"{d}: analysis directory not found; pass the folder an analysis wrote its output to.")
        files = [d] if d.is_file() else sorted(d.glob("*.json")) + sorted(d.glob("*/*.json"))
        for path in files:
            real = path.resolve()
            if real in seen or path.name.startswith("."):
                continue
            seen.add(real)
            kind, data = _read_analysis(path)
            if kind is None:
                continue
            if data.get("task") is None:  # a saved probe model, a dataset manifest: files of no task's analysis
                reason = f"kind {kind!r} with no task: not an analysis of a task"
                ignored.append(Ignored(source=str(path), reason=reason))
                continue
            if data.get("task") not in names:
                ignored.append(Ignored(source=str(path), reason=f"for task {data.get('task')!r}, not {task!r}"))
                continue
            found.append((kind, path, data))
    per_dir: dict[Path, int] = {}
    for _, path, _ in found:
        per_dir[path.parent] = per_dir.get(path.parent, 0) + 1
    out = []
    for kind, path, data in found:
        named = {Path(s).name for s in _strings(data) if s.lower().endswith(".png")}
        pngs = [
            p for p in sorted(path.parent.glob("*.png"))
            if p.name in named or p.stem.startswith(kind) or (per_dir[path.parent] == 1 and kind != "gap")
        ]
        if kind == "gap":
            pngs = [p for p in sorted(path.parent.glob("*.png")) if p.name == "pool_scaling.png" or p.name in named]
        out.append(Analysis(kind, path, data, pngs))
    order = list(KNOWN_ANALYSES)
    out.sort(key=lambda a: (order.index(a.kind) if a.kind in order else len(order), a.kind, str(a.source)))
    return out, ignored


def _read_analysis(path: Path) -> tuple[str | None, dict]:
    is_gap = path.name == "gap.json"
    try:  # the strict reader of every file gapbench writes and reads back: no NaN, no key twice
        data = parse_json_strict(path.read_bytes(), max_depth=64)
    except StrictJSONError as exc:
        if is_gap or path.stem in KNOWN_ANALYSES:
            raise DataFormatError(f"{str(exc).rstrip('.')}; re-run the analysis to rewrite it.", path=path,
                                  line=exc.line) from None
        return None, {}
    if not isinstance(data, dict):
        if is_gap:
            raise DataFormatError(f"expected a JSON object, found {type(data).__name__}.", path=path)
        return None, {}
    kind = data.get("kind")
    if kind is None and is_gap:
        kind = "gap"
    if not isinstance(kind, str) or kind == "report":
        return None, {}
    return kind, validate_analysis(kind, data, path)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
