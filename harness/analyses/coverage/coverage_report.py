"""The coverage report: :class:`CoverageReport` (the model of ``coverage.json``, :mod:`gapbench.schemas.coverage`)
built from a run's strata and metrics, and written as coverage.json, coverage.md and the PNGs
(``coverage_boxplot_<system>.png``: the measure per cluster, at most 30 clusters by mass; ``coverage_density.png``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...files import pyplot, write_figure
from ...schemas.coverage import CoverageReport, to_markdown
from ...types import Corpus
from .clusters import Strata
from .metrics import cluster_values

MAX_BOX_CLUSTERS = 30

__all__ = ["CoverageReport", "MAX_BOX_CLUSTERS", "build_report", "plot_boxplots", "plot_density", "save_coverage",
           "to_markdown"]


def build_report(fields: Mapping[str, Any], per_query: Mapping[str, Mapping[str, float]]) -> CoverageReport:
    """The report from coverage.json's parts as the pipeline computes them (``coverage`` blocks may carry their
    ``queries_per_cluster``, ``systems`` their integer cluster keys), keeping ``per_query`` for the plots."""
    data = dict(fields)
    data["coverage"] = _block(data["coverage"])
    data["systems"] = _systems(data["systems"])
    if data.get("augmented"):
        aug = data["augmented"]
        data["augmented"] = {**aug, "coverage": _block(aug["coverage"]), "systems": _systems(aug["systems"])}
    report = CoverageReport.model_validate({"kind": "coverage", "version": 1, **data})
    report._per_query = {s: dict(v) for s, v in per_query.items()}
    return report


def _block(coverage: Mapping[str, Any]) -> dict:
    return {k: v for k, v in coverage.items() if k != "queries_per_cluster"}


def _systems(systems: Mapping[str, Mapping[str, Any]]) -> dict:
    return {s: {**v, "per_cluster": {str(c): st for c, st in v["per_cluster"].items()}} for s, v in systems.items()}


def cluster_rows(strata: Strata, counts: Sequence[int]) -> list[dict]:
    """The ``clusters`` rows of coverage.json, in cluster order."""
    return [{"cluster_id": c, "label": strata.label(c), "top_entities": strata.top_entities(c, 10),
             "n_entities": len(strata.cluster_entities[c]), "mass": strata.mass(c), "n_queries": counts[c],
             "touched": counts[c] > 0} for c in range(strata.k)]


def sample_docs(strata: Strata, corpus: Corpus, c: int, n: int = 3) -> list[dict]:
    """Up to ``n`` documents of cluster ``c`` (most mentions of its entities, then id) with title and snippet."""
    out = []
    for d in strata.docs_by_mentions(c)[:n]:
        doc = corpus[d]
        out.append({"doc_id": d, "title": doc.title, "snippet": " ".join(doc.text.split())[:200]})
    return out


def missing_strata(strata: Strata, corpus: Corpus, counts: Sequence[int]) -> list[dict[str, Any]]:
    """Clusters no query touches, heaviest first, each with sample documents."""
    missing: list[dict[str, Any]] = [{"cluster_id": c, "label": strata.label(c), "mass": strata.mass(c),
                "sample_docs": sample_docs(strata, corpus, c)} for c in range(strata.k) if counts[c] == 0]
    missing.sort(key=lambda m: (-m["mass"], m["cluster_id"]))
    return missing


def entities_summary(method: str, model: str | None, n_docs: int, doc_ents: Mapping[str, Sequence[str]]) -> dict:
    """The ``entities`` object of coverage.json."""
    return {"method": method, "model": model, "n_docs": n_docs,
            "n_docs_with_entities": sum(1 for fs in doc_ents.values() if fs),
            "n_mentions": sum(len(fs) for fs in doc_ents.values()),
            "n_unique": len({f for fs in doc_ents.values() for f in fs})}


def query_rows(qclusters: Mapping[str, Iterable[int]], synthetic: Mapping[str, Any] | None) -> list[dict]:
    """The ``queries`` rows of coverage.json; accepted synthetic queries are marked."""
    syn_ids = {q["query_id"] for q in (synthetic or {}).get("queries", []) if q["status"] == "accepted"}
    return [{"query_id": q, "clusters": sorted(cs), "synthetic": q in syn_ids} for q, cs in qclusters.items()]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "system"


def plot_boxplots(r: CoverageReport, out: Path) -> list[Path]:
    """One PNG per system: the per-query measure in each touched cluster (by mass, at most 30), dashed overall mean.
    A report read back from coverage.json has no per-query values: no PNG."""
    plt = pyplot()

    k = r.clustering.k
    masses = {cl.cluster_id: cl.mass for cl in r.clusters}
    labels = {cl.cluster_id: cl.label for cl in r.clusters}
    qclusters = r.qclusters
    paths = []
    for s, values in r.per_query.items():
        per = cluster_values(values, qclusters, k)
        shown = sorted((c for c in range(k) if per[c]), key=lambda c: (-masses[c], c))[:MAX_BOX_CLUSTERS]
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(shown) + 2), 4.5), dpi=100)
        if shown:
            ax.boxplot([per[c] for c in shown], showfliers=True)
            ax.set_xticks(range(1, len(shown) + 1))
            ax.set_xticklabels([f"{c}: {labels[c][:24]}" for c in shown], rotation=70, ha="right", fontsize=7)
        mean = r.systems[s].mean
        ax.axhline(mean, ls="--", color="gray", lw=1, label=f"mean {mean:.3f}")
        ax.set_ylabel(r.measure)
        ax.set_title(f"{r.task}: {s}, {r.measure} per cluster", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(write_figure(fig, out / f"coverage_boxplot_{_safe(s)}.png"))
    return paths


def plot_density(r: CoverageReport, out: Path) -> Path:
    """Documents (mass) and queries per cluster, clusters by mass."""
    plt = pyplot()

    cl = sorted(r.clusters, key=lambda x: (-x.mass, x.cluster_id))
    fig, ax = plt.subplots(figsize=(max(6, 0.25 * len(cl) + 2), 4), dpi=100)
    xs = np.arange(len(cl))
    ax.bar(xs - 0.2, [c.mass for c in cl], 0.4, label="documents (mass)")
    ax.bar(xs + 0.2, [c.n_queries for c in cl], 0.4, label="queries")
    ax.set_xticks(xs)
    ax.set_xticklabels([str(c.cluster_id) for c in cl], fontsize=7)
    ax.set_xlabel("cluster (by mass)")
    ax.set_title(f"{r.task}: documents and queries per cluster (MSC {r.coverage.msc:.3f})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return write_figure(fig, out / "coverage_density.png")


def save_coverage(report: CoverageReport, out_dir: str | Path) -> dict[str, Path]:
    """Write coverage.json, coverage.md and the PNGs into ``out_dir`` (each atomically)."""
    from ...files import atomic_writer, output_folder

    out = output_folder(out_dir)
    paths = {"json": out / "coverage.json", "md": out / "coverage.md"}
    with atomic_writer(paths["json"]) as fh:
        json.dump(report.model_dump(mode="json"), fh, indent=1)
    with atomic_writer(paths["md"]) as fh:
        fh.write(to_markdown(report))
    for i, p in enumerate(plot_boxplots(report, out)):
        paths[f"boxplot_{i}"] = p
    paths["density"] = plot_density(report, out)
    return paths
