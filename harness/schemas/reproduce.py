"""``matrix.json`` of ``gapbench reproduce``: published numbers beside gapbench's, graded.

A row of the shipped matrix (``tasks/data/reproduce/matrix.toml``) is a :class:`MatrixEntry`; what the command
measured and how it graded adds the fields of :class:`MatrixRow`. Two grading rules exist and every measured row carries
both grades (``grade_gapbench``, ``grade_anserini``); ``grade`` is the one its ``rule`` names:

* ``gapbench``: ``OK`` when ``|measured - published| <= tolerance``, ``OKish`` up to twice the tolerance, ``FAIL``
  beyond; symmetric (a result above the published number is graded as one below it).
* ``anserini``: Anserini's regression check (``ReproduceFromDocumentCollection.java``): both values rounded half-up to
  four decimals; ``OK`` when they are equal or the measured one is higher, or (tolerance > 0, Anserini's dense models)
  within the tolerance; ``OKish`` within 1.5 times the tolerance (tolerance > 0 only); ``FAIL`` otherwise. A tolerance
  of 0 is Anserini's rule for BM25: an exact match at the published precision or better.

``not run``: the row's data is not on this machine (``why`` says how to put it there). ``not comparable``: run on a
``--data`` copy that is not the published set (``--ungraded``); never OK or FAIL, never counted, never a board's
reference.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import Model, Number

Grade = Literal["OK", "OKish", "FAIL", "not run", "not comparable"]
GRADES: tuple[str, ...] = ("OK", "OKish", "FAIL", "not run", "not comparable")
Rule = Literal["gapbench", "anserini"]
MAX_TOLERANCE = 0.05  # a tolerance this wide would call a different system a reproduction


class DataIdentity(Model):
    """What a task's data holds: counted when it is loaded, or published for the set a row's number was measured on."""

    documents: int | None = Field(None, ge=0, description="Documents in the corpus.")
    queries: int | None = Field(None, ge=0, description="Queries of the evaluated split that have judgements.")
    judgements: int | None = Field(None, ge=0, description="(query, document) judgements of the split, any grade.")
    fingerprint: str | None = Field(None, description="gapbench's corpus fingerprint (sha256 over ids and text), "
                                    "where gapbench knows the published files.")


class PublishedIdentity(DataIdentity):
    """An ``[[identity]]`` table of the matrix: the published set of a task, with where the counts come from."""

    task: str = Field(min_length=1, max_length=300, description="Task name (no options), e.g. beir/scifact.")
    source: str = Field(min_length=1, description="Where the counts are published.")


class MatrixEntry(Model):
    """One published result: what to run and what the source reported."""

    id: str = Field(min_length=1, max_length=200, description="Row id: <task>/<retriever label>.")
    task: str = Field(min_length=1, max_length=300, description="Task spec, as `gapbench run` takes it.")
    retriever: str = Field(min_length=1, max_length=300, description="Retriever spec (NAME or NAME:key=value,...).")
    reranker: str | None = Field(None, description="Reranker spec where the source used one.")
    measure: str = Field(min_length=1, max_length=60, description="ir-measures name, e.g. nDCG@10.")
    published: Number = Field(description="The published value, on the 0-1 scale.")
    tolerance: Number = Field(description="Rule gapbench: |measured - published| at most this is OK, at most twice "
                              "OKish. Rule anserini: 0 is an exact match at four decimals, more is Anserini's "
                              "dense-model tolerance. Below 0.05.")
    rule: Rule = Field("gapbench", description="The grading rule: gapbench (symmetric) or anserini (Anserini's own).")
    source: str = Field(min_length=1, description="Paper, version and table, or repository, path and commit.")
    note: str = Field("", description="How gapbench's protocol differs from the source's, where it does.")
    k: int = Field(1000, ge=1, le=100_000, description="Documents retrieved per query.")

    @field_validator("published", "tolerance")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"is {value}; give a finite number")
        return value

    @field_validator("published")
    @classmethod
    def _published(cls, value: float) -> float:
        if not 0 <= value <= 1:
            raise ValueError(f"is {value}; a published value is on the 0-1 scale (write 0.152 for 15.2)")
        return value

    @model_validator(mode="after")
    def _tolerance(self) -> MatrixEntry:
        low = "0 (an exact match)" if self.rule == "anserini" else "above 0"
        if not (0 <= self.tolerance < MAX_TOLERANCE) or (self.rule == "gapbench" and self.tolerance == 0):
            raise ValueError(f"tolerance is {self.tolerance}; it must be {low} and below {MAX_TOLERANCE} "
                             f"(rule {self.rule})")
        return self


class MatrixRow(MatrixEntry):
    """A row as ``gapbench reproduce`` reports it."""

    data_here: bool = Field(description="Whether the task's data is on this machine (nothing to download).")
    measured: Number | None = Field(None, description="gapbench's value; null when the row was not run.")
    delta: Number | None = Field(None, description="measured - published.")
    grade: Grade = Field(description="OK, OKish or FAIL under the row's rule; not run; not comparable.")
    grade_gapbench: Grade | None = Field(None, description="The grade under gapbench's rule (null when not run).")
    grade_anserini: Grade | None = Field(None, description="The grade under Anserini's rule, with no tolerance for "
                                         "lexical retrievers and the row's for dense ones (null when not run).")
    discriminates: bool = Field(True, description="False when an empty run (0) would not FAIL the row: the row "
                                "tests nothing and is left out of the exit status.")
    counted: bool = Field(False, description="Whether a FAIL of this row makes the command exit 1 (graded, "
                          "comparable and discriminating).")
    identity: DataIdentity | None = Field(None, description="What the --data copy held, where one was given.")
    why: str = Field("", description="Why the row was not run or is not comparable, and what to do.")
    run_dir: str | None = Field(None, description="The run directory that holds the run (and caches it).")
    cached: bool = Field(False, description="Whether the run was read back from run_dir rather than made now.")


class ReproduceCounts(Model):
    OK: int = 0
    OKish: int = 0
    FAIL: int = 0
    not_run: int = Field(0, description="Rows whose data is not on this machine.")
    not_comparable: int = Field(0, description="Rows run on a --data copy that is not the published set.")
    non_discriminating: int = Field(0, description="Rows an empty run would not FAIL (graded, but not counted).")
    failing: int = Field(0, description="FAIL rows that count: the command exits 1 when this is above 0.")


class ReproduceReport(Model):
    """``matrix.json``: every row selected, graded."""

    kind: Literal["reproduce"] = "reproduce"
    version: Literal[1] = 1
    matrix: str = Field(description="The matrix file the rows came from.")
    gapbench_version: str
    date: str
    counts: ReproduceCounts
    rows: list[MatrixRow]
