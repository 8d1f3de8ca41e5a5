"""The ARGUS audit, probe and sweep as ``gapbench`` verbs, each taking its options (:mod:`.argus_options`)::

    result = argus_audit(None, "dense", ArgusAuditOptions(k=50, n=800))       # ArgusAudit; .embeddings in memory
    report = argus_probe(None, "dense", ArgusProbeOptions(families=("ridge",)))  # ArgusProbe; .probe the probe
    swept = argus_sweep(None, ["dense", "random"], ArgusSweepOptions(ns=(100, 800)))   # ArgusSweep; .runs

``data`` None is the slice shipped with gapbench; otherwise an :class:`~.audit.inputs.AuditData` (``load_jsonl``,
``load_dataset``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...schemas.argus import ArgusAudit, ArgusProbe, ArgusSweep, ProbeAuditSummary, ProbeDataset, SavedProbe
from .argus_options import ArgusAuditOptions, ArgusEncodingOptions, ArgusProbeOptions, ArgusSweepOptions
from .audit.inputs import AuditData, load_shipped
from .audit.retrievability import audit
from .audit.sweep import sweep
from .probe.training import Probe, train_probe

__all__ = ["ArgusAuditOptions", "ArgusEncodingOptions", "ArgusProbeOptions", "ArgusSweepOptions", "argus_audit",
           "argus_probe", "argus_sweep", "probe_labelled_set"]

_SET_NAMES = {"directed": "audited targets", "undirected": "every entity with an edge"}


def _set_name(mode: str) -> str:
    """A labelled set's name in the report: ``directed (audited targets)``."""
    return f"{mode} ({_SET_NAMES[mode]})"


def argus_audit(data: AuditData | None = None, retriever: Any = "dense",
                options: ArgusAuditOptions | None = None) -> ArgusAudit:
    """RPS of every audited entity with ``retriever``'s encoder (``data`` None: the slice shipped with gapbench)."""
    o = options or ArgusAuditOptions()
    return audit(data, retriever, k=o.k, n=o.n, seed=o.seed, pooling=o.pooling)


def probe_labelled_set(data: AuditData, mode: str, retriever: Any,
                       options: ArgusProbeOptions) -> tuple[Probe, ProbeDataset, ArgusAudit]:
    """Audit one labelled set (``mode``: directed or undirected, read from ``data``'s edges) and train the probes on
    its RPS: (the selected probe, the set's report, the audit)."""
    o = options
    result = audit(data.with_relations(mode), retriever, k=o.k, n=o.n, seed=o.seed, pooling=o.pooling)
    targets, emb = result.target_embeddings()
    rps = result.rps()
    enc = result.encoder
    # the saved probe's meta, in this order (probe.json is compared byte for byte with the shipped probe's)
    meta = {"retriever": result.retriever, "pooling": enc.pooling, "k": o.k, "n": o.n, "dataset": mode,
            "encoder_fingerprint": enc.fingerprint, "retriever_fingerprint": enc.retriever_fingerprint, **o.meta}
    probe, rep = train_probe(emb, [rps[q] for q in targets], enc.fingerprint, seed=o.seed, meta=meta,
                             families=o.families, split=o.split, rebalance_bins=o.rebalance_bins,
                             grid_set=o.grid_set, tau=o.tau)
    summary = ProbeAuditSummary(mean_rps=float(sum(rps.values()) / len(rps)), chance=result.chance,
                                n_effective_min=result.n_effective.min)
    rep = rep.model_copy(update={"name": _set_name(mode), "audit": summary})
    return probe, rep, result


def argus_probe(data: AuditData | None = None, retriever: Any = "dense",
                options: ArgusProbeOptions | None = None) -> ArgusProbe:
    """Audit each labelled set of ``options.datasets`` and train the RPS probes on its entities' embeddings.

    Returns the report (:class:`~gapbench.schemas.ArgusProbe`, ``argus_probe.json``) holding in memory the probe of
    the set with the most labelled entities (``report.probe``, the one ``gapbench argus probe`` saves): its top level
    is that set's, ``datasets`` holds every set's; ``saved_probe.path`` stays None until the probe is saved."""
    o = options or ArgusProbeOptions()
    data = data if data is not None else load_shipped()
    runs = [probe_labelled_set(data, mode, retriever, o) for mode in o.datasets]
    largest = max(range(len(runs)), key=lambda i: runs[i][1].n)  # the first of the largest
    probe, best, _ = runs[largest]
    result = runs[-1][2]
    enc = result.encoder
    saved = SavedProbe(dataset=_set_name(o.datasets[largest]))
    report = ArgusProbe(
        kind="argus_probe", task=data.source, version=1, retriever=result.retriever, fingerprint=enc.fingerprint,
        dim=enc.dim, seed=o.seed, k=o.k, n_requested=o.n, saved_probe=saved,
        split=best.split, selection=best.selection, selected=best.selected, families=best.families,
        baselines=best.baselines, test=best.test, datasets=[rep for _, rep, _ in runs])
    return report.holding(probe)


def argus_sweep(data: AuditData | None = None, retrievers: Sequence[Any] = ("dense",),
                options: ArgusSweepOptions | None = None) -> ArgusSweep:
    """RPS per target for every (retriever, N, k) of ``options`` (``data`` None: the shipped slice)."""
    o = options or ArgusSweepOptions()
    return sweep(data if data is not None else load_shipped(), retrievers, ns=o.ns, ks=o.ks, seed=o.seed,
                 pooling=o.pooling, fig_k=o.fig_k)
