"""The settings of the ARGUS audit, probe and sweep, each declared once (type, default, accepted range, meaning) as the
fields of an :class:`~gapbench.contract.Options` model; ``gapbench argus audit|probe|sweep`` fill them from their flags.

    >>> ArgusProbeOptions(k=50, n=300, families=("ridge",)).split
    (0.7, 0.15, 0.15)

A value no run accepts raises :class:`~gapbench.errors.OptionsError` naming the field (``ArgusAuditOptions: k must be
greater than or equal to 1, got 0.``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ...contract import Depth, Options, Seed
from .audit.rps import DEFAULT_K, DEFAULT_N
from .probe.probe_metrics import DEFAULT_SPLIT, TAU

Pooling = Literal["auto", "span", "sentence"]
Family = Literal["ridge", "xgboost", "mlp"]
LabelledSet = Literal["directed", "undirected"]
FAMILIES: tuple[Family, ...] = ("ridge", "xgboost", "mlp")


class ArgusEncodingOptions(Options):
    """What every ARGUS analysis encodes and draws with: the entity vector's pooling and the neutral draws' seed."""

    seed: Seed = Field(0, description="Seeds the neutral draws (and the probe's split and fits).")
    pooling: Pooling = Field("auto", description="The entity mention's vector: span (mean of the label's token "
                                                 "vectors), sentence (the retriever's paragraph vector) or auto (span "
                                                 "when the retriever gives token vectors, else sentence).")


class ArgusAuditOptions(ArgusEncodingOptions):
    """Settings of an ARGUS audit: RPS at rank ``k`` among ``n`` candidates, the neutrals drawn with ``seed``, the
    entity mention's vector pooled as ``pooling``."""

    k: Depth = Field(DEFAULT_K, description="Top-k budget: a hit is rank <= k.")
    n: int = Field(DEFAULT_N, ge=2, description="Candidates per query (the target and N-1 neutrals); capped by the "
                                                "entities available.")


class ArgusProbeOptions(ArgusAuditOptions):
    """The audit's settings, and the probe's: the labelled sets trained (``datasets``), the model ``families`` tried,
    the train/validation/test ``split``, RPS bins to rebalance the training split over (None: off), the
    hyper-parameter ``grid_set`` and the blind-spot threshold ``tau`` of the classification view."""

    families: tuple[Family, ...] = Field(FAMILIES, description="Probe families to try.")
    datasets: tuple[LabelledSet, ...] = Field(
        ("directed", "undirected"),
        description="Labelled sets: directed (the audited targets) and/or undirected (every entity with an edge, "
                    "edges read both ways); the probe of the largest set is the one kept.")
    split: tuple[float, float, float] = Field(DEFAULT_SPLIT, description="Train, validation and test shares (the "
                                                                         "paper's 70/15/15).")
    rebalance_bins: int | None = Field(None, ge=1, description="Oversample the training split to the largest of "
                                                                  "this many RPS bins (the authors' code: 100); None: "
                                                                  "off.")
    grid_set: Literal["reduced", "paper"] = Field("reduced", description="Hyper-parameter grids: reduced (a cheap "
                                                                         "sweep) or paper (appendix C.1: 2,187 xgboost "
                                                                         "and 81 MLP configurations).")
    tau: float = Field(TAU, gt=0, le=1, description="Blind-spot threshold of the classification view (RPS < tau).")
    meta: dict[str, Any] = Field(default_factory=dict, description="Extra entries for the saved probe's meta.")

    @field_validator("split")
    @classmethod
    def _positive(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if min(value) <= 0:
            raise ValueError(f"must be three positive train, validation and test shares such as (70, 15, 15), got "
                             f"{list(value)}")
        return value

    @field_validator("families", "datasets")
    @classmethod
    def _once(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("is empty; name at least one")
        if len(set(value)) != len(value):
            raise ValueError(f"names one twice; name each once, got {list(value)}")
        return value


class ArgusSweepOptions(ArgusEncodingOptions):
    """Settings of an ARGUS sweep: the pool sizes ``ns`` and budgets ``ks`` crossed (each sorted, once), and the k of
    the vs-N and LDA figures (the nearest listed k)."""

    ns: tuple[int, ...] = Field((100, 200, 400, 800), description="Pool sizes N (the target and N-1 "
                                                                                "neutrals), each at least 2.")
    ks: tuple[int, ...] = Field((1, 5, 10, 20, 50, 100), description="Budgets k, each at least 1.")
    fig_k: int = Field(50, ge=1, description="k of the vs-N and LDA figures (the nearest listed k).")

    @field_validator("ns", "ks")
    @classmethod
    def _sorted(cls, value: tuple[int, ...], info) -> tuple[int, ...]:
        least = 2 if info.field_name == "ns" else 1
        if not value:
            raise ValueError("is empty; give at least one")
        if min(value) < least:
            raise ValueError(f"must be integers of at least {least}, got {list(value)}")
        return tuple(sorted(set(value)))
