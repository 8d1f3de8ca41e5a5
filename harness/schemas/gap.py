"""gap.json: the retrieval-verification gap of one task.

:class:`GapReport` is at once the object ``gapbench.gap`` returns, the file ``gap.json`` (``model_dump(mode="json")``,
two-space indent) and its JSON Schema (``docs/schemas/gap.schema.json``); ``str(report)`` is the printed summary.
Keys added after the first gap.json files (a pool-scaling row's ``measure`` and pools, ``retriever_llm``, the meta
keys of the verifier) are optional, so those files keep loading. Optional parts that do not apply (a lone verifier
seed has no spread) are left out of the file rather than written as null, as gapbench always wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_serializer

from ..tables import Table
from .base import Model, Number, One

_MOSTLY = 0.5  # above this share of fallback rankings, the verifier's scores say little about the model


class Value(Model):
    value: Number


class NamedValue(Model):
    name: str
    value: Number


class _Sparse(Model):
    """A part whose optional keys are left out of the file when they do not apply (None)."""

    @model_serializer(mode="wrap")
    def _without_nones(self, handler):
        data = handler(self)
        optional = {name for name, f in type(self).model_fields.items() if not f.is_required()}
        return {k: v for k, v in data.items() if not (v is None and k in optional)}


class Spread(Model):
    """One score over repeated verifier runs (``tournament:seeds=...``): the values per seed, their mean, range and
    sample standard deviation (0 for one seed)."""

    seeds: list[int]
    values: list[Number]
    mean: Number
    min: Number
    max: Number
    std: Number


class PoolScalingRow(_Sparse):
    """One pool size of gap.json's pool-scaling curve (Figure 3 of OBLIQ-Bench)."""

    pool_size: int = Field(ge=1)
    pool_recall: Number
    verifier_standard: Number
    verifier_gold_infused: Number
    retrievers: dict[str, Number]
    retrievers_gold_infused: dict[str, Number]
    # written since pool scaling follows Figure 3 (absent from the first gap.json files):
    measure: str | None = None  # the pool-scaling measure (Recall@10 by default)
    # each retriever's pool: with its top k or not
    retriever_pools: dict[str, Literal["own", "others"]] | None = None
    retriever_pool_recall: dict[str, Number] | None = None  # the recall of the pool each retriever was scored on
    verifier_standard_spread: Spread | None = None  # repeated tournaments over seeds
    verifier_gold_infused_spread: Spread | None = None


class AnswerCounts(Model):
    """How a listwise verifier's answers were read: rankings ``clean``, ``repaired``, ``reasked`` or completed by the
    ``fallback`` (their sum is ``rankings``; ``fallback_rate`` the fallback share), with ``reask_calls`` and
    ``fallback_ids`` (passages placed by a completion)."""

    clean: int
    repaired: int
    reasked: int
    fallback: int
    reask_calls: int
    fallback_ids: int
    rankings: int
    fallback_rate: Number


class Answers(AnswerCounts):
    """The counts in total and per query (``meta.answers``)."""

    per_query: dict[str, AnswerCounts]


class VerifierAnswers(AnswerCounts):
    """gap.json's ``verifier_answers``: the totals of ``meta.answers`` and whether most rankings were fallbacks."""

    mostly_fallbacks: bool

    @classmethod
    def of(cls, answers: Answers | Mapping[str, Any] | None) -> VerifierAnswers | None:
        """The totals of a verifier's answer counts (None without counts)."""
        if answers is None:
            return None
        counts = answers if isinstance(answers, Answers) else Answers.model_validate(answers)
        totals = counts.model_dump(exclude={"per_query"})
        return cls(**totals, mostly_fallbacks=counts.fallback_rate > _MOSTLY)


class OtherQrels(Model):
    """The best retriever and both verifier scores under another set of judgements (OBLIQ's pooled "P")."""

    best_retriever: NamedValue
    verifier_standard: Number
    verifier_gold_infused: Number


class RetrieverLLM(Model):
    """The LLM work of a retriever that calls one (``rewrite:``, ``agent:``): totals of its client's usage (None where
    the client does not count it) and the answers it could not use, by kind."""

    model: str | None
    calls: int | None
    requests: int | None
    cache_hits: int | None
    failures: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    truncated: int | None
    cost: Number | None
    fallbacks: dict[str, int] | None = None

    def line(self, name: str) -> str:
        """One line of the printed summary."""
        fell = {k: v for k, v in (self.fallbacks or {}).items() if v}
        said = ", ".join(f"{k} {v}" for k, v in fell.items()) or "none"
        tokens = (self.prompt_tokens or 0) + (self.completion_tokens or 0)
        return (f"retriever {name}: {self.calls} LLM calls, {self.cache_hits} answers from the cache, {tokens:,} "
                f"tokens ({self.prompt_tokens} in, {self.completion_tokens} out), fallbacks: {said}")


class RetrieverEntry(Model):
    """A pooled retriever as run: its spec, run name, public config (an adapter's own shape) and fingerprint."""

    spec: str
    name: str
    config: dict[str, Any]
    fingerprint: str


class VerifierInfo(_Sparse):
    """The verifier: its name and config (an adapter's own shape), the task's defaults its spec left out and the run
    used, and whether it read the task's verifier view (e.g. problems with their solutions)."""

    name: str
    config: dict[str, Any]
    task_defaults: dict[str, bool | int | float | str] | None = None
    reads_verifier_view: bool | None = None


class VerifierSeeds(Model):
    """A verifier run once per seed: both scores' spread over the seeds."""

    seeds: list[int]
    standard: Spread
    gold_infused: Spread


class GapMeta(_Sparse):
    """How the gap was measured: the seed, the retrievers (their names, or since gapbench records them, each as run),
    the pool-scaling measure, the verifier, its LLM client's manifest (settings and usage, the LLM layer's own shape),
    its answer counts and its spread over seeds."""

    seed: int
    retrievers: list[str | RetrieverEntry]
    pool_scaling_measure: str | None = None
    verifier: VerifierInfo | None = None
    llm: dict[str, Any] | None = None
    answers: Answers | None = None
    verifier_seeds: VerifierSeeds | None = None


def _kind_and_version_required(schema: dict) -> None:
    schema["required"] = ["kind", "version", *[k for k in schema.get("required", ()) if k not in ("kind", "version")]]


class GapReport(Model):
    """``gap.json``: the retrieval-verification gap of one task.

    ``gap`` is the gold-infused verifier's score minus the best retriever's, ``gap_standard`` the standard-pool
    verifier's minus it; ``llm_calls`` are the verifier's, ``retriever_llm`` the LLM work of retrievers that call one
    (null when none does); ``other_qrels`` the same rankings under other judgements, by label."""

    model_config = ConfigDict(json_schema_extra=_kind_and_version_required)

    kind: Literal["gap"] = "gap"
    version: One = 1
    task: str
    measure: str
    best_retriever: NamedValue
    retrievers: dict[str, Number] = Field(min_length=1)
    verifier_standard: Value
    verifier_gold_infused: Value
    gap: Number
    gap_standard: Number
    pool_recall: Number
    pool_depth: int
    n_queries: int
    llm_calls: int
    verifier_answers: VerifierAnswers | None
    pool_scaling: list[PoolScalingRow]
    # the LLM work (calls, tokens, fallbacks) of rewrite:/agent: retrievers by name; absent in files before it
    retriever_llm: dict[str, RetrieverLLM] | None = None
    other_qrels: dict[str, OtherQrels]
    meta: GapMeta

    def __str__(self) -> str:
        head = (f"{self.task}: retrieval-verification gap on {self.measure} ({self.n_queries} queries, pool depth "
                f"{self.pool_depth}, pool recall {self.pool_recall:.3f}, {self.llm_calls} LLM calls)")
        best = self.best_retriever.value
        rows = [[f"retriever {name}", f"{v:.4f}", f"{v - best:+.4f}"] for name, v in self.retrievers.items()]
        rows += [["verifier, standard pool", f"{self.verifier_standard.value:.4f}", f"{self.gap_standard:+.4f}"],
                 ["verifier, gold-infused pool", f"{self.verifier_gold_infused.value:.4f}", f"{self.gap:+.4f}"]]
        rows += [[f"[{label}] {what}", f"{value:.4f}", ""] for label, other in self.other_qrels.items()
                 for what, value in (("best retriever", other.best_retriever.value),
                                     ("verifier, standard pool", other.verifier_standard),
                                     ("verifier, gold-infused pool", other.verifier_gold_infused))]
        lines = [head, Table(["", self.measure, "- best"], rows, align="lrr").text(),
                 f"gap (gold-infused verifier - best retriever): {self.gap:+.4f}"]
        lines += [usage.line(name) for name, usage in (self.retriever_llm or {}).items()]
        ans = self.verifier_answers
        if ans is not None and ans.rankings:
            lines.append(f"verifier answers: {ans.rankings} rankings: {ans.clean} clean, {ans.repaired} repaired, "
                         f"{ans.reasked} re-asked, {ans.fallback} completed by fallback ({ans.fallback_rate:.0%})")
            if ans.mostly_fallbacks:
                lines.append("WARNING: most verifier answers did not rank their passages and were completed in "
                             "pool order: these verifier scores say little about the model.")
        if self.pool_scaling:
            names = list(self.pool_scaling[0].retrievers)
            scaling = [[str(row.pool_size), f"{row.verifier_standard:.3f}", f"{row.verifier_gold_infused:.3f}",
                        *(f"{row.retrievers.get(n, float('nan')):.3f}" for n in names)] for row in self.pool_scaling]
            measure = self.pool_scaling[0].measure or self.measure
            lines += [f"pool scaling ({measure}):", Table(["pool size", "verifier standard", "verifier gold-infused",
                                                           *names], scaling, align="r" * (3 + len(names))).text()]
        return "\n".join(lines)
