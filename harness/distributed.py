"""Ray as the scale-out engine: corpus encoding over every GPU (or CPU) of a cluster, and search over sharded
embeddings.

``gapbench run ... --ray local|auto|ADDRESS`` (``gapbench.run(..., ray=...)``) runs inside :func:`connect`. While it is
active, a dense retriever's missing cache chunks are encoded on Ray actors (:func:`fill_cache`) and a document matrix
larger than the memory budget is searched by actors that each hold a shard of it (:func:`sharded_topk`).

The driver alone reads and writes the embedding cache: workers get texts and return vectors, so the cache needs no
shared storage, and each chunk is written atomically the moment it arrives, so a killed worker or driver loses only
the chunks in flight. Scheduling, actor restarts and task retries are Ray's own (``ActorPool``, ``max_restarts``,
``max_task_retries``). The vectors are those of a single-process run: each actor rebuilds the encoder from its class
and ``encoder_spec()`` and encodes the same chunks in the same batches.

>>> with connect("local"):  # doctest: +SKIP
...     gapbench.run("impliret/multispeaker/wknow", "dense")
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from .errors import ConfigError, GapbenchError, MissingDependencyError
from .progress import progress
from .topk import Allowed, DeviceDocs, blocked_topk, select_topk, torch_topk

# how often Ray restarts a dead actor and retries the chunk it held, before the run stops (finished chunks are kept)
RETRIES = 3
# Ray's object store for a local cluster: chunks in flight only, never the corpus
LOCAL_OBJECT_STORE = 512 * 1024**2
_GCS_ADDRESS = re.compile(r"[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}")
_session: dict | None = None
_shards: dict[str, list] = {}  # cache folder and block size -> its shard actors, for the session


def _ray():
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "ray=ADDRESS") from None
    return ray


def address_kind(address: str) -> str:
    """``local``, ``auto``, ``client`` (ray://host:port) or ``remote`` (host:port); a ConfigError for anything else."""
    if address in ("local", "auto"):
        return address
    if address.startswith("ray://") and _GCS_ADDRESS.fullmatch(address[len("ray://"):]):
        return "client"
    if _GCS_ADDRESS.fullmatch(address):
        return "remote"
    raise ConfigError(
        f"ray={address!r} is not a Ray address; give `local` (start a Ray cluster on this machine for the run), "
        "`auto` (the cluster `ray start` runs here), HOST:PORT (a cluster's head node) or ray://HOST:PORT (Ray Client)."
    )


def _init(ray, address: str, kind: str) -> None:
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    if kind == "local":
        ray.init(num_cpus=os.cpu_count() or 1, object_store_memory=LOCAL_OBJECT_STORE, **quiet)
        return
    if kind != "auto":
        _probe(address, address[len("ray://"):] if kind == "client" else address)
    # a remote node does not share this process's environment; offline model loading must reach it
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") if k in os.environ}
    try:
        ray.init(address=address, runtime_env={"env_vars": env} if env else None, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise GapbenchError(
            f"ray={address!r}: cannot connect to a Ray cluster ({str(exc).splitlines()[0]}). Start one with "
            "`ray start --head` (then ray=auto, or the address it prints), or use ray=local; a cluster with token "
            "authentication also wants RAY_AUTH_MODE=token and its token (`ray get-auth-token`) in this environment."
        ) from None


def _probe(address: str, host_port: str) -> None:
    """Fail at once when nothing listens at the address: Ray itself would retry its connection for minutes."""
    host, _, port = host_port.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        raise GapbenchError(
            f"ray={address!r}: nothing answers at {host}:{port} ({exc.strerror or exc}). Check the address that "
            "`ray start --head` printed on the head node (its GCS port, 6379 by default; 10001 for ray://), or use "
            "ray=local."
        ) from None


@contextmanager
def connect(address: str | None) -> Iterator[dict | None]:
    """Run a block on a Ray cluster; yields what :func:`manifest` will record (None when ``address`` is None).

    ``local`` starts a cluster of this machine's CPUs and GPUs and shuts it down on exit; any other address joins a
    running cluster and leaves it running, as does a Ray session the caller started before (``ray.init()``).
    """
    global _session
    if address is None:
        yield None
        return
    kind = address_kind(address.strip())
    ray = _ray()
    owned = not ray.is_initialized()
    if owned:
        _init(ray, address.strip(), kind)
    before = _session
    resources = ray.cluster_resources()
    _session = {"address": kind if owned else "existing", "nodes": sum(1 for n in ray.nodes() if n.get("Alive")),
                "cpus": int(resources.get("CPU", 0)), "gpus": int(resources.get("GPU", 0)),
                "encode_workers": 0, "search_shards": 0}
    try:
        yield _session
    finally:
        _session = before
        if before is None:  # the outermost block: the shards searched inside it are no longer needed
            for actor, _, _ in (a for shards in _shards.values() for a in shards):
                ray.kill(actor)
            _shards.clear()
        if owned:
            ray.shutdown()


def active() -> bool:
    """Whether the caller runs inside :func:`connect` (so encoding and large searches go to Ray)."""
    return _session is not None


def manifest() -> dict | None:
    """What the run manifest records about Ray: the address kind and the workers used (never the address itself)."""
    return dict(_session) if _session is not None else None


def _workers(limit: int) -> tuple[int, dict]:
    """How many actors to start (one per GPU, else one per CPU, at most ``limit``) and their resource options."""
    resources = _ray().cluster_resources()
    gpus = int(resources.get("GPU", 0))
    if gpus:
        return max(1, min(limit, gpus)), {"num_gpus": 1, "num_cpus": 1}
    return max(1, min(limit, int(resources.get("CPU", 1)))), {"num_cpus": 1}


class _EncoderActor:
    """Holds one encoder, rebuilt from its class and spec, for the life of the actor (the model loads once)."""

    def __init__(self, cls: type, spec: dict) -> None:
        import ray

        spec = dict(spec)
        if ray.get_gpu_ids() and "device" in spec:
            spec["device"] = "cuda"  # Ray shows each actor its own GPU as cuda:0
        self.encoder = cls(**spec)

    def encode(self, i: int, texts: list[str]) -> tuple[int, np.ndarray]:
        return i, np.ascontiguousarray(self.encoder.encode_texts(texts), dtype=np.float32)


def _raise_worker_error(ray, exc: Exception, written: int, missing: int) -> None:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, GapbenchError):
        raise cause from None  # the encoder's own message (bad model, device), as a local run would show it
    if isinstance(exc, ray.exceptions.RayActorError):
        what = f"a worker died and {RETRIES} restarts by Ray did not bring it through"
    else:
        what = f"a worker failed: {str(cause or exc).strip().splitlines()[0]}"
    raise GapbenchError(
        f"ray: encoding stopped, {what}; the {written} chunks written are kept in the cache, and running again "
        f"encodes only the {missing} still missing."
    ) from None


def fill_cache(encoder: Any, cache: Any, *, description: str = "encoding on Ray") -> list[int]:
    """Encode ``cache``'s missing chunks on Ray actors; returns the chunks written, in the order they arrived.

    Each actor gets two chunks at a time, so it never waits for the driver to read the next one; every returned
    chunk is written at once, so whatever stops the run later, the chunks written so far are never encoded again.
    """
    cache.prepare()
    missing = cache.missing_chunks()
    if not missing:
        return []
    ray = _ray()
    from ray.util import ActorPool

    n, resources = _workers(len(missing))
    Actor = ray.remote(_EncoderActor).options(max_restarts=RETRIES, max_task_retries=RETRIES, **resources)
    actors = [Actor.remote(type(encoder), encoder.encoder_spec()) for _ in range(n)]
    if _session is not None:
        _session["encode_workers"] = max(_session["encode_workers"], n)
    name = getattr(encoder, "name", type(encoder).__name__)
    try:
        with progress(sum(_rows(cache, i) for i in missing), f"{name}: {description} ({n} workers)") as advance:
            return _encode_on(ActorPool(actors + actors), ray, cache, missing, advance)
    finally:
        for a in actors:
            ray.kill(a)


def _encode_on(pool, ray, cache: Any, missing: list[int], advance: Callable[[int], None]) -> list[int]:
    """Feed chunks to the pool's free actors and write each result as it arrives. After a failure (a worker dead
    beyond Ray's restarts, an encoder error) no chunk is sent, but the chunks already in flight are still written."""
    todo, written, failure = iter(missing), [], None
    while True:
        while failure is None and pool.has_free():
            i = next(todo, None)
            if i is None:
                break
            pool.submit(lambda a, i: a.encode.remote(i, cache.chunk_texts(i)), i)
        if not pool.has_next():
            break
        try:
            i, arr = pool.get_next_unordered()
        except ray.exceptions.RayError as exc:
            failure = failure or exc
            continue
        cache.write_chunk(i, arr)
        written.append(i)
        advance(arr.shape[0])
    if failure is not None:
        _raise_worker_error(ray, failure, len(written), len(cache.missing_chunks()))
    return written


def _rows(cache: Any, i: int) -> int:
    lo, hi = cache.chunk_range(i)
    return hi - lo


class _ShardActor:
    """One contiguous range of the document matrix, held in this actor's memory (or GPU) for every query batch."""

    def __init__(self, rows: int, dim: int) -> None:
        self.emb = np.empty((rows, dim), dtype=np.float32)
        self.device_docs: DeviceDocs | None = None

    def put(self, offset: int, chunk: np.ndarray) -> None:
        self.emb[offset : offset + chunk.shape[0]] = chunk

    def topk(self, query_emb: np.ndarray, k: int, keys: np.ndarray, excluded: list | None, block_rows: int) -> list:
        import ray

        if not ray.get_gpu_ids():
            n = self.emb.shape[0]
            blocks = ((d0, self.emb[d0 : d0 + block_rows]) for d0 in range(0, n, block_rows))
            return blocked_topk(query_emb, blocks, n, k, keys, excluded)
        if self.device_docs is None:  # uploaded once: later query batches search the shard where it lies
            self.device_docs = DeviceDocs.load(self.emb, keys, "cuda")
        return torch_topk(query_emb, self.device_docs, k, excluded)


def _local_mask(mask: np.ndarray | Allowed | None, lo: int, hi: int) -> np.ndarray | Allowed | None:
    """A query's mask in a shard's own row numbers (rows ``lo``..``hi`` of the whole matrix)."""
    if mask is None:
        return None
    idx = mask.idx if isinstance(mask, Allowed) else mask
    local = idx[(idx >= lo) & (idx < hi)] - lo
    return Allowed(local) if isinstance(mask, Allowed) else local


def shard_ranges(n_chunks: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous chunk ranges ``[c0, c1)``, as even as whole chunks allow."""
    n_shards = max(1, min(n_shards, n_chunks))
    bounds = np.linspace(0, n_chunks, n_shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _read(cache: Any, i: int) -> np.ndarray:
    chunk = cache.read_chunk(i)
    if chunk is None:
        raise GapbenchError(f"embedding cache {cache.dir}: chunk {i} is missing or torn; run the encoding again.")
    return chunk


def _load_shards(ray, cache: Any, group: int) -> list:
    """One actor per range of chunks, each sent its chunks one at a time (the driver never holds a whole shard).

    Ranges start at multiples of ``group`` chunks (one search block). The shards stay up until :func:`connect` ends,
    so the next query batch over the same cache ships nothing.
    """
    key = f"{cache.dir}|{group}"
    if key in _shards:
        return _shards[key]
    n_blocks = -(-cache.n_chunks // group)
    n, resources = _workers(n_blocks)
    Shard = ray.remote(_ShardActor).options(**resources)
    shards, pending, dim = [], [], cache.dim()
    for b0, b1 in shard_ranges(n_blocks, n):
        c0, c1 = b0 * group, min(cache.n_chunks, b1 * group)
        lo, hi = cache.chunk_range(c0)[0], cache.chunk_range(c1 - 1)[1]
        actor = Shard.remote(hi - lo, dim)
        shards.append((actor, lo, hi))
        for i in range(c0, c1):
            pending.append(actor.put.remote(cache.chunk_range(i)[0] - lo, _read(cache, i)))
            if len(pending) > 2 * n:  # bounds the chunks waiting in the object store
                ray.get(pending.pop(0))
    ray.get(pending)
    _shards[key] = shards
    if _session is not None:
        _session["search_shards"] = max(_session["search_shards"], len(shards))
    return shards


def sharded_topk(
    query_emb: np.ndarray,
    cache: Any,
    k: int,
    keys: np.ndarray,
    excluded: Sequence[np.ndarray | Allowed | None] | None = None,
    *,
    block_rows: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact top-k over a cached document matrix spread over Ray actors: the (indices, scores) of ``blocked_topk``.

    Each actor ranks its shard (``blocked_topk``; ``torch_topk`` on its GPU), exclusions masked before its cut, and
    returns its candidates; the driver merges them by :func:`select_topk`, the same tie rule. Shards are cut and
    searched in the blocks a local search under the same memory budget reads (``block_rows``, whole chunks): a float32
    product's last bit depends on the shape it is computed in, so the same blocks give the very same scores.
    """
    ray = _ray()
    group = max(1, (block_rows or search_block_rows(cache.dim(), cache.chunk_size)) // cache.chunk_size)
    shards = _load_shards(ray, cache, group)
    q_ref = ray.put(np.ascontiguousarray(query_emb, dtype=np.float32))
    futures = [actor.topk.remote(q_ref, k, keys[lo:hi],
                                 [_local_mask(m, lo, hi) for m in excluded] if excluded else None,
                                 group * cache.chunk_size)
               for actor, lo, hi in shards]
    parts = [[(idx + lo, sc) for idx, sc in hits] for (_, lo, _), hits in zip(shards, ray.get(futures))]
    out = [_merge([p[q] for p in parts], k, keys) for q in range(query_emb.shape[0])]
    if progress:
        progress(len(out))
    return out


def _merge(hits: list[tuple[np.ndarray, np.ndarray]], k: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.concatenate([h[0] for h in hits])
    sc = np.concatenate([h[1] for h in hits])
    pick = select_topk(sc, k, keys[idx])
    return idx[pick], sc[pick]


def search_block_rows(dim: int, chunk_size: int, query_rows: int = 256) -> int:
    """Rows of the document blocks that the local blocked search reads under the memory budget (Dense's rule)."""
    from .budget import rows_within

    return rows_within(4 * (dim + query_rows), share=0.25, at_least=chunk_size)


def shard_search(n_docs: int, dim: int) -> bool:
    """Whether a search over ``n_docs`` vectors of ``dim`` floats goes to Ray shards: Ray is active and the matrix is
    larger than the memory budget (else the local blocked search is as exact and has nothing to ship)."""
    from .budget import memory_budget

    return active() and n_docs * dim * 4 > memory_budget()
