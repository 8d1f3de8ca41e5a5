"""The recollection variant (OBLIQ-Bench's Congress task): one target passage per query, no clusters. Targets are
drawn with the seed among documents of at least ``MIN_WORDS`` words; each query is a tip-of-the-tongue recollection
of its target (``prompts/recollect.txt``) that begins in one of :data:`OPENINGS`, taken in turn from a seeded start so
that the queries do not all open alike (against mode collapse). The leak check is the one of the clusters, with the
target as the cluster; the target is the query's one gold document."""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial

from .context import Context
from .llmio import cut
from .queries import Draft

STAGE = "recollect"
MIN_WORDS = 20
OPENINGS = (
    "I remember a part where",
    "There was this exchange in which",
    "Looking for the bit where",
    "What was that moment when",
    "Somewhere someone",
    "Trying to find the passage about",
    "I can't recall the details, but",
    "It went something like:",
    "I vaguely recall",
    "I need the one where",
    "Half-remembered:",
    "Not sure of the words, but",
    "Wasn't there a moment when",
    "The passage I'm after is the one where",
    "Can't place it, but",
)


def targets(ctx: Context, doc_ids: Sequence[str]) -> list[str]:
    long_enough = [d for d in doc_ids if len(ctx.text(d).split()) >= MIN_WORDS]
    ctx.tally.add(STAGE, f"documents under {MIN_WORDS} words (not targets)", len(doc_ids) - len(long_enough))
    rng = random.Random(ctx.options.seed)
    picked = sorted(rng.sample(long_enough, min(ctx.options.targets, len(long_enough))))
    ctx.tally.add(STAGE, "targets", len(picked))
    return picked


def drafts(ctx: Context, target_ids: Sequence[str]) -> list[Draft]:
    start = random.Random(f"openings:{ctx.options.seed}").randrange(len(OPENINGS))
    out = []
    for n, doc_id in enumerate(target_ids):
        opening = OPENINGS[(start + n) % len(OPENINGS)]
        passage = cut(ctx.text(doc_id), ctx.options.max_chars)
        out.append(Draft(f"t{n + 1:03d}", [doc_id], partial(_prompt, ctx, passage, opening), opening=opening))
    return out


def _prompt(ctx: Context, passage: str, opening: str, avoid: str, feedback: str) -> str:
    return ctx.prompts.render("recollect", lens=ctx.lens, passage=passage, opening=opening, avoid=avoid,
                              feedback=feedback)
