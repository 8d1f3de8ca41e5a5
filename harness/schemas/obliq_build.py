"""``gapbench obliq build``'s result: :class:`ObliqBuildReport` is what :func:`gapbench.build_obliq` returns, the
task folder's ``card.json`` and its JSON Schema (``docs/schemas/obliq_build.schema.json``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict

from .base import Model, Number

FORMAT = "gapbench.obliq_build/1"


def _by_name(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {stage: dict(sorted(c.items())) for stage, c in counts.items()}


# per stage (in the order the build ran them), what was counted and how many, listed by name
StageCounts = Annotated[dict[str, dict[str, int]], AfterValidator(_by_name)]


class StageIO(Model):
    """What one stage of the build took in and gave out (``unit`` names what is counted)."""

    stage: str
    unit: str
    n_in: int
    n_out: int


class Dropped(Model):
    """One item a stage dropped, with the reason; the stage's own fields about the item are kept beside them."""

    model_config = ConfigDict(extra="allow")

    stage: str
    what: str
    reason: str


class QueryPool(Model):
    """One query's judging pool: documents pooled, sent to the judge, judged, and added as judgements."""

    pooled: int
    to_judge: int
    judged: int
    added: int


class ObliqBuildReport(Model):
    """What was built from what, and how: the card of the task folder.

    ``counts``: per stage, the answers (clean, repaired, unparseable), the ids invented or repeated, the documents
    asked again and everything dropped, by reason; ``dropped``: each dropped item with its stage and reason."""

    format: str = FORMAT
    date: str
    gapbench_version: str
    folder: str
    corpus: dict[str, Any]
    lens: str
    mode: str
    labels: str | None = None
    settings: dict[str, Any]
    model: dict[str, Any] | None = None
    prompts: dict[str, dict[str, str]]
    structured_output: str
    estimate: dict[str, Any]
    dry_run: bool = False
    stages: list[StageIO]
    counts: StageCounts
    dropped: list[Dropped]
    n_queries: int
    n_gold: int
    n_pooled: int
    n_excluded: int
    per_query_pool: dict[str, QueryPool]
    llm_usage: dict[str, Any] | None = None
    files: list[str]
    seconds: Number

    def summary(self) -> str:
        """What the command prints: the folder and its sizes, each stage's counts, what was dropped and why."""
        lines = [f"OBLIQ-style task built in {self.folder}: {self.n_queries} queries, {self.n_gold} gold and "
                 f"{self.n_pooled} pooled judgements over {self.corpus['documents']:,} documents "
                 f"({self.seconds:.0f} s)."]
        for s in self.stages:
            lines.append(f"  {s.stage:<10} {s.n_in:>7} -> {s.n_out:<7} {s.unit}")
        reasons: dict[tuple[str, str], int] = {}
        for d in self.dropped:
            reasons[(d.stage, d.reason)] = reasons.get((d.stage, d.reason), 0) + 1
        for (stage, reason), n in sorted(reasons.items()):
            lines.append(f"  dropped at {stage}: {n} ({reason})")
        if self.llm_usage:
            u = self.llm_usage
            lines.append(f"  LLM: {u.get('calls', 0)} calls, {u.get('cache_hits', 0)} answers from the cache, "
                         f"{u.get('prompt_tokens', 0):,} tokens in, {u.get('completion_tokens', 0):,} out")
        lines.append(f"  evaluate it: gapbench run {self.folder} -r bm25 (gold judgements); gapbench run "
                     f"{self.folder}:split=pooled -r bm25 (pooled)")
        return "\n".join(lines)
