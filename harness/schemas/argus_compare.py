"""``argus_compare.json``: a retriever with and without ARGUS' augmentation (``gapbench argus compare``).

:class:`ArgusCompare` is the comparison in memory (what :func:`gapbench.argus_compare` returns, as its subclass
``ArgusComparison`` that adds the Markdown rendering), the file on disk and its JSON Schema. Keys that files written by
earlier versions lack are optional and stay absent when such a file is read back: ``config.diagnosis``,
``config.diagnosis_method``, ``config.pipeline_check``, ``tasks.*.diagnosis.seconds.audit`` and
``tasks.*.max_rps_delta``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import Model, Number, One, Pair

Variant = Literal["original", "expansion", "synthesis"]
Diagnosis = Literal["auto", "probe", "audit", "label-prior"]  # what was asked for
DiagnosisMethod = Literal["probe", "audit", "label-prior"]  # what scored the mentions


# ---------------------------------------------------------------- configuration
class CompareConfig(Model):
    """The settings the comparison ran with, and what they resolved to."""

    tau: Number  # entities with a predicted RPS below it are flagged
    k_aug: int = Field(ge=1)  # KB passages per flagged entity
    ner: str
    kb: str  # the Reference KB's name (a packaged name or the JSONL file's stem)
    kb_fingerprint: str
    pipeline_check: bool | None = None  # the KB states the answers (landmarks-oracle); absent in early files
    k: int = Field(ge=1)  # retrieval depth
    measures: list[str]
    seed: int
    diagnosis: Diagnosis | None = None  # absent in files written before the setting existed
    diagnosis_method: DiagnosisMethod | None = None
    probe: str | None  # the probe's folder (``shipped:<folder>`` for the shipped one), ``given``, or null
    retriever_fingerprint: str
    llm: dict[str, Any] | None  # the synthesis LLM client's settings (LLMClient.describe()), null without synthesis
    variants: list[Variant]


# ---------------------------------------------------------------- diagnosis
class LabelPriorMethod(Model):
    """Entities flagged by NER label: ``risky_labels`` get RPS ``low``, every other label ``high``."""

    method: Literal["label-prior"]
    risky_labels: list[str]
    low: Number
    high: Number


class AuditMethod(Model):
    """Entities scored by an exact RPS audit with the retriever itself (queries: the entity's KB passages)."""

    method: Literal["audit"]
    k: int
    n: int
    kb: str
    k_aug: int
    queries: str
    unaudited_rps: Number
    n_entities: int | None = None  # counted once the mentions are scored
    n_audited_entities: int | None = None
    n_queries: int | None = None


class ProbeMethod(Model):
    """Entities scored by a probe on the retriever's mention embeddings."""

    method: Literal["probe"]
    probe: str  # the probe's class name
    probe_fingerprint: str | None
    embedding: Literal["span", "document"]
    n_truncated: int  # mentions past the model's token limit, pooled over the whole document


class DiagnosisSeconds(Model):
    ner: Number
    embed: Number
    probe: Number
    audit: Number | None = None  # absent in files written before the audit diagnosis


class CompareDiagnosis(Model):
    """One task's diagnosis: mentions found, entities flagged, how and at what cost."""

    n_docs: int
    n_mentions: int
    n_flagged_entities: int
    n_docs_flagged: int
    tau: Number
    method: Annotated[LabelPriorMethod | AuditMethod | ProbeMethod, Field(discriminator="method")]
    seconds: DiagnosisSeconds


# ---------------------------------------------------------------- variants
class SynthesisCheck(Model):
    """What the check of the synthesis answers found (answers still cut by their token budget are dropped unless
    ``keep_truncated``)."""

    asked: int
    views: int
    empty: int
    truncated: int
    dropped_truncated: int
    keep_truncated: bool
    max_tokens: Annotated[list[int], Field(min_length=2, max_length=2)] | None  # [lowest, highest] budget


class ViewGrowth(Model):
    """How much a variant grew the index: views beside the corpus' documents."""

    n_docs: int
    n_views: int
    indexed: int  # n_docs + n_views
    views_per_doc: Number
    docs_with_views: int
    max_views_per_doc: int
    index_growth: Number  # indexed / n_docs
    synthesis: SynthesisCheck | None = None  # synthesis views only


class VariantSeconds(Model):
    augment: Number
    index: Number
    search: Number


class CompareVariant(Model):
    """One indexing of one task: its means, their 95% bootstrap intervals, index growth and cost."""

    means: dict[str, Number]
    ci95: dict[str, Pair]
    growth: ViewGrowth
    seconds: VariantSeconds


class VariantDelta(Model):
    """A variant minus Original on one measure, with the paired tests (Holm-corrected over the variant pairs)."""

    delta: Number
    p_randomization_holm: Number
    p_ttest_holm: Number
    significant: bool  # p_randomization_holm < 0.05


# ---------------------------------------------------------------- Table 4
class MaxRpsGroup(Model):
    n: int = Field(ge=0)
    mean_max_rps: Number | None  # null when the group is empty


class MaxRpsDelta(Model):
    """Table 4 at one k: gold documents retrieved in the top k vs not, mean of their largest entity RPS."""

    k: int = Field(ge=1)
    no_entities: int = Field(ge=0)
    retrieved: MaxRpsGroup
    unretrieved: MaxRpsGroup
    delta: Number | None  # retrieved - unretrieved; null when either group is empty


# ---------------------------------------------------------------- the comparison
class ArgusCompareTask(Model):
    """One task: its diagnosis, each variant's numbers, the deltas vs Original and Table 4 of the Original run."""

    n_queries: int
    diagnosis: CompareDiagnosis
    kb_seconds: Number
    variants: dict[Variant, CompareVariant]
    deltas: dict[Variant, dict[str, VariantDelta]]  # every variant but original -> measure -> delta
    max_rps_delta: dict[str, MaxRpsDelta] | None = None  # k -> Table 4; absent in files written before it
    llm: dict[str, int] | None  # the synthesis LLM's counters (requests, calls, tokens, ...); null without synthesis
    notes: list[str]


class ArgusCompare(Model):
    """``argus_compare.json``: a retriever with and without ARGUS' augmentation, on a task or every task of a suite."""

    kind: Literal["argus_compare"]
    task: str  # the task, or the suite's name
    version: One
    suite: str | None
    retriever: str
    config: CompareConfig
    tasks: dict[str, ArgusCompareTask]
    full_benchmark_avg: dict[Variant, dict[str, Number]]  # unweighted mean over the tasks, per variant and measure
    notes: list[str]

    @property
    def variants(self) -> list[str]:
        """The variants every task ran, in the order Original, Expansion, Synthesis."""
        return [v for v in ("original", "expansion", "synthesis") if all(v in t.variants for t in self.tasks.values())]
