"""The analyses as ``gapbench`` verbs, each taking its options object: ``gapbench.gap``, ``gapbench.signals``,
``gapbench.coverage``, ``gapbench.argus_audit``, ``gapbench.argus_probe`` and ``gapbench.argus_compare``.

Each is ``verb(inputs, options=None)``; ``None`` means the options' defaults. The options objects check their
settings when built, so a setting no analysis can run with fails before any work. docs/python-api.md has a worked
example of each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import ConfigError
from .argus.audit import DEFAULT_K, DEFAULT_N, AuditData, AuditResult, check_budget
from .argus.compare import ArgusCompareOptions, ArgusComparison, compare_argus_with
from .argus.probe import DEFAULT_SPLIT, TAU, Probe
from .coverage import CoverageOptions, CoverageReport, run_coverage_with
from .gap import GapOptions, GapReport, run_gap_with
from .signals import SignalsOptions, SignalsReport, run_signals_with

_POOLINGS = ("auto", "span", "sentence")
_FAMILIES = ("ridge", "xgboost", "mlp")


def _retrievers(retrievers: str | Sequence[str | Any]) -> list:
    return [retrievers] if isinstance(retrievers, str) else list(retrievers)


def gap(task: str, retrievers: str | Sequence[str], options: GapOptions | None = None) -> GapReport:
    """The retrieval-verification gap of ``retrievers`` on ``task`` (see :mod:`gapbench.analyses.gap`)."""
    return run_gap_with(task, _retrievers(retrievers), options or GapOptions())


def signals(task: str, retrievers: str | Sequence[str], options: SignalsOptions | None = None) -> SignalsReport:
    """Weak-retrieval signals and the gate calibrated on them (see :mod:`gapbench.analyses.signals`)."""
    return run_signals_with(task, _retrievers(retrievers), options or SignalsOptions())


def coverage(task: str | Any, retrievers: str | Sequence[str | Any],
             options: CoverageOptions | None = None) -> CoverageReport:
    """Semantic coverage of the task's corpus by its queries, per retriever (see :mod:`gapbench.analyses.coverage`)."""
    return run_coverage_with(task, _retrievers(retrievers), options or CoverageOptions())


@dataclass(frozen=True)
class ArgusAuditOptions:
    """Settings of an ARGUS audit: RPS at rank ``k`` among ``n`` candidates, the neutrals drawn with ``seed``, the
    entity mention's vector pooled as ``pooling`` (auto, span or sentence)."""

    k: int = DEFAULT_K
    n: int = DEFAULT_N
    seed: int = 0
    pooling: str = "auto"

    def __post_init__(self) -> None:
        check_budget(self.k, self.n)
        if self.pooling not in _POOLINGS:
            raise ConfigError(f"pooling={self.pooling!r}: choose {', '.join(_POOLINGS)}.")


@dataclass(frozen=True)
class ArgusProbeOptions(ArgusAuditOptions):
    """The audit's settings, and the probe's: the model ``families`` tried, the train/validation/test ``split``, RPS
    bins to rebalance the training split over (None: off), the hyper-parameter ``grid_set`` (reduced or paper) and the
    blind-spot threshold ``tau`` of the classification view."""

    families: Sequence[str] = _FAMILIES
    split: Sequence[float] = DEFAULT_SPLIT
    rebalance_bins: int | None = None
    grid_set: str = "reduced"
    tau: float = TAU
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "families", tuple(self.families))
        object.__setattr__(self, "split", tuple(self.split))
        unknown = [f for f in self.families if f not in _FAMILIES]
        if not self.families or unknown:
            raise ConfigError(f"families={list(self.families)}: choose from {', '.join(_FAMILIES)}.")
        from .argus.augment import check_tau

        check_tau(self.tau, f"tau={self.tau!r}")


def argus_audit(data: AuditData | None = None, retriever: Any = "dense",
                options: ArgusAuditOptions | None = None) -> AuditResult:
    """RPS of every audited entity with ``retriever``'s encoder (``data`` None: the slice shipped with gapbench)."""
    from .argus.audit import audit

    o = options or ArgusAuditOptions()
    return audit(data, retriever, k=o.k, n=o.n, seed=o.seed, pooling=o.pooling)


def argus_probe(data: AuditData | None = None, retriever: Any = "dense",
                options: ArgusProbeOptions | None = None) -> tuple[Probe, dict]:
    """Audit ``data`` and train the RPS probe on the audited entities' embeddings: (the selected probe, its report)."""
    from .argus.probe import train_probe

    o = options or ArgusProbeOptions()
    result = argus_audit(data, retriever, o)
    targets, emb = result.target_embeddings()
    rps = result.rps()
    meta = {"retriever": result.retriever, "pooling": result.encoder["pooling"], "k": o.k, "n": o.n,
            "encoder_fingerprint": result.encoder["fingerprint"],
            "retriever_fingerprint": result.encoder["retriever_fingerprint"], **o.meta}
    return train_probe(emb, [rps[q] for q in targets], result.encoder["fingerprint"], seed=o.seed, meta=meta,
                       families=o.families, split=o.split, rebalance_bins=o.rebalance_bins, grid_set=o.grid_set,
                       tau=o.tau)


def argus_compare(task: str, retriever: str | Any, options: ArgusCompareOptions | None = None) -> ArgusComparison:
    """Original vs ARGUS Expansion (and Synthesis with an LLM) on a task or a suite (see
    :mod:`gapbench.analyses.argus.compare`)."""
    return compare_argus_with(task, retriever, options or ArgusCompareOptions())
