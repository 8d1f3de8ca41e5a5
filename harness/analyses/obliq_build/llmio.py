"""What every stage shares: its prompt templates (packaged, or overridden from a folder), structured answers (a JSON
schema sent as ``response_format`` where the server enforces it, strict parsing of the text otherwise) and the counts
of clean, repaired and dropped answers."""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError

PROMPTS_DIR = Path(__file__).with_name("prompts")
PROMPT_NAMES = ("annotate", "consolidate", "merge", "query", "judge", "pool_judge", "recollect")
STRUCTURED = ("auto", "json_schema", "json_object", "off")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class Prompts:
    """The templates of one build: ``folder/<name>.txt`` where a folder is given and holds one, else the packaged one.
    Each template is checked for the fields its stage fills before any call is made."""

    FIELDS = {
        "annotate": {"lens", "documents", "ids"},
        "consolidate": {"lens", "values"},
        "merge": {"lens", "descriptions"},
        "query": {"lens", "description", "avoid", "feedback"},
        "judge": {"lens", "query", "documents", "ids"},
        "pool_judge": {"lens", "query", "anchors", "documents", "ids"},
        "recollect": {"lens", "passage", "opening", "avoid", "feedback"},
    }

    MAIN = {"annotate": "documents", "consolidate": "values", "merge": "descriptions", "query": "description",
            "judge": "documents", "pool_judge": "documents", "recollect": "passage"}

    def __init__(self, folder: str | Path | None = None) -> None:
        self.texts: dict[str, str] = {}
        self.paths: dict[str, Path] = {}
        for name in PROMPT_NAMES:
            path = PROMPTS_DIR / f"{name}.txt"
            if folder is not None and (Path(folder) / f"{name}.txt").is_file():
                path = Path(folder) / f"{name}.txt"
            text = path.read_text(encoding="utf-8")
            used = {f for _, f, _, _ in _parse(text, path) if f is not None}
            wanted, main = self.FIELDS[name], self.MAIN[name]
            if used - wanted or main not in used:
                raise ConfigError(f"prompt template {path} uses the fields {', '.join(sorted(used)) or '(none)'}; "
                                  f"the {name} template takes {', '.join(sorted(wanted))}, {main} at least (a literal "
                                  "brace is written {{ or }}).")
            self.texts[name], self.paths[name] = text, path
        if folder is not None:
            unknown = sorted(p.stem for p in Path(folder).glob("*.txt") if p.stem not in PROMPT_NAMES)
            if unknown:
                raise ConfigError(f"prompts folder {folder} holds {', '.join(u + '.txt' for u in unknown)}, which no "
                                  f"stage reads; the templates are {', '.join(n + '.txt' for n in PROMPT_NAMES)}.")

    def render(self, name: str, **values: Any) -> str:
        return self.texts[name].format(**values)

    def hashes(self) -> dict[str, str]:
        """sha256 of each template's text (the card records them: the same hashes, the same prompts)."""
        return {n: hashlib.sha256(t.encode("utf-8")).hexdigest() for n, t in self.texts.items()}

    def sources(self) -> dict[str, str]:
        return {n: ("packaged" if p.parent == PROMPTS_DIR else str(p)) for n, p in self.paths.items()}


def _parse(text: str, path: Path):
    try:
        return list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ConfigError(f"prompt template {path} is not a valid str.format template ({exc}); a literal brace is "
                          "written {{ or }}.") from None


def response_format(name: str, schema: Mapping[str, Any], style: str) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``schema``: OpenAI's ``json_schema`` (vLLM, OpenAI, llama.cpp's C++
    server), ``json_object`` with the schema inside (llama-cpp-python's server, which turns it into a grammar), or
    None (``off``: the prompt alone asks for JSON)."""
    if style == "off":
        return None
    if style == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": dict(schema)}}


def id_schema(key: str, field: str, value: Mapping[str, Any], ids: Sequence[str], style: str) -> dict[str, Any]:
    """The schema of ``{key: [{"id": ..., field: ...}, ...]}`` for the ``ids`` shown. With a grammar
    (``json_object``: llama-cpp-python) it is a tuple with every id once, in order, so even a tiny model cannot drop,
    repeat or invent one; with ``json_schema`` (OpenAI's strict subset has no tuples) the ids are an enum."""
    def item(id_schema_: Mapping[str, Any]) -> dict:
        return {"type": "object", "properties": {"id": dict(id_schema_), field: dict(value)},
                "required": ["id", field], "additionalProperties": False}

    if style == "json_object":
        array = {"type": "array", "prefixItems": [item({"const": i}) for i in ids], "minItems": len(ids),
                 "maxItems": len(ids), "items": False}
    else:
        array = {"type": "array", "items": item({"type": "string", "enum": list(ids)})}
    return {"type": "object", "properties": {key: array}, "required": [key], "additionalProperties": False}


def structured_style(requested: str, base_url: str | None) -> str:
    """``auto``: ``json_object`` for gapbench's embedded llama.cpp server (llama-cpp-python), else ``json_schema``."""
    if requested != "auto":
        return requested
    from ...llm.local import _SHARED  # the embedded servers this process runs

    embedded = {s.base_url for s in list(_SHARED.values())}
    return "json_object" if base_url and base_url.rstrip("/") in embedded else "json_schema"


def parse_object(text: str, key: str) -> tuple[dict | None, str]:
    """``(object, how)`` from an answer that should be one JSON object holding ``key``: ``clean`` when the whole
    answer is that object; ``repaired`` when it had to be found inside code fences or prose around it, or held raw
    control characters inside a string; ``unparseable`` (None) otherwise."""
    stripped = text.strip()
    obj = _loads(stripped)
    if isinstance(obj, dict) and key in obj:
        return obj, "clean"
    candidates = [stripped] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if start >= 0 and end > start:
        candidates.append(stripped[start:end + 1])
    for cand in candidates:
        # a raw newline or tab inside a string (a grammar's "any character" lets a small model write one)
        obj = _loads(cand, strict=False)
        if isinstance(obj, dict) and key in obj:
            return obj, "repaired"
    if isinstance(_loads(stripped), list) and key in ("annotations", "judgements", "groups"):
        return {key: _loads(stripped)}, "repaired"  # the list alone, without its wrapping object
    return None, "unparseable"


def _loads(text: str, strict: bool = True) -> Any:
    try:
        return json.loads(text, strict=strict)
    except (ValueError, RecursionError):
        return None


def numbered(texts: Sequence[str], max_chars: int, prefix: str = "D") -> tuple[str, list[str]]:
    """Documents as ``<document id="D1">...</document>`` blocks (each cut to ``max_chars``), and their short ids."""
    ids = [f"{prefix}{i}" for i in range(1, len(texts) + 1)]
    blocks = [f'<document id="{i}">\n{cut(t, max_chars)}\n</document>' for i, t in zip(ids, texts)]
    return "\n".join(blocks), ids


def cut(text: str, max_chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= max_chars else text[:max_chars].rstrip() + " ..."


class Tally:
    """Counts per stage: ``tally.add("annotate", "repaired")``; ``tally.counts`` is the card's ``counts`` (whose
    model lists each stage's counts by name)."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}

    def add(self, stage: str, what: str, n: int = 1) -> None:
        if n:
            self.counts.setdefault(stage, Counter())[what] += n

    def get(self, stage: str, what: str) -> int:
        return self.counts.get(stage, Counter())[what]


def id_answers(obj: dict | None, key: str, ids: Sequence[str], field: str, tally: Tally, stage: str) -> dict[str, Any]:
    """short id -> ``item[field]`` from ``obj[key]``, a list of ``{"id": ..., field: ...}``: an id the prompt did not
    show (invented) or given again (repeated, the first kept) is counted and ignored, as is an item that is no
    object."""
    out: dict[str, Any] = {}
    items = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return out
    shown = set(ids)
    for item in items:
        if not isinstance(item, dict) or "id" not in item or field not in item:
            tally.add(stage, "malformed items")
            continue
        sid = str(item["id"]).strip()
        if sid not in shown:
            tally.add(stage, "invented ids")
            continue
        if sid in out:
            tally.add(stage, "repeated ids")
            continue
        out[sid] = item[field]
    return out
