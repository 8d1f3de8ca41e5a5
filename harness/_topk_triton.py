"""Fused score-and-select for :func:`gapbench.topk.torch_topk`: float16 scores and their top-KC, in one Triton kernel.

``torch.topk`` over a float16 score matrix as wide as the corpus costs far more than the matrix product that fills it
(52k against 396k queries/s on an H200, 2M x 384 documents). The kernel below never writes that matrix: each program
scores one block of queries against one split of the documents, tile by tile, and keeps per query row the KC best
scores of its split and their document indices. A tile whose best score per row does not beat that row's current
KC-th best is dropped after one compare per score; only a tile with an entering score does insertion work. A second,
small step (``torch.topk`` over the splits' lists) gives each row's top-kc.

Triton is imported when a kernel is first needed, never at import time, and no version is required: a GPU torch
brings its own triton (3.0 and later), and only APIs present from 3.0 on are used. Tests run the kernel on the CPU
with Triton's interpreter: ``TRITON_INTERPRET=1`` in the environment before triton is imported (triton wraps its own
library functions, tl.max and the like, as it is imported).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
from typing import Any

BLOCK_QUERIES = 64  # query rows per program (tl.dot needs 16 or more in every dimension)
BLOCK_DOCS = 64  # documents per tile
BLOCK_DIM = 32  # vector components per tl.dot step
MAX_KC = 256  # the largest candidate list a program holds per row (registers); torch_topk uses torch.topk beyond it
MIN_CAPABILITY = (8, 0)  # selector="auto" takes the kernel from this CUDA compute capability on
PROGRAMS_PER_SM = 4  # document splits are chosen so that about this many programs run per multiprocessor

# triton.language, bound by _kernel() when a kernel is first made: the kernel body resolves ``tl`` from this module's
# globals when Triton compiles (or interprets) it, so the module itself imports without triton.
tl: Any = None


def _select_body(q_ptr, d_ptr, out_v_ptr, out_i_ptr, n_rows, n_docs, dim, docs_per_split, n_splits,
                 stride_q, stride_d,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, KC: tl.constexpr):
    """One program: query rows [pid_m*BM, +BM) against documents [pid_s*docs_per_split, +docs_per_split)."""
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows = pid_m * BM + tl.arange(0, BM)
    row_ok = rows < n_rows
    q_off = rows.to(tl.int64) * stride_q  # int64 offsets: 10M x 768 documents pass 2**31 elements
    start = pid_s * docs_per_split
    stop = tl.minimum(start + docs_per_split, n_docs)
    tile_cols = tl.arange(0, BN)
    slots = tl.arange(0, KC)
    comps = tl.arange(0, BK)
    best_v = tl.full((BM, KC), float("-inf"), tl.float32)
    best_i = tl.zeros((BM, KC), tl.int32)
    kth = tl.full((BM,), float("-inf"), tl.float32)  # each row's KC-th best so far: the bar a score must beat
    for t0 in range(start, stop, BN):
        cols = t0 + tile_cols
        col_ok = cols < stop
        # float16 inputs, float32 accumulation: closer to the exact scores than torch's float16 output, so the float16
        # error bound eps that torch_topk's line test uses holds here as well and is kept as it is.
        acc = tl.zeros((BM, BN), tl.float32)
        for k0 in range(0, dim, BK):
            ks = k0 + comps
            k_ok = ks < dim
            a = tl.load(q_ptr + q_off[:, None] + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(d_ptr + cols.to(tl.int64)[:, None] * stride_d + ks[None, :],
                        mask=col_ok[:, None] & k_ok[None, :], other=0.0)
            acc += tl.dot(a, tl.trans(b))
        acc = tl.where(row_ok[:, None] & col_ok[None, :], acc, float("-inf"))
        # The threshold test: one compare per score. Strictly greater: a score equal to the KC-th best changes no
        # value of the list, so ties at the boundary keep the values torch.topk would give (indices may differ).
        top = tl.max(acc, axis=1)
        more = tl.max((top > kth).to(tl.int32), axis=0)
        while more > 0:
            # Each entering row moves its tile's best score into the slot of its current worst, then drops it from
            # the tile; rows that enter nothing are left as they are. At most min(BN, KC) rounds per tile.
            col = tl.argmax(acc, axis=1)
            slot = tl.argmin(best_v, axis=1)
            enter = top > kth
            hit = (slots[None, :] == slot[:, None]) & enter[:, None]
            best_v = tl.where(hit, top[:, None], best_v)
            best_i = tl.where(hit, (t0 + col)[:, None], best_i)
            acc = tl.where((tile_cols[None, :] == col[:, None]) & enter[:, None], float("-inf"), acc)
            kth = tl.min(best_v, axis=1)
            top = tl.max(acc, axis=1)
            more = tl.max((top > kth).to(tl.int32), axis=0)
    out = rows.to(tl.int64)[:, None] * (n_splits * KC) + pid_s * KC + slots[None, :]
    tl.store(out_v_ptr + out, best_v, mask=row_ok[:, None])
    tl.store(out_i_ptr + out, best_i, mask=row_ok[:, None])


_KERNELS: dict[bool, Any] = {}


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _kernel() -> Any:
    """The jitted kernel; made once per mode, since triton.jit reads TRITON_INTERPRET when it wraps a function."""
    global tl
    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")
    mode = _interpreting()
    if mode not in _KERNELS:
        _KERNELS[mode] = triton.jit(_select_body)
    return _KERNELS[mode]


def unavailable(device: Any) -> str | None:
    """Why the kernel cannot run on the torch ``device`` here (a sentence), or None when it can.

    CUDA devices run it compiled; the CPU only under Triton's interpreter (``TRITON_INTERPRET=1``, used by the tests).
    """
    try:
        lang = importlib.import_module("triton.language")
    except ImportError:
        return ("the package 'triton' is not installed; torch's CUDA builds for Linux bring it, "
                "or install it alone: pip install triton")
    if device.type == "cuda":
        return None
    if device.type == "cpu" and _interpreting():
        # triton wraps its own library kernels (tl.max, tl.argmax, ...) for the interpreter only when the variable is
        # set as triton is imported
        if type(lang.max).__name__ != "InterpretedFunction":
            return ("TRITON_INTERPRET=1 was set after triton was imported, so its interpreter is not in use; "
                    "set it in the environment before the process starts")
        return None
    return (f"the documents are on the device {str(device)!r}; Triton kernels run on CUDA devices "
            "(DeviceDocs(..., device='cuda'))")


def chosen_by_default(device: Any) -> bool:
    """Whether ``selector="auto"`` takes the kernel on the CUDA ``device``: Ampere (compute capability 8.0) and later,
    the GPUs Triton supports; an older card keeps torch.topk unless the kernel is asked for by name."""
    import torch

    return tuple(torch.cuda.get_device_capability(device)) >= MIN_CAPABILITY


SELECTORS = ("auto", "torch", "triton")  # torch_topk's ``selector`` values


def use_kernel(selector: str, device: Any) -> bool:
    """Resolve :func:`~gapbench.topk.torch_topk`'s ``selector`` for ``device``: True for the fused kernel."""
    from .errors import ConfigError

    if selector not in SELECTORS:
        raise ConfigError(f"torch_topk: unknown selector {selector!r}; accepted: {', '.join(map(repr, SELECTORS))}")
    if selector == "torch" or (selector == "auto" and device.type != "cuda"):
        return False
    reason = unavailable(device)
    if selector == "auto":
        return reason is None and chosen_by_default(device)
    if reason is not None:
        raise ConfigError(f"torch_topk: selector='triton' cannot run here: {reason}. "
                          "selector='auto' uses Triton where it can run and torch.topk elsewhere.")
    return True


def fits(kc: int) -> bool:
    """Whether the kernel holds ``kc`` candidates per row (its registers bound the list)."""
    return candidate_width(kc) <= MAX_KC


def candidate_width(kc: int) -> int:
    """KC: the power of two >= kc (tl.arange's sizes are powers of two) that each program holds per row, 16 at least."""
    return max(16, 1 << max(0, kc - 1).bit_length())


def _splits(n_blocks: int, n_docs: int, device: Any, block_docs: int) -> int:
    if device.type == "cuda":
        import torch

        programs = PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        programs = 4  # the interpreter runs programs one after another: a few splits suffice to test their merge
    return max(1, min(math.ceil(n_docs / block_docs), math.ceil(programs / n_blocks)))


def split_lists(q16: Any, d16: Any, width: int, *, splits: int | None = None, block_queries: int = BLOCK_QUERIES,
                block_docs: int = BLOCK_DOCS, block_dim: int = BLOCK_DIM) -> tuple[Any, Any]:
    """The kernel's output: per query row and document split, the ``width`` best (float32 score, int32 index).

    [rows, splits * width] each, split after split, unordered within a split; a split with fewer documents than
    ``width`` pads its list with -inf. ``splits``: how many (default: enough programs to fill the device).
    """
    import torch

    rows, n = q16.shape[0], d16.shape[0]
    q16, d16 = q16.contiguous(), d16.contiguous()
    n_blocks = math.ceil(rows / block_queries)
    n_splits = splits or _splits(n_blocks, n, d16.device, block_docs)
    per_split = math.ceil(math.ceil(n / n_splits) / block_docs) * block_docs
    n_splits = math.ceil(n / per_split)
    vals = torch.empty((rows, n_splits * width), dtype=torch.float32, device=d16.device)
    idx = torch.empty((rows, n_splits * width), dtype=torch.int32, device=d16.device)
    kernel = _kernel()
    # triton launches on the current CUDA device: make it the documents' one (cuda:1 and so on)
    with torch.cuda.device(d16.device) if d16.device.type == "cuda" else contextlib.nullcontext():
        kernel[(n_blocks, n_splits)](q16, d16, vals, idx, rows, n, q16.shape[1], per_split, n_splits,
                                     q16.stride(0), d16.stride(0),
                                     BM=block_queries, BN=block_docs, BK=block_dim, KC=width)
    return vals, idx


def candidates(q16: Any, d16: Any, kc: int, **launch: Any) -> tuple[Any, Any]:
    """``torch.topk(q16 @ d16.T, kc, dim=1)`` without the score matrix: (float32 values, int64 indices), [rows, kc].

    The values are float32 accumulations of the float16 products, so they can differ from the float16 scores of
    ``q16 @ d16.T`` by that type's rounding; equal values may come in another order (and with other indices at the
    boundary) than torch.topk's. ``kc`` must lie in 1..len(d16) with a :func:`candidate_width` of at most MAX_KC.
    ``launch``: :func:`split_lists`' tile sizes and split count.
    """
    import torch

    width = candidate_width(kc)
    if not 1 <= kc <= d16.shape[0] or width > MAX_KC:
        raise ValueError(f"candidates: kc={kc} must lie in 1..{d16.shape[0]} (the documents) with a width <= {MAX_KC}")
    vals, idx = split_lists(q16, d16, width, **launch)
    # Every split's padding is -inf and the splits hold kc <= n real (finite) scores together: none is picked.
    top, pos = torch.topk(vals, kc, dim=1)
    return top, idx.gather(1, pos).to(torch.int64)
