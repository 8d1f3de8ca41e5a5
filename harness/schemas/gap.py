"""gap.json: the retrieval-verification gap."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from .base import Model, Number, One


class Value(Model):
    value: Number


class NamedValue(Model):
    name: str
    value: Number


class PoolScalingRow(Model):
    """One pool size of gap.json's pool-scaling curve (Figure 3 of OBLIQ-Bench)."""

    pool_size: int = Field(ge=1)
    pool_recall: Number
    verifier_standard: Number
    verifier_gold_infused: Number
    retrievers: dict[str, Number]
    retrievers_gold_infused: dict[str, Number]
    # written since pool scaling follows Figure 3 (absent from the first gap.json files):
    measure: Optional[str] = None  # the pool-scaling measure (Recall@10 by default)
    # each retriever's pool: with its top k or not
    retriever_pools: Optional[dict[str, Literal["own", "others"]]] = None
    retriever_pool_recall: Optional[dict[str, Number]] = None  # the recall of the pool each retriever was scored on
    verifier_standard_spread: Optional[dict[str, Any]] = None  # repeated tournaments over seeds
    verifier_gold_infused_spread: Optional[dict[str, Any]] = None


class GapReport(Model):
    """``gap.json``: the retrieval-verification gap of one task."""

    kind: Literal["gap"]
    version: One
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
    verifier_answers: Optional[dict[str, Any]]
    pool_scaling: list[PoolScalingRow]
    # the LLM work (calls, tokens, fallbacks) of rewrite:/agent: retrievers by name; absent in files before it
    retriever_llm: Optional[dict[str, dict[str, Any]]] = None
    other_qrels: dict[str, dict[str, Any]]
    meta: dict[str, Any]
