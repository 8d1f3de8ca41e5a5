"""Dense retrieval through any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, llama.cpp, Ollama, TEI).

``openai-embed:model=text-embedding-3-small,base_url=http://host/v1,dimensions=256``. The key is read from the
environment variable named by ``api_key_env`` (``OPENAI_API_KEY`` by default) when the first call is made; it never
enters the config, the fingerprint, logs, manifests or reports. Batching, retries and counters come from the LLM layer;
embeddings are cached in resumable chunks exactly like local dense embeddings, so a re-run makes no calls. Vectors are
L2-normalised (cosine similarity); an empty text gets a zero vector without a call (the API rejects empty input).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import Field

from gapbench.cache import EmbeddingCache
from gapbench.contract import BatchSize, ModelName, NonNegativeInt, Positive, Seconds, Text
from gapbench.errors import GapbenchError
from gapbench.progress import progress
from gapbench.retrieval import doc_positions, payload_fingerprint
from gapbench.settings import Settings
from gapbench.topk import dense_topk, exclusion_indices
from gapbench.types import Corpus, Queries, Run


class OpenAIEmbedSettings(Settings):
    """The settings of ``openai-embed`` (``openai-embed:model=NAME,base_url=URL``)."""

    model: ModelName = Field("text-embedding-3-small", description="The embedding model at the endpoint.")
    base_url: Text | None = Field(None, description="The OpenAI-compatible endpoint; none: $OPENAI_BASE_URL, else "
                                                       "OpenAI's.")
    dimensions: Positive | None = Field(None, description="Vector size asked of models that can shorten theirs; "
                                                             "none: the model's own.")
    api_key_env: Text = Field("OPENAI_API_KEY", description="The environment variable holding the API key.")
    batch_size: BatchSize = Field(128, description="Texts per request.")
    concurrency: Positive = Field(4, description="Requests in flight at once.")
    query_prompt: str = Field("", description="Text put before each query.")
    doc_prompt: str = Field("", description="Text put before each document.")
    use_title: bool = Field(True, description="Embed the title before the text.")
    chunk_size: BatchSize = Field(2048, description="Documents per cached chunk of vectors.")
    max_retries: NonNegativeInt = Field(6, description="Retries of a failed request after the first attempt.")
    timeout: Seconds | None = Field(None, description="Seconds per attempt; none: $GAPBENCH_LLM_TIMEOUT, else the "
                                                       "LLM client's default.")


class OpenAIEmbed:
    name = "openai-embed"
    settings = OpenAIEmbedSettings

    def __init__(self, **options: Any) -> None:
        """``OpenAIEmbed(model="NAME", base_url="http://host/v1")``: any of :class:`OpenAIEmbedSettings`, checked (an
        ``OptionsError`` names a bad one); the endpoint and time limits are checked by the LLM client's config."""
        o = self.settings.check(f"retriever {self.name}", options)
        model, base_url, dimensions, api_key_env, batch_size = o.model, o.base_url, o.dimensions, o.api_key_env, \
            o.batch_size
        concurrency, query_prompt, doc_prompt, use_title, chunk_size = o.concurrency, o.query_prompt, o.doc_prompt, \
            o.use_title, o.chunk_size
        max_retries, timeout = o.max_retries, o.timeout
        self.model, self.base_url, self.dimensions = model, base_url, dimensions
        self.api_key_env = api_key_env
        self.batch_size, self.concurrency, self.chunk_size = batch_size, concurrency, chunk_size
        self.query_prompt, self.doc_prompt, self.use_title = query_prompt, doc_prompt, use_title
        self.max_retries, self.timeout = max_retries, timeout
        self._client = None
        self._client_lock = threading.Lock()
        self._doc_emb: np.ndarray | None = None
        from gapbench.llm.client import LLMConfig

        # checked now (URL, time limits from $GAPBENCH_LLM_*), so a wrong endpoint is reported before any work
        self._llm_config = LLMConfig(base_url=base_url, model=model, api_key_env=api_key_env, concurrency=concurrency,
                                     max_retries=max_retries, timeout=timeout).resolved()

    def config(self) -> dict:
        from gapbench.llm.client import redact_url

        return {"model": self.model, "base_url": redact_url(self.base_url) if self.base_url else None,
                "dimensions": self.dimensions, "query_prompt": self.query_prompt, "doc_prompt": self.doc_prompt,
                "use_title": self.use_title}

    @property
    def fingerprint(self) -> str:
        # the endpoint is part of the identity (two servers may serve different weights under one model name)
        return payload_fingerprint({"adapter": "openai-embed", **self.config()})

    @property
    def client(self):
        with self._client_lock:
            if self._client is None:
                from gapbench.llm.client import LLMClient

                # embeddings are cached by EmbeddingCache, keyed by texts
                self._client = LLMClient(self._llm_config, cache=False)
            return self._client

    def _encode(self, texts: list[str]) -> np.ndarray:
        nonempty = [i for i, t in enumerate(texts) if t.strip()]
        vecs = self.client.embed_many([texts[i] for i in nonempty], dimensions=self.dimensions,
                                      batch_size=self.batch_size) if nonempty else np.zeros((0, 0), np.float32)
        dim = vecs.shape[1] if vecs.size else (self.dimensions or 1)
        out = np.zeros((len(texts), dim), dtype=np.float32)
        if nonempty:
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            out[nonempty] = vecs / np.where(norms > 0, norms, 1.0)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        cache = EmbeddingCache(self.fingerprint, texts, chunk_size=self.chunk_size, kind="embeddings")
        with progress(len(texts), f"{self.name}: embedding") as advance:
            emb = cache.get(self._encode, progress=advance)
        if not np.isfinite(emb).all():
            raise GapbenchError(f"openai-embed: the endpoint returned NaN or infinite values for model {self.model!r}.")
        return emb

    def index(self, corpus: Corpus) -> None:
        docs = list(corpus.values())
        self._doc_ids = [d.doc_id for d in docs]
        self._keys, self._doc_index = doc_positions(self._doc_ids)
        self._doc_emb = self.embed([self.doc_prompt + (d.full_text if self.use_title else d.text) for d in docs])

    def query_texts(self, queries: Queries) -> list[str]:
        return [self.query_prompt + (f"{q.instruction} {q.text}" if q.instruction else q.text)
                for q in queries.values()]

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if self._doc_emb is None:
            raise GapbenchError("openai-embed: search() was called before index(corpus).")
        qids = list(queries)
        q_emb = self.embed(self.query_texts(queries))
        if q_emb.shape[1] != self._doc_emb.shape[1]:
            raise GapbenchError(
                f"openai-embed: query vectors have {q_emb.shape[1]} dimensions and document vectors "
                f"{self._doc_emb.shape[1]}; the endpoint changed models between calls."
            )
        hits = dense_topk(q_emb, self._doc_emb, k, self._keys, exclusion_indices(qids, exclude, self._doc_index))
        ids = self._doc_ids
        return Run({q: [(ids[i], float(s)) for i, s in zip(idx, sc)] for q, (idx, sc) in zip(qids, hits)}, self.name,
                   _sorted=True)
