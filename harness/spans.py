"""Span pooling, once for every ARGUS step: a character span's vector is the mean of the token vectors that overlap it
(the paper's ``g(H, s)``), L2-normalised.

The audit pools entity labels in their paragraphs, the augmentation pools NER mentions in documents, and the probe
trained on the first reads the second: both go through :func:`span_vectors`, so the probe always sees embeddings made
the same way. The model is a :class:`gapbench.retrieval.TokenEncoder`'s ``token_model()`` (sentence-transformers).

    model = token_model(dense)
    text, _ = model_text(model, "  Levington Lagoon is a nature reserve.")
    vectors, n_missed = span_vectors(model, [text], [[(22, 36)]])   # one row: "nature reserve"
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import GapbenchError

Span = tuple[int, int]


def span_fingerprint(base: str) -> str:
    """The fingerprint of span-pooled vectors of the encoder whose own fingerprint is ``base``: what a probe trained
    on the audit's embeddings carries, and what the augmentation checks before it reads mentions with that probe."""
    return hashlib.sha256(f"argus-span-mean:v1:{base}".encode()).hexdigest()


def token_model(encoder: Any) -> Any:
    """The sentence-transformers model behind a token encoder (``encoder.token_model()``), or None without one."""
    if not callable(getattr(encoder, "token_model", None)):
        return None
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    model = encoder.token_model()
    return model if isinstance(model, SentenceTransformer) else None


def embeds_texts(encoder: Any) -> bool:
    """Whether ``encoder.embed(texts)`` gives one vector per text (Dense, openai-embed); ColBERT's ``embed`` needs
    ``is_query`` and gives token matrices, which neither span nor sentence pooling reads."""
    embed = getattr(encoder, "embed", None)
    if not callable(embed):
        return False
    try:
        inspect.signature(embed).bind(["text"])
    except (TypeError, ValueError):
        return False
    return True


def model_text(model: Any, text: str) -> tuple[str, int]:
    """``text`` exactly as sentence-transformers hands it to the tokenizer (stripped; lower-cased for a
    ``do_lower_case`` model), so character offsets line up, and the number of leading characters stripped."""
    first = model[0] if hasattr(model, "__getitem__") else None
    out = text.strip()
    if getattr(first, "do_lower_case", False):
        out = out.lower()
    return out, len(text) - len(text.lstrip())


def normalise(emb: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows kept); NaN or infinite vectors are an error, not a silent zero."""
    if emb.size and not np.isfinite(emb).all():
        raise GapbenchError("argus: the encoder produced NaN or infinite embeddings.")
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    return (emb / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _pooled(emb: np.ndarray, offs: Sequence[Sequence[int]], spans: Sequence[Span | None]) -> tuple[list, int]:
    """One mean per span over the overlapping tokens; a span that overlaps none (cut off by the model's length limit)
    takes the mean over every real token and is counted."""
    real = [i for i, (a, b) in enumerate(offs) if b > a]  # special tokens have empty offsets
    rows, missed = [], 0
    for span in spans:
        sel = real if span is None else [i for i in real if offs[i][0] < span[1] and offs[i][1] > span[0]]
        if not sel:
            missed += 1
            sel = real or list(range(emb.shape[0]))
        rows.append(emb[sel].mean(axis=0))
    return rows, missed


def span_vectors(model: Any, texts: Sequence[str], spans: Sequence[Sequence[Span | None]], *, batch_size: int = 32,
                 block: int = 256) -> tuple[np.ndarray, int]:
    """Span-pooled, L2-normalised vectors: ``spans[i]`` holds the character spans of ``texts[i]`` (``None`` pools every
    real token). Texts must already be :func:`model_text`'s output.

    Returns an array (total spans, dim), rows text by text in span order, and how many spans overlapped no token.
    """
    from .progress import progress

    tok = model.tokenizer
    rows, missed = [], 0
    # one encode call per block: sentence-transformers sorts a call's texts by length, which keeps padding small
    with progress(len(texts), "span vectors: encoding", unit="texts") as advance:
        for lo in range(0, len(texts), block):
            batch = list(texts[lo:lo + block])
            token_embs = model.encode(batch, output_value="token_embeddings", batch_size=batch_size,
                                      show_progress_bar=False, convert_to_numpy=False)
            enc = tok(batch, return_offsets_mapping=True, truncation=True, max_length=model.max_seq_length)
            for j, (emb, offs) in enumerate(zip(token_embs, enc["offset_mapping"])):
                emb = (emb.detach().float().cpu().numpy() if hasattr(emb, "detach")
                       else np.asarray(emb, dtype=np.float32))
                if emb.shape[0] != len(offs):
                    raise GapbenchError(
                        f"argus: token embeddings ({emb.shape[0]}) and tokenizer offsets ({len(offs)}) disagree for "
                        f"text {lo + j}; span pooling needs a fast tokenizer that matches the model. "
                        "Use pooling=sentence."
                    )
                got, n = _pooled(emb, offs, spans[lo + j])
                rows += got
                missed += n
            advance(len(batch))
    dim = model.get_sentence_embedding_dimension() or 0
    out = np.stack(rows).astype(np.float32) if rows else np.zeros((0, dim), dtype=np.float32)
    return normalise(out), missed
