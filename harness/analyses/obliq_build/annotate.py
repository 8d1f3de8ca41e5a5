"""Stage 2, annotation: the LLM reads every document once and writes the lens attribute's value, or null.

Several documents go into one call (``batch_size``), each shown under a short id (``D1``, ``D2``, ...) that the answer
must give back. An answer that leaves out an id has that document asked again alone, once; ids the prompt did not
show (invented) or gave twice (repeated: the first kept) are counted and ignored; a document still without an answer
is dropped and counted. Values ``""``, ``"null"``, ``"none"`` and ``"n/a"`` mean no value.
"""

from __future__ import annotations

from collections.abc import Sequence

from .context import Context
from .llmio import id_answers, id_schema, numbered

STAGE = "annotate"
VALUE = {"type": ["string", "null"]}
GRAMMAR_VALUE = {**VALUE, "maxLength": 200}  # a grammar keeps a tiny model from rambling (not in OpenAI's subset)
NO_VALUE = {"", "null", "none", "n/a", "na", "no value", "not applicable"}
TOKENS_PER_VALUE = 48  # the answer's budget per document: a short sentence and its JSON


def annotate(ctx: Context, doc_ids: Sequence[str]) -> dict[str, str | None]:
    """doc id -> the attribute's value (None: the document shows none), for the documents that got an answer."""
    got: dict[str, str | None] = {}
    size = ctx.options.batch_size
    batches = [list(doc_ids[i:i + size]) for i in range(0, len(doc_ids), size)]
    missing = _round(ctx, batches, got)
    if missing:
        ctx.tally.add(STAGE, "documents asked again alone", len(missing))
        missing = _round(ctx, [[d] for d in missing], got, "asking again alone")
    for d in missing:
        ctx.drop(STAGE, d, "no usable answer for the document")
    with_value = sum(1 for v in got.values() if v is not None)
    ctx.tally.add(STAGE, "documents with a value", with_value)
    ctx.tally.add(STAGE, "documents without a value", len(got) - with_value)
    ctx.stage_io[STAGE] = {"in": len(doc_ids), "out": with_value}
    return got


def _round(ctx: Context, batches: list[list[str]], got: dict[str, str | None], step: str = "") -> list[str]:
    """Asks each batch once; fills ``got``; returns the documents left without an answer, in order."""
    prompts, shown = [], []
    for batch in batches:
        docs, ids = numbered([ctx.text(d) for d in batch], ctx.options.max_chars)
        prompts.append(ctx.prompts.render("annotate", lens=ctx.lens, documents=docs, ids=", ".join(ids)))
        shown.append(ids)
    value_schema = GRAMMAR_VALUE if ctx.style == "json_object" else VALUE
    schemas = [id_schema("annotations", "value", value_schema, ids, ctx.style) for ids in shown]
    answers = ctx.ask(STAGE, prompts, "obliq_annotations", schemas, "annotations",
                      [TOKENS_PER_VALUE * len(b) + 32 for b in batches],
                      step=step)
    missing = []
    for batch, ids, (obj, _how) in zip(batches, shown, answers):
        values = id_answers(obj, "annotations", ids, "value", ctx.tally, STAGE)
        for sid, doc_id in zip(ids, batch):
            if sid not in values:
                missing.append(doc_id)
                continue
            value = values[sid]
            if value is not None and not isinstance(value, str):
                ctx.tally.add(STAGE, "values that are not text")
                missing.append(doc_id)
                continue
            value = " ".join(value.split()) if value is not None else None
            got[doc_id] = None if value is None or value.lower().strip(" .") in NO_VALUE else value
    return missing
