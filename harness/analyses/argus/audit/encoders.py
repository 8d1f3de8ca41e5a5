"""Entity encoders of the ARGUS audit (appendix B.4): span pooling over a sentence-transformers model's token vectors,
the retriever's own paragraph vector, or seeded random vectors (a chance control); see :mod:`.retrievability`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....errors import ConfigError
from ....spans import embeds_texts, model_text, normalise, span_fingerprint, span_vectors, token_model
from .inputs import AuditData, Entity
from .rps import _seed_from

_WS = re.compile(r"\s+")


def find_mention(text: str, label: str | None) -> tuple[int, int] | None:
    """Character span of the first case-insensitive, whitespace-normalised occurrence of ``label`` in ``text``."""
    if not label:
        return None
    parts = [re.escape(p) for p in label.split()]
    if not parts:
        return None
    m = re.search(r"\s+".join(parts), text, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None



class RandomEncoder:
    """Seeded Gaussian unit vectors, one per text: ranks are uniform, so mean RPS must equal chance."""

    name = "random"
    pooling = "none"

    def __init__(self, dim: int = 64, seed: int = 0) -> None:
        if dim < 2:
            raise ConfigError("random: dim must be at least 2.")
        self.dim = dim
        self.seed = seed

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"argus-random:{self.dim}:{self.seed}".encode()).hexdigest()

    def encode_entities(self, entities: Sequence[Entity]) -> tuple[np.ndarray, dict[str, int]]:
        out = np.empty((len(entities), self.dim), dtype=np.float32)
        for i, e in enumerate(entities):
            v = np.random.default_rng(_seed_from(self.seed, e.paragraph)).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out, {"label_found": 0, "label_prepended": 0, "no_label": 0}


class SentenceEncoder:
    """The retriever's own paragraph vector (``embed(texts)``, cached by the adapter); labels are ignored."""

    pooling = "sentence"

    def __init__(self, retriever: Any, spec: str = "") -> None:
        self.retriever = retriever
        self.name = spec or getattr(retriever, "name", type(retriever).__name__)

    @property
    def fingerprint(self) -> str:
        from ....retrieval import fingerprint_of

        return hashlib.sha256(f"argus-sentence:v1:{fingerprint_of(self.retriever)}".encode()).hexdigest()

    def encode_entities(self, entities: Sequence[Entity]) -> tuple[np.ndarray, dict[str, int]]:
        emb = np.asarray(self.retriever.embed([e.paragraph for e in entities]), dtype=np.float32)
        return normalise(emb), {"label_found": 0, "label_prepended": 0, "no_label": 0}


class SpanEncoder:
    """Mention-span mean pooling over a sentence-transformers model's token embeddings (appendix B.4).

    Works with gapbench's ``Dense`` adapter (any sentence-transformers model). Results are cached in the embedding
    cache (kind ``argus``) keyed by this encoder's fingerprint and the (span, text) pairs.
    """

    pooling = "span"

    def __init__(self, dense: Any, spec: str = "dense", batch_size: int = 32, block: int = 256) -> None:
        self.block = block
        self.dense = dense
        self.name = spec
        self.batch_size = batch_size

    @property
    def fingerprint(self) -> str:
        return span_fingerprint(self.dense.fingerprint)

    def _model(self):
        model = token_model(self.dense)
        if model is None:
            raise ConfigError(f"argus: {self.name!r} gives no sentence-transformers token model, so span pooling is "
                              "impossible; use pooling=sentence.")
        return model

    def ground(self, entities: Sequence[Entity]) -> tuple[list[str], list[tuple[int, int] | None], dict[str, int]]:
        """Texts and character spans to pool; prepends labels that are missing or truncated away."""
        model = self._model()
        tok = model.tokenizer
        max_len = model.max_seq_length
        texts: list[str] = []
        spans: list[tuple[int, int] | None] = []
        stats = {"label_found": 0, "label_prepended": 0, "no_label": 0}
        for e in entities:
            text = model_text(model, e.paragraph)[0]
            label = model_text(model, e.label)[0] if e.label else None
            if not label:
                texts.append(text)
                spans.append(None)
                stats["no_label"] += 1
                continue
            span = find_mention(text, label)
            if span is not None:
                offs = tok(text, return_offsets_mapping=True, truncation=True, max_length=max_len)["offset_mapping"]
                if not any(b > a and a < span[1] and b > span[0] for a, b in offs):
                    span = None
            if span is None:
                text = label + "\n" + text
                span = (0, len(label))
                stats["label_prepended"] += 1
            else:
                stats["label_found"] += 1
            texts.append(text)
            spans.append(span)
        return texts, spans, stats

    def _encode_keys(self, keys: list[str]) -> np.ndarray:
        spans, texts = [], []
        for key in keys:
            a, b, text = key.split("\t", 2)
            spans.append(None if a == "-" else (int(a), int(b)))
            texts.append(text)
        return self.encode_spans(texts, spans)

    def encode_spans(self, texts: Sequence[str], spans: Sequence[tuple[int, int] | None]) -> np.ndarray:
        """Span-pooled, L2-normalised vectors, one span per text; ``None`` spans pool every (non-special) token."""
        return span_vectors(self._model(), texts, [[s] for s in spans], batch_size=self.batch_size, block=self.block)[0]

    def encode_entities(self, entities: Sequence[Entity]) -> tuple[np.ndarray, dict[str, int]]:
        from ....cache import EmbeddingCache

        texts, spans, stats = self.ground(entities)
        keys = [("-\t-\t" if s is None else f"{s[0]}\t{s[1]}\t") + t for t, s in zip(texts, spans)]
        if getattr(self.dense, "cache", True):
            emb = EmbeddingCache(self.fingerprint, keys, chunk_size=1024, kind="argus").get(self._encode_keys)
        else:
            emb = self._encode_keys(keys)
        return emb, stats


def get_encoder(retriever: Any = "dense", pooling: str = "auto") -> Any:
    """An entity encoder for a retriever spec (``dense``, ``dense:model=NAME``, ``random``, ``random:dim=64,seed=1``)
    or object. ``pooling``: ``auto`` (span when token embeddings are available, else sentence), ``span``, ``sentence``.
    """
    if pooling not in ("auto", "span", "sentence"):
        raise ConfigError(f"pooling must be auto, span or sentence, got {pooling!r}.")
    if isinstance(retriever, str) and retriever.split(":", 1)[0].strip() == "random":
        from ....specs import parse_spec

        _, opts = parse_spec(retriever)
        unknown = set(opts) - {"dim", "seed"}
        if unknown:
            raise ConfigError(f"random: unknown option(s) {sorted(unknown)}; accepted: dim, seed.")
        return RandomEncoder(dim=int(opts.get("dim", 64)), seed=int(opts.get("seed", 0)))
    if hasattr(retriever, "encode_entities") and hasattr(retriever, "fingerprint"):
        return retriever  # already an entity encoder
    from ....retrieval import get_retriever

    spec = retriever if isinstance(retriever, str) else getattr(retriever, "name", type(retriever).__name__)
    obj = get_retriever(retriever)
    token_level = callable(getattr(obj, "token_model", None))  # a TokenEncoder (gapbench.retrieval)
    if pooling == "span" and not token_level:
        raise ConfigError(f"argus: {spec!r} gives no token embeddings, so span pooling is impossible; use "
                          "pooling=sentence.")
    if token_level and pooling in ("auto", "span"):
        return SpanEncoder(obj, spec=spec)
    if not embeds_texts(obj):
        raise ConfigError(f"argus: {spec!r} has no embed(texts) method giving one vector per text; the audit needs a "
                          "dense retriever such as dense or dense:model=NAME (or random for a chance control).")
    return SentenceEncoder(obj, spec=spec)


@dataclass(frozen=True)
class EncodedEntities:
    """Every entity of an audit's data embedded once by a retriever's encoder (what the audit and the sweep rank)."""

    retriever: str  # the spec as given, or the encoder's name
    encoder: dict  # name, pooling, fingerprint, dim, retriever_fingerprint
    qids: list[str]  # order of rows in ``embeddings``
    embeddings: np.ndarray
    index: dict[str, int]
    grounding: dict


def embed_entities(data: AuditData, retriever: Any, pooling: str = "auto") -> EncodedEntities:
    encoder = get_encoder(retriever, pooling)
    qids = list(data.entities)
    emb, grounding = encoder.encode_entities([data.entities[q] for q in qids])
    spec = retriever if isinstance(retriever, str) else getattr(encoder, "name", type(retriever).__name__)
    info = {"name": str(getattr(encoder, "name", spec)), "pooling": encoder.pooling,
            "fingerprint": encoder.fingerprint, "dim": int(emb.shape[1]),
            "retriever_fingerprint": _base_fingerprint(encoder)}
    return EncodedEntities(str(spec), info, qids, emb, {q: i for i, q in enumerate(qids)}, grounding)


def _base_fingerprint(encoder: Any) -> str:
    from ....retrieval import fingerprint_of

    inner = getattr(encoder, "dense", None) or getattr(encoder, "retriever", None)
    return fingerprint_of(inner) if inner is not None else encoder.fingerprint
