"""signals.json: weak-retrieval signals and their gate."""

from __future__ import annotations

from typing import Any, Literal, Optional

from .base import Model, Number, One


class SignalsReport(Model):
    """``signals.json``: weak-retrieval signals, their separation and the calibrated gate."""

    kind: Literal["signals"]
    task: str
    version: One
    # written by `gapbench signals` (absent when ``analyse`` is called without them)
    # spec and kind; since the gate checks retrievers also name, fingerprint and config (what a run manifest records)
    retrievers: Optional[list[dict[str, Any]]] = None
    task_key: Optional[str] = None  # a local task's content key (gapbench.identity), which the gate compares
    primary: Optional[str] = None
    window: Optional[int] = None
    min_rel: Optional[int] = None
    term_rule: Optional[str] = None
    calib_fraction: Optional[Number] = None
    n_queries: int
    n_weak: int
    weak_rate: Optional[Number]
    bar: Number
    max_corr: Number
    n_bootstrap: int
    seed: int
    signals: dict[str, dict[str, Any]]
    spearman: dict[str, dict[str, Optional[Number]]]
    kept: list[str]
    gate: Optional[dict[str, Any]]
    gate_note: Optional[str] = None
    # the gate on either of two barely correlated kept signals firing (absent in files written before it)
    either_max_corr: Optional[Number] = None
    gate_either: Optional[dict[str, Any]] = None
    gate_either_note: Optional[str] = None
