"""The ARGUS audit and probe as ``gapbench`` verbs: ``argus_audit`` and ``argus_probe``, each taking its options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ...errors import ConfigError
from .audit import DEFAULT_K, DEFAULT_N, AuditData, AuditResult, check_budget
from .probe import DEFAULT_SPLIT, TAU, Probe

_POOLINGS = ("auto", "span", "sentence")
_FAMILIES = ("ridge", "xgboost", "mlp")


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
        from .augment import check_tau

        check_tau(self.tau, f"tau={self.tau!r}")


def argus_audit(data: AuditData | None = None, retriever: Any = "dense",
                options: ArgusAuditOptions | None = None) -> AuditResult:
    """RPS of every audited entity with ``retriever``'s encoder (``data`` None: the slice shipped with gapbench)."""
    from .audit import audit

    o = options or ArgusAuditOptions()
    return audit(data, retriever, k=o.k, n=o.n, seed=o.seed, pooling=o.pooling)


def argus_probe(data: AuditData | None = None, retriever: Any = "dense",
                options: ArgusProbeOptions | None = None) -> tuple[Probe, dict]:
    """Audit ``data`` and train the RPS probe on the audited entities' embeddings: (the selected probe, its report)."""
    from .probe import train_probe

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
