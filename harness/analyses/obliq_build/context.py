"""The state every stage reads: the corpus being built from, the options, the prompts, the LLM client and the counts;
and the one way a stage calls the LLM (cached, with a progress bar, structured output where the server has it)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ...files import write_text_atomic
from ...formats import parse_json_strict
from ...llm.competence import values_verdict, watching
from ...progress import progress
from ...types import Corpus
from .llmio import Prompts, Tally, parse_object, response_format
from .obliq_options import ObliqBuildOptions

CHECKPOINTS = ".obliq_build"  # per-stage results inside the output folder, reused by a re-run


@dataclass
class Context:
    options: ObliqBuildOptions
    corpus: Corpus
    prompts: Prompts
    client: Any = None
    style: str = "json_schema"
    tally: Tally = field(default_factory=Tally)
    per_query: dict[str, dict[str, int]] = field(default_factory=dict)
    stage_io: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)  # retrievers indexed on the corpus, by spec (BM25)

    @property
    def lens(self) -> str:
        return " ".join(self.options.lens.split())

    def text(self, doc_id: str) -> str:
        doc = self.corpus[doc_id]
        return f"{doc.title}. {doc.text}" if doc.title else doc.text

    def ask(self, stage: str, prompts: Sequence[str], schema_name: str,
            schema: Mapping[str, Any] | Sequence[Mapping[str, Any]], key: str, max_tokens: Sequence[int] | int,
            tags: Sequence[str] | None = None, step: str = "") -> list[tuple[dict | None, str]]:
        """One structured call per prompt (cached by the LLM layer, so a re-run makes none): ``(object, how)`` per
        prompt, ``how`` being clean, repaired or unparseable (counted under ``stage``). ``schema``: one for every
        prompt, or one per prompt; ``step`` names the part of the stage in the progress line."""
        from ...llm.client import ChatRequest

        if not prompts:
            return []
        schemas = [schema] * len(prompts) if isinstance(schema, Mapping) else list(schema)
        budgets = [max_tokens] * len(prompts) if isinstance(max_tokens, int) else list(max_tokens)
        # the stage's budget where it needs more than the config's, else the user's own (--llm-max-tokens)
        own = getattr(getattr(self.client, "config", None), "max_tokens", None) or 0
        budgets = [max(b, own) for b in budgets]
        reqs = []
        for i, (p, b, sch) in enumerate(zip(prompts, budgets, schemas)):
            fmt = response_format(schema_name, sch, self.style)
            reqs.append(ChatRequest(p, tag=(tags[i] if tags else f"{stage}:{i}"),
                                    params={"max_tokens": b, **({"response_format": fmt} if fmt else {})}))
        with progress(len(reqs), f"obliq build: {stage}" + (f" ({step})" if step else ""), unit="calls") as advance, \
                watching(self.client, f"obliq build: {stage}", partial(judge_answer, key)):
            answers = self.client.chat_many(reqs, progress=advance)
        out = []
        for ans in answers:
            obj, how = parse_object(ans.text, key)
            self.tally.add(stage, f"answers {how}")
            if getattr(ans, "truncated", False):
                self.tally.add(stage, "answers cut by their token budget")
            out.append((obj, how))
        self.tally.add(stage, "calls", len(reqs))
        return out

    def drop(self, stage: str, what: str, reason: str, **detail: Any) -> None:
        self.tally.add(stage, f"dropped: {reason}")
        self.dropped.append({"stage": stage, "what": what, "reason": reason, **detail})

    # -- checkpoints ------------------------------------------------------------------------------------------
    def checkpoint_key(self, stage: str, *parts: Any) -> str:
        model = getattr(self.client, "fingerprint", "") if self.client is not None else ""
        blob = json.dumps([stage, model, self.prompts.hashes(), self.options.settings(), self.corpus.fingerprint,
                           *parts], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def load_checkpoint(self, stage: str, key: str) -> Any | None:
        path = Path(self.options.out) / CHECKPOINTS / f"{stage}.json"
        if not path.is_file():
            return None
        try:
            data = parse_json_strict(path.read_bytes())
        except (OSError, ValueError):  # a broken checkpoint is recomputed (from the LLM cache: no call repeated)
            return None
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        self.tally.counts.update({k: Counter(v) for k, v in data.get("tally", {}).items()})
        self.dropped.extend(data.get("dropped", []))
        self.per_query.update(data.get("per_query", {}))
        self.stage_io.update(data.get("stage_io", {}))
        return data["result"]

    def save_checkpoint(self, stage: str, key: str, result: Any, stages: Sequence[str]) -> None:
        """The stage's result, and its own counts (``stages``: the tally keys it wrote), for a re-run to reuse."""
        data = {"key": key, "result": result,
                "tally": {s: dict(self.tally.counts[s]) for s in stages if s in self.tally.counts},
                "dropped": [d for d in self.dropped if d["stage"] in stages],
                "per_query": self.per_query if stage == "pool" else {},
                "stage_io": {s: v for s, v in self.stage_io.items() if s in stages}}
        write_text_atomic(Path(self.options.out) / CHECKPOINTS / f"{stage}.json", json.dumps(data, sort_keys=True))


def judge_answer(key: str, prompt: str, text: str) -> str:
    """The watch's verdict on a stage's answer (:mod:`gapbench.llm.competence`): ``invalid`` when it holds no
    object with ``key``, or an empty list of items; else the verdict on the values it gives (an item's fields other
    than its id): ``ok`` when one is usable, ``echo`` when they copy the prompt or its documents, ``null`` when all
    are null or placeholders."""
    obj, _how = parse_object(text, key)
    if obj is None:
        return "invalid"
    given = obj[key]
    if isinstance(given, list):
        values = [v for item in given if isinstance(item, dict) for k, v in item.items() if k != "id"]
        return values_verdict(prompt, values) if values else "invalid"
    return values_verdict(prompt, [given])
