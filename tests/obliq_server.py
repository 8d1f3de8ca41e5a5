"""A scripted OpenAI-compatible server for ``gapbench obliq build`` tests (a helper module, not a test file).

It reuses :class:`llm_server.LLMServer` (HTTP, counters, faults) and answers the build's prompts from hidden
attributes planted in a :class:`World`: which attribute each document truly has (``truth``), what the annotator says
(``said``: None for distractors and for the planted misses), the phrasings of each attribute's value, its canonical
description and the queries it writes on each try (a planted leaky first try, then a clean one). Each prompt is
recognised by its first line, as the packaged templates of ``gapbench/analyses/obliq_build/prompts`` write it.

Scripted faults: ``garble`` (prompt kinds answered in prose, no JSON), ``fence`` (the JSON in a fenced block with
prose around it, as small models answer), ``drop_ids`` (documents whose id a batch answer of several leaves out: the build must ask them again
alone), ``invent_id`` (the first annotation answer also names an id it was not shown), ``repeat_id`` (it answers for its
first document twice, the second time wrongly), ``fail_after`` (every chat
request after the first N is refused with HTTP 400, as a server that goes away mid-build).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field

from llm_server import LLMServer, _norm

_DOC = re.compile(r'<document id="([A-Z]\d+)">\n(.*?)\n</document>', re.S)


@dataclass
class Attribute:
    values: list[str]  # the annotator's phrasings, picked per document in turn
    description: str
    queries: list[str]  # the query written on try 1, 2, ... (the last one repeats)


@dataclass
class World:
    docs: dict[str, str]
    truth: dict[str, str | None]
    said: dict[str, str | None]
    attributes: dict[str, Attribute]
    recollections: dict[str, list[str]] = field(default_factory=dict)  # doc id -> recollection per try

    def doc_of(self, text: str) -> str:
        text = _norm(text).removesuffix(" ...")
        for doc_id, body in self.docs.items():
            if _norm(body).startswith(text):
                return doc_id
        raise ValueError(f"the server was shown a document it does not know: {text[:60]!r}")

    def value_of(self, doc_id: str) -> str | None:
        key = self.said.get(doc_id)
        if key is None:
            return None
        values = self.attributes[key].values
        return values[sorted(d for d in self.said if self.said[d] == key).index(doc_id) % len(values)]

    def key_of_value(self, value: str) -> str:
        value = _norm(value).lower().strip(" .")
        for key, a in self.attributes.items():
            if value in {_norm(v).lower().strip(" .") for v in a.values} or value == _norm(a.description).lower():
                return key
        raise ValueError(f"unknown value {value!r}")

    def key_of_query(self, query: str) -> str:
        """The attribute a query was written for, or ``doc:<id>`` for a recollection of that document."""
        for key, a in self.attributes.items():
            if _norm(query) in {_norm(q) for q in a.queries}:
                return key
        for doc_id, script in self.recollections.items():
            if _norm(query) in {_norm(q) for q in script}:
                return f"doc:{doc_id}"
        raise ValueError(f"unknown query {query!r}")

    def grade(self, key: str, doc_id: str) -> int:
        if key.startswith("doc:"):
            return 2 if doc_id == key[4:] else 0
        return 2 if self.truth.get(doc_id) == key else 0


class ObliqServer(LLMServer):
    def __init__(self, world: World, *, drop_ids: set[str] = frozenset(), invent_id: bool = False,
                 fail_after: int | None = None, garble: set[str] = frozenset(), fence: set[str] = frozenset(),
                 repeat_id: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.world, self.drop_ids, self.invent_id, self.fail_after = world, set(drop_ids), invent_id, fail_after
        self.repeat_id = repeat_id
        self.garble = set(garble)  # prompt kinds answered with prose instead of JSON
        self.fence = set(fence)  # prompt kinds answered with the JSON inside a fenced block, prose around it
        self.kinds: list[str] = []  # the kind of each chat prompt answered, in order
        self.query_prompts: list[str] = []
        self._script_lock = threading.Lock()
        self._chats = 0

    def _chat(self, h, body, model):
        with self._script_lock:
            self._chats += 1
            over = self.fail_after is not None and self._chats > self.fail_after
        if over:
            return self._fail(h, 400, "scripted failure: this server has stopped answering (test server)",
                              "invalid_request_error")
        return super()._chat(h, body, model)

    def answer(self, prompt: str) -> tuple[str, str]:
        first = prompt.lstrip().splitlines()[0]
        for start, kind in (("You read documents", "annotate"), ("You name what", "consolidate"),
                            ("You decide which", "merge"), ("You write one search query", "query"),
                            ("You judge whether documents", "judge"), ("You judge whether retrieved", "pool_judge"),
                            ("You write a tip-of-the-tongue", "recollect")):
            if first.startswith(start):
                with self._script_lock:
                    self.kinds.append(kind)
                if kind in self.garble:
                    return "Sure! Here are my thoughts on these documents, which are all quite interesting.", kind
                text = json.dumps(getattr(self, f"_{kind}")(prompt))
                if kind in self.fence:
                    return f"Here is the JSON you asked for:\n```json\n{text}\n```\nHope this helps.", kind
                return text, kind
        return super().answer(prompt)

    def _docs(self, prompt: str, after: str = "") -> list[tuple[str, str]]:
        part = prompt.split(after, 1)[1] if after else prompt
        return [(sid, self.world.doc_of(text)) for sid, text in _DOC.findall(part)]

    def _annotate(self, prompt: str) -> dict:
        shown = self._docs(prompt)
        items = [{"id": sid, "value": self.world.value_of(d)} for sid, d in shown
                 if not (len(shown) > 1 and d in self.drop_ids)]
        with self._script_lock:
            if self.invent_id:
                self.invent_id = False
                items.append({"id": f"D{len(shown) + 7}", "value": "an answer for a document never shown"})
            if self.repeat_id and items:
                self.repeat_id = False
                items.append({"id": items[0]["id"], "value": "a second answer for the same document"})
        return {"annotations": items}

    def _consolidate(self, prompt: str) -> dict:
        values = re.findall(r"^- (.*) \((\d+)\)$", prompt, re.M)
        votes: dict[str, int] = {}
        for value, n in values:
            key = self.world.key_of_value(value)
            votes[key] = votes.get(key, 0) + int(n)
        return {"description": self.world.attributes[max(votes, key=lambda k: (votes[k], k))].description}

    def _merge(self, prompt: str) -> dict:
        groups: dict[str, list[int]] = {}
        for num, desc in re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M):
            groups.setdefault(self.world.key_of_value(desc), []).append(int(num))
        return {"groups": list(groups.values())}

    def _query(self, prompt: str) -> dict:
        with self._script_lock:
            self.query_prompts.append(prompt)
        desc = re.search(r"^The documents to find share this value of it: (.*)$", prompt, re.M).group(1)
        key = self.world.key_of_value(desc)
        tried = re.search(r"This is try (\d+)", prompt)
        n = int(tried.group(1)) if tried else 1
        queries = self.world.attributes[key].queries
        return {"query": queries[min(n, len(queries)) - 1]}

    def _grades(self, prompt: str, after: str) -> dict:
        query = re.search(r"^Query: (.*)$", prompt, re.M).group(1)
        key = self.world.key_of_query(query)
        return {"judgements": [{"id": sid, "grade": self.world.grade(key, d)} for sid, d in self._docs(prompt, after)]}

    def _judge(self, prompt: str) -> dict:
        return self._grades(prompt, "")

    def _pool_judge(self, prompt: str) -> dict:
        return self._grades(prompt, "Documents to judge:")

    def _recollect(self, prompt: str) -> dict:
        passage = prompt.split("The passage:\n", 1)[1].split("\n\n", 1)[0]
        doc_id = self.world.doc_of(passage)
        tried = re.search(r"This is try (\d+)", prompt)
        n = int(tried.group(1)) if tried else 1
        script = self.world.recollections[doc_id]
        return {"query": script[min(n, len(script)) - 1]}
