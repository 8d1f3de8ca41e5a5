"""``matrix.json`` of ``gapbench reproduce``: published numbers beside gapbench's, graded.

A row of the shipped matrix (``tasks/data/reproduce/matrix.toml``) is a :class:`MatrixEntry`; what the command
measured and how it graded adds the fields of :class:`MatrixRow`. Grades follow Anserini's regression matrix: ``OK``
when ``|measured - published| <= tolerance``, ``OKish`` up to twice the tolerance, ``FAIL`` beyond; ``not run`` when
the row's data is not on this machine (``why`` says how to put it there).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Model, Number

Grade = Literal["OK", "OKish", "FAIL", "not run"]
GRADES: tuple[str, ...] = ("OK", "OKish", "FAIL", "not run")


class MatrixEntry(Model):
    """One published result: what to run and what the source reported."""

    id: str = Field(min_length=1, max_length=200, description="Row id: <task>/<retriever label>.")
    task: str = Field(min_length=1, max_length=300, description="Task spec, as `gapbench run` takes it.")
    retriever: str = Field(min_length=1, max_length=300, description="Retriever spec (NAME or NAME:key=value,...).")
    reranker: str | None = Field(None, description="Reranker spec where the source used one.")
    measure: str = Field(min_length=1, max_length=60, description="ir-measures name, e.g. nDCG@10.")
    published: Number = Field(description="The published value, on the 0-1 scale.")
    tolerance: Number = Field(gt=0, description="|measured - published| at most this is OK, at most twice OKish.")
    source: str = Field(min_length=1, description="Paper and table, or repository, path and commit.")
    note: str = Field("", description="How gapbench's protocol differs from the source's, where it does.")
    k: int = Field(1000, ge=1, le=100_000, description="Documents retrieved per query.")


class MatrixRow(MatrixEntry):
    """A row as ``gapbench reproduce`` reports it."""

    data_here: bool = Field(description="Whether the task's data is on this machine (nothing to download).")
    measured: Number | None = Field(None, description="gapbench's value; null when the row was not run.")
    delta: Number | None = Field(None, description="measured - published.")
    grade: Grade = Field(description="OK, OKish, FAIL, or not run.")
    why: str = Field("", description="Why the row was not run, and how to give it its data.")
    run_dir: str | None = Field(None, description="The run directory that holds the run (and caches it).")
    cached: bool = Field(False, description="Whether the run was read back from run_dir rather than made now.")


class ReproduceCounts(Model):
    OK: int = 0
    OKish: int = 0
    FAIL: int = 0
    not_run: int = Field(0, description="Rows whose data is not on this machine.")


class ReproduceReport(Model):
    """``matrix.json``: every row selected, graded."""

    kind: Literal["reproduce"] = "reproduce"
    version: Literal[1] = 1
    matrix: str = Field(description="The matrix file the rows came from.")
    gapbench_version: str
    date: str
    counts: ReproduceCounts
    rows: list[MatrixRow]
