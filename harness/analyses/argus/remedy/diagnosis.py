"""ARGUS diagnosis, the scoring half (Taghavi et al., "With Argus Eyes", section 5 and appendix D.2): mentions embedded
in their documents with the target retriever, the scorers that give each mention a predicted RPS when no probe does
(:class:`MentionAudit`, the exact audit; :class:`LabelPrior`, the label heuristic), and the flagged entities of a
:class:`Diagnosis`; :func:`diagnose` runs NER (:mod:`.ner`) and puts them together.

Embedding (:func:`mention_embeddings`): for a sentence-transformers retriever (a
:class:`gapbench.retrieval.TokenEncoder`), token embeddings of the whole document, the mean over the tokens whose
offsets overlap the mention's character span (the paper's span pooling ``g(H, s)``), L2-normalised, by
:func:`gapbench.spans.span_vectors`; past the model's token limit, the mean over all tokens. A retriever that only
gives one vector per text (``embed``) gives every mention its document's vector.

An entity's document-level risk is the minimum predicted RPS over its mentions (same surface form, case folded);
entities with risk below ``tau`` are flagged, once per document (:func:`flag_entities`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....cache import cache_dir
from ....errors import ConfigError, GapbenchError
from ....files import atomic_writer
from ....spans import embeds_texts, model_text, span_fingerprint, span_vectors, token_model
from ....types import Corpus, Document
from .kb import DEFAULT_K_AUG, ReferenceKB
from .ner import NAME_LABELS, SPACY_DEFAULT, Mention, extract_mentions

DEFAULT_TAU = 0.3
PLACE_ORG_LABELS = frozenset({"FAC", "GPE", "LOC", "ORG"})



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
                          "no probe can score its entities; use diagnosis 'audit' (or 'label-prior').")
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

    def __init__(self, retriever: Any, corpus: Corpus, kb: ReferenceKB, k_aug: int = DEFAULT_K_AUG, *,
                 k: int | None = None, n: int | None = None) -> None:
        from ..audit.rps import DEFAULT_K, DEFAULT_N

        self.retriever, self.corpus, self.kb, self.k_aug = retriever, corpus, kb, k_aug
        self.k, self.n = k or DEFAULT_K, n or DEFAULT_N
        self.counts: dict[str, Any] = {}

    def queries(self, surfaces: Mapping[str, str]) -> dict[str, list[str]]:
        """entity key -> its KB passages' texts without the surface form (keys with no passage left out)."""
        from ..audit.encoders import find_mention

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

        from ..audit.rps import mention_rps

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


def retriever_fingerprints(retriever: Any) -> set[str]:
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
