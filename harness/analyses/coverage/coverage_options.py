"""The one settings object of a coverage run, :class:`CoverageOptions`: every setting declared once, with its
default, what it accepts and what it means; a value no run accepts raises :class:`~gapbench.errors.OptionsError`
naming the field (``CoverageOptions: clusters must be greater than or equal to 1, got 0.``) before any work."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ...contract import Depth, Options, Resamples, Seed, Text
from .clusters import DEFAULT_K_CANDIDATES
from .strata import DEFAULT_ENTITY_CANDIDATES, QUERY_STRATA
from .synthetic import QUERY_LENGTHS, QUERY_SPECIFICITIES, combine_query_types


class CoverageOptions(Options):
    """Every setting of a coverage run but the task and the retrievers (definitions in
    :mod:`gapbench.analyses.coverage`).

    Example::

        report = gapbench.coverage("impliret/multispeaker/wknow", ["bm25"], CoverageOptions(clusters=10))
    """

    entities: Literal["spacy", "llm"] = Field(
        "spacy", description="Entity extraction: spaCy NER (offline) or the LLM's JSON lines.")
    embedder: Any = Field("dense", description="The dense adapter spec (or an object with .embed(texts)) that embeds "
                                               "entity forms and queries.")
    clusters: int | None = Field(None, ge=1, description="Number of clusters k; None: the best silhouette over "
                                                            "k_candidates.")
    k_candidates: tuple[int, ...] = Field(DEFAULT_K_CANDIDATES, min_length=1,
                                          description="The k tried by the silhouette criterion, each 2 or more.")
    seed: Seed = Field(0, description="Seed of KMeans, the silhouette sample, the bootstrap and the judging order.")
    n_resamples: Resamples = Field(1000, description="Bootstrap resamples of the queries.")
    min_queries: int = Field(5, ge=1, description="Density threshold m: clusters with fewer queries are counted.")
    query_strata: Literal["qrels", "entities", "llm-entities"] = Field(
        "qrels", description="How a query gets its clusters: qrels (its relevant documents), entities (NER of its "
                             "text) or llm-entities (the LLM judges which nearby corpus entities are relevant, as in "
                             "the paper).")
    query_entities: bool = Field(False, description="With query_strata qrels: also the clusters of the entities in "
                                                    "the query's own text.")
    max_chars: int = Field(1000, ge=0, description="Characters of each document given to entity extraction "
                                                   "(0 or None: whole documents).")
    measure: str = Field("nDCG@10", description="The measure every system is scored with.")
    generate: int = Field(0, ge=0, description="LLM queries generated per missing cluster (0: none)")
    judge_depth: Depth = Field(10, description="Each system's top k pooled to judge a generated query.")
    judge_batch: int = Field(20, ge=1, description="At most this many pooled documents per judge prompt.")
    entity_candidates: int = Field(DEFAULT_ENTITY_CANDIDATES, ge=1,
                                   description="With query_strata llm-entities: the corpus entities nearest a query "
                                               "offered to the LLM.")
    query_length: tuple[str, ...] = Field(tuple(QUERY_LENGTHS), description="Lengths of generated queries, cycled "
                                                                           "through: one or more of short, long.")
    query_specificity: tuple[str, ...] = Field(tuple(QUERY_SPECIFICITIES), description="Specificities of generated "
                                               "queries: one or more of ambiguous, specific.")
    llm_base_url: Text | None = Field(None, description="OpenAI-compatible endpoint (entities llm, generate, "
                                                           "llm-entities); default $OPENAI_BASE_URL.")
    llm_model: Text | None = Field(None, description="The LLM's model name.")
    llm_client: Any = Field(None, description="An LLM client to use instead of one built from llm_base_url.")
    output: Path | None = Field(None, description="Write coverage.json, coverage.md and the PNGs here.")

    @field_validator("k_candidates")
    @classmethod
    def _k_at_least_two(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if min(value) < 2:
            example = ",".join(map(str, DEFAULT_K_CANDIDATES))
            raise ValueError(f"must be integers of 2 or more (the silhouette needs k >= 2 clusters), e.g. {example}")
        return value

    @field_validator("max_chars", mode="before")
    @classmethod
    def _none_is_all(cls, value: Any) -> Any:
        return 0 if value is None else value

    @field_validator("query_length", "query_specificity")
    @classmethod
    def _types_each_once(cls, value: tuple[str, ...], info) -> tuple[str, ...]:
        accepted = QUERY_LENGTHS if info.field_name == "query_length" else QUERY_SPECIFICITIES
        if not value or len(set(value)) != len(value) or not set(value) <= set(accepted):
            raise ValueError(f"must be one or more of {', '.join(accepted)}, each once (e.g. {','.join(accepted)})")
        return value

    @field_validator("query_entities")
    @classmethod
    def _ner_adds_to_qrels(cls, value: bool, info) -> bool:
        strata = info.data.get("query_strata")
        if value and strata not in (None, "qrels"):
            raise ValueError(f"adds query NER to the qrels strata; with query_strata {strata!r} leave it off (or use "
                             "query_strata 'qrels')")
        return value

    def query_types(self) -> list[str]:
        """The generated queries' types, ``length-specificity``, in the order generation cycles through them."""
        return combine_query_types(self.query_length, self.query_specificity)

    def needs_llm(self) -> bool:
        """Whether entities, query strata or generation ask an LLM."""
        return self.entities == "llm" or bool(self.generate) or self.query_strata == "llm-entities"

    def regime(self, generated: bool) -> dict:
        """The ``regime`` of a metric block: how its queries got their clusters, the entities' source, and whether
        the block includes generated queries."""
        label = QUERY_STRATA[self.query_strata]
        if self.query_strata == "qrels" and self.query_entities:
            label = "qrels + query NER"
        return {"query_strata": self.query_strata, "label": label, "entity_source": self.entities,
                "generated_queries": generated}

    def config(self, retrievers: list) -> dict:
        """The ``config`` object of coverage.json (objects given instead of specs appear by class name)."""
        embedder = self.embedder if isinstance(self.embedder, str) else type(self.embedder).__name__
        return {"entities": self.entities, "embedder": embedder, "clusters": self.clusters,
                "k_candidates": list(self.k_candidates), "seed": self.seed, "n_resamples": self.n_resamples,
                "min_queries": self.min_queries, "query_entities": self.query_entities, "max_chars": self.max_chars,
                "retrievers": [r if isinstance(r, str) else type(r).__name__ for r in retrievers],
                "generate": self.generate, "judge_depth": self.judge_depth, "judge_batch": self.judge_batch,
                "query_strata": self.query_strata, "entity_candidates": self.entity_candidates,
                "query_types": self.query_types()}
