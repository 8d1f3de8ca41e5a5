"""gapbench's own encoding loop for plain Transformer + Pooling [+ Normalize] sentence-transformers models (the
``dense:encoder=fast`` path, and the batching that ``dense:backend=onnx`` shares): texts tokenised in worker threads
a super-chunk ahead of the device, length-sorted, cut into batches by padded tokens (see
:mod:`gapbench.adapters.dense`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from gapbench.errors import GapbenchError
from gapbench.progress import say

# Texts per super-chunk: each is tokenised by the worker threads while the device encodes the one before it. 32,768
# passages of ~200 tokens are ~6.5M tokens, about a second of MiniLM on a large GPU: long enough that the device never
# waits for the next super-chunk's tokens (8 threads tokenise it in less), short enough that two super-chunks of token
# ids (the one encoding, the one ahead) stay a few hundred MB at most.
SUPER_CHUNK = 32_768
# The first super-chunk is smaller: nothing overlaps its tokenisation, so it is all waiting before the first batch.
FIRST_CHUNK = 4_096
# Pinned host buffers in the ring that batches are padded into (a slot is written again only after its copy to the
# device has completed): three let the host fill one while two copies are in flight.
PINNED_SLOTS = 3
# With dense:compile=true, batch widths are rounded up to a multiple of this: tensor-core friendly shapes, and no width
# of 1 for the compiler to specialise on.
COMPILED_WIDTH_MULTIPLE = 8


def cores() -> int:
    """The cores this process may run on (its CPU affinity): the tokenising threads, and ONNX Runtime's intra-op
    threads."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


def describe_modules(model: Any) -> str:
    return " + ".join(type(m).__name__ for m in model) or "empty"


@dataclass(frozen=True)
class Tokens:
    """The token ids of many texts, concatenated: text ``i`` is ``flat[offsets[i]:offsets[i + 1]]``.

    ``Tokens.from_lists([[101, 7, 102], [101, 102]])``."""

    flat: np.ndarray  # int64
    offsets: np.ndarray  # int64, len(texts) + 1, starting at 0

    @classmethod
    def from_lists(cls, ids: Sequence[Sequence[int]]) -> Tokens:
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(offsets[-1]))
        return cls(flat, offsets)

    @classmethod
    def concat(cls, parts: Sequence[Tokens]) -> Tokens:
        if not parts:
            return cls(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64))
        shifts = np.cumsum([0] + [int(p.offsets[-1]) for p in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, shifts)])
        return cls(np.concatenate([p.flat for p in parts]), offsets)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lists(self) -> list[list[int]]:
        return [self.flat[a:b].tolist() for a, b in zip(self.offsets[:-1], self.offsets[1:])]


def padded(tokens: Tokens, rows: np.ndarray, pad_id: int, pad_left: bool, width: int | None = None,
           out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of ``rows`` as one padded batch and its attention mask (int64), padded on the side the tokenizer
    pads; as wide as its longest text, or ``width`` when given (at least that). With ``out`` (two flat int64 arrays of
    at least ``len(rows) * width`` elements, e.g. pinned host memory) the batch is written into their first elements
    and views of them are returned."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = tokens.offsets[rows]
    lengths = tokens.offsets[rows + 1] - starts
    longest = int(lengths.max())
    width = longest if width is None else width
    if width < longest:
        raise ValueError(f"padded: width {width} is narrower than the longest row ({longest} tokens)")
    shape = (len(rows), width)
    input_ids: np.ndarray
    mask: np.ndarray
    if out is None:
        input_ids, mask = np.empty(shape, dtype=np.int64), np.empty(shape, dtype=np.int64)
    else:
        size = shape[0] * shape[1]
        input_ids, mask = out[0][:size].reshape(shape), out[1][:size].reshape(shape)
    cols = np.arange(width, dtype=np.int64)
    if pad_left:
        lead = width - lengths  # pad tokens before each row's first token
        take = cols >= lead[:, None]
        src = (starts - lead)[:, None] + cols
    else:
        take = cols < lengths[:, None]
        src = starts[:, None] + cols
    np.copyto(mask, take)
    if tokens.flat.size:
        # every cell gathered at once (a padded cell's index is clipped to a valid one, then overwritten): about 5x
        # faster than the same with a boolean gather, 10x faster than a loop over rows (256 x 256 tokens, 2 cores)
        np.take(tokens.flat, src, out=input_ids, mode="clip")
        np.copyto(input_ids, pad_id, where=~take)
    else:
        input_ids.fill(pad_id)
    return input_ids, mask


def super_chunks(n: int, size: int = SUPER_CHUNK, first: int = FIRST_CHUNK) -> list[tuple[int, int]]:
    """``(start, stop)`` of each super-chunk of ``n`` texts: the first of ``min(first, size)`` texts, then ``size``."""
    bounds, start, step = [], 0, max(1, min(first, size))
    while start < n:
        bounds.append((start, min(n, start + step)))
        start, step = start + step, max(1, size)
    return bounds


class _PinnedRing:
    """A few pinned host buffers that batches are padded into, reused in turn: a slot is written again only after the
    event recorded behind its last copy to the device has completed (``pin_memory()`` per batch costs more than the
    copy)."""

    def __init__(self, capacity: int, slots: int = PINNED_SLOTS) -> None:
        self.capacity = capacity
        self.buffers: list[Any] = [None] * slots
        self.events: list[Any] = [None] * slots
        self.next = 0

    def take(self, elements: int) -> tuple[int, Any]:
        """A free slot and its two flat pinned int64 tensors (ids, mask) of at least ``elements`` elements."""
        slot = self.next
        self.next = (slot + 1) % len(self.buffers)
        if self.events[slot] is not None:
            self.events[slot].synchronize()  # its previous batch's copy has read it
            self.events[slot] = None
        buffers = self.buffers[slot]
        if buffers is None or len(buffers[0]) < elements:
            size = max(elements, self.capacity)
            buffers = (self._alloc(size), self._alloc(size))
            self.buffers[slot] = buffers
        return slot, buffers

    @staticmethod
    def _alloc(size: int) -> Any:
        import torch

        return torch.empty(size, dtype=torch.int64, pin_memory=True)

    def copied(self, slot: int, stream: Any) -> None:
        """Mark ``slot`` busy until the copies queued on ``stream`` so far have run."""
        import torch

        event = torch.cuda.Event()
        event.record(stream)
        self.events[slot] = event


class FastEncoder:
    """Encoding of a Transformer + Pooling [+ Normalize] sentence-transformers model without ``encode``'s overheads.

    Texts are cut into super-chunks (:data:`SUPER_CHUNK`); worker threads tokenise the next super-chunk (without
    padding) while the device encodes the current one. Within a super-chunk texts are sorted by token count and cut
    into batches of at most ``batch_tokens`` padded tokens; each batch is padded (vectorised) into a ring of pinned
    host buffers and copied on a side stream while the previous batch computes; the model's own modules (pooling as
    configured) run under ``torch.inference_mode()`` in the model's dtype, through ``torch.compile`` with
    ``compile=True``, and vectors are normalised on the device. Tokenisation follows the model's Transformer module
    (stripped, lower-cased when it says so, truncated at ``max_seq_length``).
    """

    chunk_texts = SUPER_CHUNK
    first_chunk = FIRST_CHUNK

    def __init__(self, model: Any, batch_tokens: int, compile: bool = False) -> None:
        self.model = model
        self.module = model[0]
        self.tokenizer = model[0].tokenizer
        self.batch_tokens = batch_tokens
        self.compile = compile
        self.width_multiple = COMPILED_WIDTH_MULTIPLE if compile else 1
        self._compiled: Any = None
        self._backend: Any = None  # None: not checked yet; False: the tokenizer's own call
        self.pad_id = self.tokenizer.pad_token_id or 0
        self.pad_left = getattr(self.tokenizer, "padding_side", "right") == "left"
        self.with_types = "token_type_ids" in (getattr(self.module, "model_forward_params", None) or ()) and \
            "token_type_ids" in (getattr(self.tokenizer, "model_input_names", None) or ())

    @staticmethod
    def unsupported(model: Any) -> str | None:
        """Why the fast path cannot encode ``model`` exactly as ``encode`` does, or None when it can."""
        try:
            from sentence_transformers.models import Normalize, Pooling, Transformer
        except ImportError:  # pragma: no cover - a sentence-transformers without these modules
            return "this sentence-transformers has no models.Transformer/Pooling/Normalize"
        mods = list(model)
        kinds = [Transformer, Pooling, Normalize][: len(mods)]
        if len(mods) not in (2, 3) or not all(isinstance(m, t) for m, t in zip(mods, kinds)):
            return f"its modules are {describe_modules(model)}"
        cfg = mods[1].get_config_dict()
        mode = cfg.get("pooling_mode")  # sentence-transformers 6 names the mode; 5 sets one flag per mode
        modes = ({mode} if isinstance(mode, str) else set(mode)) if mode is not None else \
            {key[len("pooling_mode_"):] for key, on in cfg.items() if key.startswith("pooling_mode_") and on is True}
        if modes not in ({"mean"}, {"mean_tokens"}, {"cls"}, {"cls_token"}):
            return f"its pooling is {sorted(modes) or cfg}"
        if getattr(model, "default_prompt_name", None) or getattr(model, "truncate_dim", None):
            return "it has a default prompt or a truncated dimension"
        if not getattr(getattr(mods[0], "tokenizer", None), "is_fast", False):
            return f"its tokenizer ({type(getattr(mods[0], 'tokenizer', None)).__name__}) is not a fast tokenizer"
        return None

    @classmethod
    def for_model(cls, model: Any, batch_tokens: int | None = None, compile: bool = False) -> FastEncoder | None:
        """The fast encoder for ``model``, or None when it is not a plain Transformer + Pooling [+ Normalize] model."""
        if cls.unsupported(model):
            return None
        if batch_tokens is None:
            batch_tokens = 65_536 if model.device.type == "cuda" else 16_384
        return cls(model, batch_tokens, compile=compile)

    def tokenize(self, texts: list[str], workers: int | None = None) -> Tokens:
        """Token ids per text (no padding), tokenised in worker threads (the fast tokenizer releases the GIL)."""
        lower = getattr(self.module, "do_lower_case", False)
        texts = [t.strip().lower() if lower else t.strip() for t in texts]
        step = max(256, -(-len(texts) // 64))
        pieces = [texts[i : i + step] for i in range(0, len(texts), step)]
        if pieces and self._backend is None:
            self._backend = self._checked_backend(pieces[0][:64])
        backend = self._backend

        def run(piece: list[str]) -> Tokens:
            if backend:
                return Tokens.from_lists([e.ids for e in backend.encode_batch_fast(piece, add_special_tokens=True)])
            return Tokens.from_lists(self._reference_ids(piece))

        workers = workers or min(16, cores())
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return Tokens.concat(list(pool.map(run, pieces)))

    def _reference_ids(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's own call, as sentence-transformers' Transformer makes it (less its padding)."""
        enc = self.tokenizer(texts, padding=False, truncation="longest_first", max_length=self.module.max_seq_length,
                             return_attention_mask=False, return_token_type_ids=False)
        return list(enc["input_ids"])

    def _checked_backend(self, sample: list[str]) -> Any:
        """A private copy of the fast tokenizer's Rust backend, set to truncate as the tokenizer's call does and never
        to pad, when it gives that call's ids on ``sample``; else False (the call is used). The backend's
        ``encode_batch_fast`` skips transformers' per-text conversion (1.5x faster on 8,000 ImpliRet passages),
        which also holds the GIL that the device loop needs."""
        source = getattr(self.tokenizer, "backend_tokenizer", None)
        limit = self.module.max_seq_length
        if source is None or not limit or not hasattr(source, "encode_batch_fast"):
            return False
        try:
            backend = type(source).from_str(source.to_str())  # a copy: the tokenizer's own settings stay its own
            backend.no_padding()
            backend.enable_truncation(int(limit), strategy="longest_first",
                                      direction=getattr(self.tokenizer, "truncation_side", "right"))
            probe = sample + ["", "word " * (2 * int(limit))]
            same = [e.ids for e in backend.encode_batch_fast(probe, add_special_tokens=True)] == \
                self._reference_ids(probe)
        except Exception:  # a backend this code does not know how to set up: the tokenizer's own call is exact
            return False
        return backend if same else False

    def _width(self, longest: int) -> int:
        m = self.width_multiple
        return -(-longest // m) * m

    def batches(self, tokens: Tokens) -> list[np.ndarray]:
        """Positions of the texts per batch: longest first, each batch within ``batch_tokens`` padded tokens."""
        lengths = tokens.lengths
        order = np.argsort(-lengths, kind="stable")
        out, start = [], 0
        while start < len(order):
            rows = max(1, self.batch_tokens // max(1, self._width(int(lengths[order[start]]))))
            out.append(order[start : start + rows])
            start += rows
        return out

    def _forward(self, features: dict[str, Any]) -> Any:
        """The model's sentence embeddings of one batch (through ``torch.compile`` with ``compile=True``)."""
        if not self.compile:
            return self.model(features)["sentence_embedding"]
        if self._compiled is not None:
            return self._compiled(features)["sentence_embedding"]
        import warnings

        import torch

        say("dense: compiling the model with torch.compile (dense:compile=true); the first batches wait for it")
        compiled = torch.compile(self.model, dynamic=True)
        try:
            with warnings.catch_warnings():  # dynamo's notes on sentence-transformers' code (an lru_cache it traces)
                warnings.simplefilter("ignore", UserWarning)
                emb = compiled(features)["sentence_embedding"]
        except Exception as exc:  # inductor's failures are many kinds (no compiler, no triton, an unsupported op)
            first = (str(exc) or "-").strip().splitlines()[0][:300]
            raise GapbenchError(
                f"dense: compile=true, but torch.compile could not compile the model on this machine "
                f"({type(exc).__name__}: {first}). Use dense:compile=false.") from exc
        self._compiled = compiled
        return emb

    def _host_batch(self, tokens: Tokens, rows: np.ndarray, ring: _PinnedRing | None) -> tuple[dict[str, Any], int]:
        """The batch's tensors on the host (in a pinned ring slot on CUDA) and the slot (-1 without a ring)."""
        import torch

        lengths = tokens.offsets[rows + 1] - tokens.offsets[rows]
        width = self._width(int(lengths.max()))
        if ring is None:
            input_ids, mask = padded(tokens, rows, self.pad_id, self.pad_left, width)
            return {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}, -1
        slot, (ids_buf, mask_buf) = ring.take(len(rows) * width)
        size, shape = len(rows) * width, (len(rows), width)
        padded(tokens, rows, self.pad_id, self.pad_left, width, out=(ids_buf.numpy(), mask_buf.numpy()))
        return {"input_ids": ids_buf[:size].view(shape), "attention_mask": mask_buf[:size].view(shape)}, slot

    def _upload(self, host: dict[str, Any], stream: Any) -> dict[str, Any]:
        import torch

        device = self.model.device
        if stream is None:
            return {key: v.to(device) for key, v in host.items()}
        with torch.cuda.stream(stream):
            return {key: v.to(device, non_blocking=True) for key, v in host.items()}

    def _encode_chunk(self, tokens: Tokens, normalize: bool, progress: Callable[[int], None] | None,
                      state: dict[str, Any]) -> tuple[list[Any], np.ndarray]:
        """The device vectors of one super-chunk, batch by batch (queued, not waited for), and the chunk positions
        of their rows."""
        import torch

        stream, ring = state.get("stream"), state.get("ring")
        batches = self.batches(tokens)
        outs = []
        for rows in batches:
            host, slot = self._host_batch(tokens, rows, ring)
            features = self._upload(host, stream)
            if stream is not None and ring is not None:
                ring.copied(slot, stream)
                torch.cuda.current_stream().wait_stream(stream)
                for v in features.values():
                    v.record_stream(torch.cuda.current_stream())
            if self.with_types:
                features["token_type_ids"] = torch.zeros_like(features["input_ids"])
            emb = self._forward(features)  # queued: the host pads the next batch meanwhile
            if normalize:
                emb = torch.nn.functional.normalize(emb, p=2, dim=1)
            outs.append(emb)
            if progress:
                progress(len(rows))
        return outs, np.concatenate(batches)

    def encode(self, texts: list[str], *, normalize: bool = True,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """float32 vectors of ``texts`` in the given order; ``progress(n)`` after each batch is queued.

        The texts go in super-chunks (``chunk_texts``; ``first_chunk`` for the first): one thread tokenises the
        next super-chunk while this one's batches run, so at most two super-chunks of token ids exist at once."""
        import torch

        if not texts:
            dim = self.model.get_sentence_embedding_dimension() or 0
            return np.zeros((0, dim), dtype=np.float32)
        bounds = super_chunks(len(texts), self.chunk_texts, self.first_chunk)
        cuda = self.model.device.type == "cuda"
        state: dict[str, Any] = {}
        if cuda:
            longest = max(self.batch_tokens, self._width(self.module.max_seq_length or 1))
            state = {"stream": torch.cuda.Stream(device=self.model.device), "ring": _PinnedRing(longest)}
        outs: list[Any] = []
        places: list[np.ndarray] = []
        ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gapbench-tokenize")
        try:
            pending: Future[Tokens] = ahead.submit(self.tokenize, texts[bounds[0][0] : bounds[0][1]])
            with torch.inference_mode():
                for c, (lo, hi) in enumerate(bounds):
                    tokens = pending.result()
                    if c + 1 < len(bounds):
                        nlo, nhi = bounds[c + 1]
                        pending = ahead.submit(self.tokenize, texts[nlo:nhi])
                    chunk, where = self._encode_chunk(tokens, normalize, progress, state)
                    outs.extend(chunk)
                    places.append(where + lo)
                flat = torch.cat(outs).float().cpu().numpy()
        finally:
            ahead.shutdown(wait=False, cancel_futures=True)
        out = np.empty_like(flat)
        out[np.concatenate(places)] = flat
        return out
