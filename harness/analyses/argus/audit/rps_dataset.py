"""An ARGUS RPS dataset folder read back as audit data: the files :func:`~gapbench.analyses.argus.tools.wikidata
.build_dataset` writes (``entities.jsonl``, ``relations.jsonl``, ``candidates.jsonl`` and the manifest
``argus_dataset.json``), checked, with each (target, tag) pair ranked against its stored neutral candidates::

    data = load_dataset("rps/")          # what `gapbench argus audit --dataset rps/` audits
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ....errors import DataFormatError
from ....formats import StrictJSONError, parse_json_strict, read_jsonl
from ....schemas import validate_analysis
from .inputs import AuditData, load_jsonl

FILES = {"entities": "entities.jsonl", "relations": "relations.jsonl", "candidates": "candidates.jsonl",
         "manifest": "argus_dataset.json"}


def read_candidates(path: Path, entities: set[str]) -> dict[tuple[str, str], tuple[str, ...]]:
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for n, obj in read_jsonl(path):
        x, t, cands = obj.get("target"), obj.get("related"), obj.get("candidates")
        if not isinstance(x, str) or not isinstance(t, str) or not isinstance(cands, list) or not cands:
            raise DataFormatError('expected {"target": QID, "related": QID, "candidates": [QID, ...]} with at least '
                                  "one candidate.", path=path, line=n)
        unknown = [c for c in cands if c not in entities or c == x]
        if unknown:
            raise DataFormatError(f"candidate {unknown[0]!r} of ({x}, {t}) is the target or missing from the "
                                  "entities file.", path=path, line=n)
        out[(x, t)] = tuple(cands)
    return out


def read_manifest(directory: Path) -> dict:
    """The folder's ``argus_dataset.json``, checked to be the manifest ``build_dataset`` writes: a folder without one
    (an audit's output, a BEIR folder) is named as such rather than by the first JSONL it lacks."""
    path = directory / FILES["manifest"]
    how = ("give a dataset folder written by `gapbench argus dataset build --out DIR` (or the entities and relations "
           "files)")
    if not directory.is_dir():
        raise DataFormatError(f"not a folder; {how}.", path=directory)
    if not path.is_file():
        raise DataFormatError(f"missing, so this is no ARGUS dataset folder; {how}.", path=path)
    try:
        manifest = parse_json_strict(path.read_bytes())
    except (OSError, StrictJSONError) as exc:  # the strict reader of every file gapbench wrote and reads back
        raise DataFormatError(f"cannot be read as JSON ({exc}); re-run `gapbench argus dataset build`.",
                              path=path, line=getattr(exc, "line", None)) from None
    kind = manifest.get("kind") if isinstance(manifest, dict) else None
    if kind != "argus_dataset":
        raise DataFormatError(f"a manifest of kind {kind!r:.40}, not 'argus_dataset'; {how}.", path=path)
    return validate_analysis("argus_dataset", manifest, path)


def load_dataset(directory: str | Path, *, relations: str = "directed") -> AuditData:
    """A built dataset folder (its manifest checked) as audit data whose pairs rank against their stored candidates."""
    d = Path(directory)
    read_manifest(d)
    data = load_jsonl(d / FILES["entities"], d / FILES["relations"], relations=relations)
    stored = read_candidates(d / FILES["candidates"], set(data.entities))
    return replace(data, source=str(d), candidates=stored)
