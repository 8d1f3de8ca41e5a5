"""The settings of a signals run, each declared once: :class:`SignalsOptions`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ...contract import Options, Seed
from ...errors import ConfigError
from ...schemas.base import MAX_RESAMPLES
from ..gate_retrievers import retriever_kind
from .definitions import SIGNALS, TERM_RULE, TermExtractor
from .gate import EITHER_MAX_CORR


class SignalsOptions(Options):
    """Every setting of a signals run but the task and the retrievers (definitions in :mod:`gapbench.analyses.signals`).

    Example::

        report = gapbench.signals("impliret/unispeaker/wknow", ["bm25", "dense"], SignalsOptions(window=20))
    """

    window: int = Field(10, ge=1, description="A retrieval is weak when a relevant document is missing from the "
                                              "primary retriever's top-`window`.")
    primary: str | None = Field(None, description="The retriever whose window is labelled and whose "
                                                                   "scores max_score reads (None: the first).")
    min_rel: int = Field(1, ge=1, description="Lowest grade that counts as relevant.")
    max_queries: int | None = Field(None, ge=1, description="A seeded sample of this many judged queries (None: "
                                                               "every query with a relevant document).")
    bar: float = Field(0.65, ge=0.0, le=1.0, description="Keep the signals whose separation max(AUC, 1-AUC), at least "
                                                         "0.5, reaches this.")
    max_corr: float = Field(0.85, ge=0.0, le=1.0, description="Drop the weaker of two kept signals whose |Spearman| is "
                                                              "above this.")
    n_bootstrap: int = Field(1000, ge=0, le=MAX_RESAMPLES, description="Bootstrap resamples of the queries for the AUC "
                                                                      "CIs (0: no CIs).")
    seed: Seed = Field(0, description="Seed of the query sample, the bootstrap and the calibration split.")
    calib_fraction: float = Field(0.5, gt=0.0, lt=1.0, description="Share of the queries in the gate's calibration "
                                                                   "split (the rest is held out).")
    target_catch: float | None = Field(None, gt=0.0, le=1.0, description="The gate's floor is the lowest reaching "
                                                                            "this catch rate (None: the Youden point).")
    gate_signal: str | None = Field(None, description="Gate on this signal (None: the kept signal that separates "
                                                         "best on the calibration split).")
    either_max_corr: float = Field(EITHER_MAX_CORR, ge=0.0, le=1.0, description="Also gate on either of the two "
                                   "strongest kept signals firing when their |Spearman| is below this.")
    output: str | Path | None = Field(None, description="Folder for signals.json, signals.md, "
                                                                 "signals_per_query.tsv and the figures.")
    term_extractor: TermExtractor | None = Field(None, description="texts -> term lists for evidence_coverage "
                                                                      "(None: spaCy, as TERM_RULE says).")

    @field_validator("gate_signal")
    @classmethod
    def _known_signal(cls, value: str | None) -> str | None:
        if value is not None and value not in SIGNALS:
            raise ValueError(f"must be one of {', '.join(SIGNALS)}, got {value!r}")
        return value

    def check(self, retrievers: Sequence[str]) -> None:
        """Raise ConfigError for retrievers no run accepts with these settings, before any work is done."""
        if not retrievers:
            raise ConfigError("give at least one retriever, e.g. ['bm25', 'dense'].")
        if len(set(retrievers)) != len(retrievers):
            raise ConfigError(f"a retriever is listed twice in {', '.join(retrievers)}; list each once.")
        if self.primary is not None and self.primary not in retrievers:
            raise ConfigError(f"primary {self.primary!r} is not among the retrievers ({', '.join(retrievers)}).")

    def meta(self, retrievers: Sequence[str], identities: Mapping[str, Mapping[str, Any]] | None = None) -> dict:
        """The run's settings as signals.json records them beside the analysis; ``identities`` (spec -> the
        retriever's ``name``, ``fingerprint`` and ``config``) lets the gate refuse runs of other retrievers."""
        return {
            "retrievers": [{"spec": s, "kind": retriever_kind(s), **(identities or {}).get(s, {})} for s in retrievers],
            "primary": self.primary or retrievers[0], "window": self.window, "min_rel": self.min_rel,
            "term_rule": TERM_RULE if self.term_extractor is None else "custom extractor",
            "calib_fraction": self.calib_fraction,
        }
