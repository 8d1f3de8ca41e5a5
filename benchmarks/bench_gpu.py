"""GPU fast path: dense encoding and exact search, gapbench beside the raw libraries and the hardware's ceiling.

Default run (issue 30 part 6; under 5 minutes of an H200's time, each part's time printed):
(a) encoding: seeded synthetic passages (20-120 words), encoded by raw ``SentenceTransformer.encode`` (model.half()
    on CUDA; best of batch sizes 128 and 256) and by gapbench's fast encoder (``Dense(encoder="fast")``); then the
    forward-only ceiling: the same texts tokenised beforehand (not timed), length-sorted, cut into 131,072-token
    batches already on the device, and only the sentence-transformers forward timed (float16, inference_mode).
(b) search: 10,000 random unit queries over 2,000,000 random unit 384-d documents, top-10: the matrix products alone
    (no selection: the arithmetic's ceiling), raw ``(q @ D.T).topk`` at several batch sizes (its best counts), and
    gapbench's ``torch_topk`` (exact, gapbench's tie rule; each ``selector`` it offers), checked against the CPU's
    ``dense_topk``.
(c) memory: ``DeviceDocs`` + ``torch_topk`` over 10,000,000 random unit 768-d vectors made on the device block by
    block, a few hundred queries: peak device memory against the card's.
(d) the encoding ceiling with ``torch.compile`` (compile time apart from the rate; last, so a slow compile costs no
    other figure), then the verdicts: PASS/MISS against issue 30's targets.

    python benchmarks/bench_gpu.py [--model PATH] [--n 30000] [--docs 2000000] [--queries 10000] [--out FILE]
    python benchmarks/bench_gpu.py --small          # toy sizes on the CPU (what the test runs)

Part 3, the MS MARCO-sized run, is a command of its own (within 10 minutes on an H200 at the target rates):

    python benchmarks/bench_gpu.py --msmarco [N] [--ray] [--budget-s 540]   # N: 8,800,000 when not given

Imports numpy, torch, sentence-transformers (and transformers) besides gapbench, which is loaded from this checkout
when it is not installed (its dense adapter needs pydantic: benchmarks/gpu_session.sh supplies it from carried wheels
where the machine lacks it). A failure in one part is printed and the other parts still run.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BATCH_TOKENS = 131_072  # the ceiling's batches, as issue 30 measured them
TARGETS = {"tokens_per_s": 6e6, "ceiling_share": 0.75, "queries_per_s": 150_000, "vs_raw": 2.5}
MSMARCO_WORDS = (55, 8, 200)  # mean, shortest, longest: MS MARCO passages average about 55-56 words
MSMARCO_PASSAGES = 8_800_000  # 8,841,823 in the collection


_FROM_CHECKOUT = False  # whether _import_gapbench loaded gapbench from this checkout (it is not installed)


def _import_gapbench() -> None:
    """Make ``gapbench`` importable from this checkout when it is not installed (the GPU machine has no install)."""
    global _FROM_CHECKOUT
    try:
        import gapbench  # noqa: F401
        return
    except ImportError:
        _FROM_CHECKOUT = True
    for name, folder in (("gapbench", "harness"), ("gapbench.adapters", "adapters")):
        spec = importlib.util.spec_from_file_location(name, ROOT / folder / "__init__.py",
                                                      submodule_search_locations=[str(ROOT / folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if name == "gapbench":
            spec.loader.exec_module(module)
    # gapbench.adapters' __init__ registers adapters through the registry; the benchmark needs none of that
    sys.modules["gapbench"].adapters = sys.modules["gapbench.adapters"]


def _tree_for_workers() -> str | None:
    """When gapbench is loaded from the checkout, a temporary folder laid out as the wheel (links to harness/,
    adapters/, tasks/), put on PYTHONPATH, which Ray's worker processes inherit: they import ``gapbench`` by name to
    rebuild the encoder. None when gapbench is installed."""
    import shutil

    if not _FROM_CHECKOUT:
        return None
    tree = Path(tempfile.mkdtemp(prefix="gapbench-tree-"))
    shutil.copytree(ROOT / "harness", tree / "gapbench", copy_function=os.symlink,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for sub in ("adapters", "tasks"):
        (tree / "gapbench" / sub).symlink_to(ROOT / sub, target_is_directory=True)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH")) if p)
    return str(tree)


class Out:
    def __init__(self, path: str | None) -> None:
        self.fh = open(path, "w") if path else None

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        if self.fh:
            self.fh.write(line + "\n")
            self.fh.flush()


def synthetic_texts(n: int, seed: int = 0) -> list[str]:
    """Passages of 20-120 words from a seeded vocabulary of pseudo-words with a Zipf-like frequency."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(rng.integers(2, 10)))) for _ in range(20_000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    lengths = rng.integers(20, 121, size=n)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    out, pos = [], 0
    for length in lengths:
        out.append(" ".join(vocab[w] for w in words[pos : pos + length]))
        pos += length
    return out


def msmarco_vocab(model_dir: str | None, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Words and their probabilities for :func:`msmarco_texts`: the tokenizer's whole words (vocab.txt order, Zipf
    weights: 90%) and 2,000 pseudo-words of random letters (several word pieces each: 10%), so that a passage of 55
    words is about 75 MiniLM tokens, as an MS MARCO passage is. Pseudo-words only when the model has no vocab.txt."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    pseudo = sorted({"".join(rng.choice(letters, size=int(rng.integers(4, 11)))) for _ in range(2_000)})
    real: list[str] = []
    vocab_file = Path(model_dir) / "vocab.txt" if model_dir else None
    if vocab_file is not None and vocab_file.is_file():
        real = [w for w in vocab_file.read_text(encoding="utf-8").split("\n")
                if w.isascii() and w.isalpha() and w.islower() and 2 <= len(w) <= 12]
    zipf = 1.0 / np.arange(1, len(real) + 1)
    p = np.concatenate([0.9 * zipf / zipf.sum(), np.full(len(pseudo), 0.1 / len(pseudo))]) if real else \
        np.full(len(pseudo), 1.0 / len(pseudo))
    return real + pseudo, p


def msmarco_texts(n: int, vocab: list[str], seed: int = 0, p: np.ndarray | None = None,
                  chunk: int = 250_000) -> list[str]:
    """``n`` passages of MS MARCO-like lengths (log-normal words: mean :data:`MSMARCO_WORDS`), words drawn from
    ``vocab`` (with probabilities ``p``), made without a Python loop over words: each chunk of passages is one
    gather from a byte matrix of the words, decoded once and split at the passage ends."""
    rng = np.random.default_rng(seed)
    mean, lo, hi = MSMARCO_WORDS
    sigma = 0.45
    width = max(len(w) for w in vocab) + 1
    table = np.zeros((len(vocab), width), dtype=np.uint8)
    for i, w in enumerate(vocab):
        table[i, : len(w)] = np.frombuffer(w.encode("ascii"), dtype=np.uint8)
        table[i, len(w)] = ord(" ")
    word_len = np.array([len(w) for w in vocab], dtype=np.int64)
    # draws through a 2^16-entry lookup table of the distribution: a uniform integer each, no binary search
    cdf = np.cumsum(np.full(len(vocab), 1.0 / len(vocab)) if p is None else p / p.sum())
    lookup = np.minimum(np.searchsorted(cdf, (np.arange(1 << 16) + 0.5) / (1 << 16)), len(vocab) - 1)
    out: list[str] = []
    for c0 in range(0, n, chunk):
        m = min(chunk, n - c0)
        lengths = np.clip(np.rint(rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, size=m)), lo, hi).astype(np.int64)
        words = lookup[rng.integers(0, 1 << 16, size=int(lengths.sum()), dtype=np.uint16)]
        chars = table[words]
        ends = np.cumsum(lengths) - 1
        chars[ends, word_len[words[ends]]] = ord("\n")  # the last word's space ends the passage
        flat = chars.ravel()
        out.extend(flat[flat != 0].tobytes().decode("ascii").split("\n")[:-1])
    return out


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # kilobytes on Linux


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


# -- (a) encoding
def bench_encoding(args, out: Out, res: dict) -> None:
    from sentence_transformers import SentenceTransformer

    from gapbench.adapters.dense import Dense, resolve_model

    dtype = "float16" if args.device.startswith("cuda") else "float32"
    path = resolve_model(args.model)
    texts = synthetic_texts(args.n)
    warm = texts[:: max(1, len(texts) // 512)][:512]
    raw = SentenceTransformer(path, device=args.device)
    if dtype == "float16":
        raw.half()
    tokens = sum(len(ids) for ids in raw.tokenizer(texts, truncation=True, max_length=raw.max_seq_length,
                                                  return_attention_mask=False)["input_ids"])
    res["tokens"] = tokens
    out(f"encoding: {len(texts)} synthetic passages (20-120 words), {tokens} tokens after truncation at "
        f"{raw.max_seq_length}; model {args.model}, {dtype}, {args.device}")
    best = None
    for bs in args.raw_batch_sizes:
        raw.encode(warm, batch_size=bs, normalize_embeddings=True)
        for _ in range(args.repeat):  # best of the repeats, for both sides: the GPU machine is shared and noisy
            _sync(args.device)
            t0 = time.perf_counter()
            ref = raw.encode(texts, batch_size=bs, normalize_embeddings=True, convert_to_numpy=True)
            _sync(args.device)
            took = time.perf_counter() - t0
            out(f"  raw SentenceTransformer.encode batch_size={bs}: {took:.2f}s  {tokens / took:,.0f} tokens/s  "
                f"{len(texts) / took:,.0f} texts/s")
            if best is None or took < best[0]:
                best = (took, bs, np.asarray(ref, dtype=np.float32))
    mine = None
    for batch_tokens in args.batch_tokens:
        dense = Dense(model=args.model, device=args.device, dtype=dtype, encoder="fast", cache=False,
                      batch_tokens=batch_tokens)
        dense.encode_texts(warm)
        for _ in range(args.repeat):
            _sync(args.device)
            t0 = time.perf_counter()
            emb = dense.encode_texts(texts)
            took = time.perf_counter() - t0
            out(f"  gapbench fast encoder (batch_tokens={batch_tokens}): {took:.2f}s  {tokens / took:,.0f} "
                f"tokens/s  {len(texts) / took:,.0f} texts/s")
            if mine is None or took < mine[0]:
                mine = (took, batch_tokens, emb)
        del dense
    diff = float(np.abs(mine[2] - best[2]).max())
    res["gapbench_tokens_per_s"] = tokens / mine[0]
    res["gapbench_batch_tokens"] = mine[1]
    res["raw_tokens_per_s"] = tokens / best[0]
    out(f"  ratio best gapbench (batch_tokens={mine[1]}) / best raw (batch_size={best[1]}): {best[0] / mine[0]:.2f}x"
        f"   max |difference| of the vectors: {diff:.2e}")
    batches = _ceiling_batches(raw, texts, args.ceiling_tokens, args.device)
    res["ceiling"] = (raw, batches)
    took, vectors = _forward_pass(raw, batches, args.device, args.repeat + 1)
    res["eager_tokens_per_s"] = tokens / took
    gap = res["gapbench_tokens_per_s"] / res["eager_tokens_per_s"]
    out(f"  ceiling, forward only (eager): {len(batches)} batches of <= {args.ceiling_tokens:,} padded tokens on the "
        f"device, best of {args.repeat + 1}: {took:.2f}s  {tokens / took:,.0f} tokens/s; gapbench reaches {gap:.0%}")
    out(f"    (max |difference| of the ceiling's vectors to gapbench's: "
        f"{float(np.abs(_in_text_order(vectors, batches) - mine[2]).max()):.2e})")


def _ceiling_batches(model, texts: list[str], batch_tokens: int, device: str) -> list[tuple[np.ndarray, dict]]:
    """The texts' token ids (tokenised here, not timed), longest first, in batches of at most ``batch_tokens``
    padded tokens, already on the device: ``(rows, features)`` each."""
    import torch

    tok = model.tokenizer
    ids = tok(texts, truncation=True, max_length=model.max_seq_length, return_attention_mask=False,
              return_token_type_ids=False)["input_ids"]
    lengths = np.array([len(i) for i in ids])
    order = np.argsort(-lengths, kind="stable")
    types = "token_type_ids" in getattr(tok, "model_input_names", ())
    pad = tok.pad_token_id or 0
    batches, i = [], 0
    while i < len(order):
        width = int(lengths[order[i]])
        rows = order[i : i + max(1, batch_tokens // width)]
        input_ids = np.full((len(rows), width), pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, t in enumerate(rows):
            input_ids[r, : lengths[t]] = ids[t]
            mask[r, : lengths[t]] = 1
        features = {"input_ids": torch.as_tensor(input_ids, device=device),
                    "attention_mask": torch.as_tensor(mask, device=device)}
        if types:
            features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        batches.append((rows, features))
        i += len(rows)
    return batches


def _forward_pass(model, batches, device: str, repeat: int):
    """Best time of ``repeat`` passes of only ``model(features)`` over the batches; the last pass's vectors."""
    import torch

    best, vectors = float("inf"), []
    with torch.inference_mode():
        for _ in range(repeat):
            _sync(device)
            t0 = time.perf_counter()
            vectors = [model(dict(f))["sentence_embedding"] for _, f in batches]  # a copy: modules add keys
            _sync(device)
            best = min(best, time.perf_counter() - t0)
    return best, vectors


def _in_text_order(vectors, batches) -> np.ndarray:
    import torch

    flat = torch.nn.functional.normalize(torch.cat(vectors).float(), p=2, dim=1).cpu().numpy()
    out = np.empty_like(flat)
    out[np.concatenate([rows for rows, _ in batches])] = flat
    return out


def bench_compile(args, out: Out, res: dict) -> None:
    """The forward-only ceiling again through ``torch.compile`` (dynamic shapes: one compile for every batch)."""
    import torch

    if "ceiling" not in res:
        out("compile: skipped (the encoding part did not run or failed before its ceiling)")
        return
    model, batches = res.pop("ceiling")
    try:
        compiled = torch.compile(model, dynamic=True, backend=args.compile_backend)
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _, f in batches:
                compiled(dict(f))
        _sync(args.device)
        first = time.perf_counter() - t0
        took, _ = _forward_pass(compiled, batches, args.device, args.repeat + 1)
    except Exception as exc:  # a machine without a C compiler or triton cannot compile: say why, go on
        out(f"  ceiling, forward only (torch.compile, backend {args.compile_backend}): FAILED, "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return
    res["compiled_tokens_per_s"] = res["tokens"] / took
    out(f"  ceiling, forward only (torch.compile, backend {args.compile_backend}, dynamic shapes): compile and first "
        f"pass {first:.1f}s (not in the rate); best of {args.repeat + 1}: {took:.2f}s  "
        f"{res['tokens'] / took:,.0f} tokens/s; gapbench reaches "
        f"{res['gapbench_tokens_per_s'] / res['compiled_tokens_per_s']:.0%}")


# -- (b) search
def _raw_search(q, docs, k: int, chunk: int, dtype):
    import torch

    d = docs.to(dtype)
    ids = []
    for q0 in range(0, q.shape[0], chunk):
        ids.append((q[q0 : q0 + chunk].to(dtype) @ d.T).topk(k, dim=1).indices)
    return torch.cat(ids)


def _timed(fn, device: str, repeat: int = 2):
    """Best time of ``repeat`` calls after one warm-up call, and the last call's result."""
    fn()
    best, result = float("inf"), None
    for _ in range(repeat):
        _sync(device)
        t0 = time.perf_counter()
        result = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best, result


def _free_bytes(device: str) -> int:
    import torch

    return torch.cuda.mem_get_info(device)[0] if device.startswith("cuda") else 2**30


def bench_search(args, out: Out, res: dict) -> None:
    import torch

    from gapbench.topk import CANDIDATE_MARGIN, DeviceDocs, torch_topk

    gen = torch.Generator(device=args.device).manual_seed(0)
    docs = torch.randn(args.docs, args.dim, generator=gen, device=args.device)
    docs /= torch.linalg.vector_norm(docs, dim=1, keepdim=True)
    queries = torch.randn(args.queries, args.dim, generator=gen, device=args.device)
    queries /= torch.linalg.vector_norm(queries, dim=1, keepdim=True)
    nq = args.queries
    out(f"search: {nq} queries over {args.docs} x {args.dim} random unit vectors, k={args.k}, {args.device}")
    low = torch.float16 if args.device.startswith("cuda") else torch.float32  # CPU matmul in float16 is emulated
    d_low, q_low = docs.to(low), queries.to(low)
    flops = 2.0 * nq * args.docs * args.dim
    best_mm = None
    for chunk in args.matmul_chunks:
        if chunk * args.docs * 2 > _free_bytes(args.device) // 3:
            out(f"  matmul only, {chunk} queries a step: skipped (the score block would not fit)")
            continue

        def products(chunk=chunk):
            for q0 in range(0, nq, chunk):
                q_low[q0 : q0 + chunk] @ d_low.T

        took, _ = _timed(products, args.device)
        out(f"  ceiling, matmul only ({str(low)[6:]}, no selection), {chunk} queries a step: {took:.3f}s  "
            f"{nq / took:,.0f} queries/s  {flops / took / 1e12:.1f} TFLOP/s")
        best_mm = max(best_mm or 0.0, nq / took)
    res["matmul_queries_per_s"] = best_mm
    d_low = q_low = None  # the float16 copies are not needed past here
    raw_best = (0.0, 0)
    raw16 = None
    for chunk in args.raw_chunks:
        if chunk * args.docs * 2 > _free_bytes(args.device) // 3:
            continue
        took, ids = _timed(lambda chunk=chunk: _raw_search(queries, docs, args.k, chunk, low), args.device)
        out(f"  raw torch (q @ D.T).topk, {str(low)[6:]}, {chunk} queries a step: {took:.3f}s  "
            f"{nq / took:,.0f} queries/s")
        if nq / took > raw_best[0]:
            raw_best, raw16 = (nq / took, chunk), ids.cpu().numpy()
    res["raw_queries_per_s"], res["raw_chunk"] = raw_best
    raw32 = raw16
    if low != torch.float32:
        chunk32 = max(1, min(nq, (1 << 30) // (4 * args.docs)))
        took, ids = _timed(lambda: _raw_search(queries, docs, args.k, chunk32, torch.float32), args.device, repeat=1)
        raw32 = ids.cpu().numpy()
        out(f"  raw torch (q @ D.T).topk, float32, {chunk32} queries a step: {took:.3f}s  {nq / took:,.0f} queries/s")
    q_np, d_np = queries.cpu().numpy(), docs.cpu().numpy()
    docs = queries = None  # gapbench places its own copy
    keys = np.arange(args.docs, dtype=np.int64)  # ids d0000000.. in order: the key is the position
    t0 = time.perf_counter()
    held = DeviceDocs(d_np, keys, args.device)
    _sync(args.device)
    out(f"  gapbench DeviceDocs: {time.perf_counter() - t0:.2f}s to place the documents "
        f"({'on the device' if held.resident else 'streamed'}, float16 candidates: {held.low})")
    want = _cpu_reference(q_np[: args.check_cpu], d_np, args.k, keys) if args.check_cpu else None
    has_selector = "selector" in inspect.signature(torch_topk).parameters
    variants: list[tuple[str, dict]] = [("defaults", {})]
    if has_selector:
        variants = [("selector=torch", {"selector": "torch"})]
        try:
            import triton  # noqa: F401
        except ImportError as exc:
            out(f"  gapbench torch_topk selector=triton: not run, triton does not import ({exc})")
        else:
            if args.device.startswith("cuda"):
                variants.append(("selector=triton", {"selector": "triton"}))
            else:
                out("  gapbench torch_topk selector=triton: not run, Triton kernels need a CUDA device")
    else:
        out("  gapbench torch_topk has no `selector` keyword yet (the Triton selection is missing): defaults only")
    best_gap = 0.0
    res["exact"] = True
    for label, kw in variants:
        try:
            took, hits = _timed(lambda kw=kw: torch_topk(q_np, held, args.k, **kw), args.device)
        except Exception as exc:
            out(f"  gapbench torch_topk {label}: FAILED, {type(exc).__name__}: {exc}")
            continue
        line = (f"  gapbench torch_topk {label} (exact, tie rule, margin {CANDIDATE_MARGIN}, automatic tile): "
                f"{took:.3f}s  {nq / took:,.0f} queries/s  ({nq / took / raw_best[0]:.2f}x raw's best batch)")
        if want is not None:
            exact = float(np.mean([w.tolist() == g[0].tolist() for w, g in zip(want, hits)]))
            res["exact"] = res["exact"] and exact == 1.0
            line += f"; rankings equal to the CPU dense_topk on {len(want)} queries: {exact:.4f}"
        out(line)
        best_gap = max(best_gap, nq / took)
        same32 = np.mean([set(i.tolist()) == set(r.tolist()) for (i, _), r in zip(hits, raw32)])
        same16 = np.mean([set(i.tolist()) == set(r.tolist()) for (i, _), r in zip(hits, raw16)])
        out(f"    top-{args.k} sets equal to raw float32: {same32:.4f} of queries; to raw {str(low)[6:]}: {same16:.4f}")
    for margin in args.margins:  # the same function with other settings, so the defaults can be chosen from data
        took, _ = _timed(lambda margin=margin: torch_topk(q_np, held, args.k, candidate_margin=margin),
                         args.device, repeat=1)
        out(f"    margin {margin}: {took:.3f}s  {nq / took:,.0f} queries/s")
    res["gapbench_queries_per_s"] = best_gap


def _cpu_reference(q, d, k, keys):
    from gapbench.topk import dense_topk

    return [i for i, _ in dense_topk(q, d, k, keys)]


# -- (c) memory bound
class RandomDocs:
    """Random unit vectors made on the device block by block (seeded per block), served to :class:`DeviceDocs` as
    an embedding cache serves its blocks: the host never holds more than one block."""

    def __init__(self, n: int, dim: int, device: str, seed: int = 1) -> None:
        self.n_texts, self._dim, self.device, self.seed = n, dim, device, seed

    def dim(self) -> int:
        return self._dim

    def iter_blocks(self, rows: int):
        import torch

        for b, d0 in enumerate(range(0, self.n_texts, rows)):
            gen = torch.Generator(device=self.device).manual_seed(self.seed * 1_000_003 + b)
            block = torch.randn(min(rows, self.n_texts - d0), self._dim, generator=gen, device=self.device)
            block /= torch.linalg.vector_norm(block, dim=1, keepdim=True)
            yield d0, block.cpu().numpy()


def bench_memory(args, out: Out, res: dict) -> None:
    import torch

    from gapbench.topk import DeviceDocs, torch_topk

    cuda = args.device.startswith("cuda")
    n, dim = args.mem_docs, args.mem_dim
    card = torch.cuda.get_device_properties(args.device).total_memory if cuda else 0
    out(f"memory: {args.mem_queries} queries over {n:,} x {dim} random unit float32 vectors "
        f"({n * dim * 4 / 1e9:.1f} GB as float32), k={args.k}, {args.device}")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(args.device)
    source = RandomDocs(n, dim, args.device)
    t0 = time.perf_counter()
    held = DeviceDocs(source, np.arange(n, dtype=np.int64), args.device, block_rows=min(n, args.mem_block))
    _sync(args.device)
    placed = time.perf_counter() - t0
    rng = np.random.default_rng(2)
    q = rng.standard_normal((args.mem_queries, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    t0 = time.perf_counter()
    hits = torch_topk(q, held, args.k)
    took = time.perf_counter() - t0
    check = min(16, len(q))
    exact = _exact_sets(q[:check], held, args.k, args.device)
    same = np.mean([set(h[0].tolist()) == w for h, w in zip(hits, exact)])
    peak = torch.cuda.max_memory_allocated(args.device) if cuda else 0
    res["memory_peak"], res["memory_card"] = peak, card
    where = "held on the device" if held.resident else "streamed from the host each search"
    out(f"  gapbench DeviceDocs ({where}, float16 candidates: {held.low}): {placed:.1f}s to make and place; "
        f"torch_topk: {took:.2f}s  {len(q) / took:,.0f} queries/s; top-{args.k} sets equal to a float32 scan on "
        f"{check} queries: {same:.4f}")
    if cuda:
        out(f"  peak device memory {peak / 2**30:.1f} GiB of the card's {card / 2**30:.1f} GiB "
            f"({peak / card:.0%}); host peak RSS {_peak_rss_gb():.1f} GB")
    else:
        out(f"  (on the CPU no device memory is counted; host peak RSS {_peak_rss_gb():.1f} GB)")


def _exact_sets(q: np.ndarray, held, k: int, device: str) -> list[set]:
    """Top-k index sets by a plain float32 scan of the held blocks (ties broken arbitrarily: random data has none)."""
    import torch

    qt = torch.as_tensor(q, device=device)
    best_s, best_i = None, None
    for d0, d32, _ in held.blocks():
        s = qt @ d32.T
        top = s.topk(min(k, s.shape[1]), dim=1)
        idx = top.indices + d0
        if best_s is None:
            best_s, best_i = top.values, idx
        else:
            cat_s, cat_i = torch.cat([best_s, top.values], 1), torch.cat([best_i, idx], 1)
            keep = cat_s.topk(k, dim=1).indices
            best_s, best_i = cat_s.gather(1, keep), cat_i.gather(1, keep)
    return [set(row) for row in best_i.cpu().numpy().tolist()]


# -- verdicts
def summary(out: Out, res: dict) -> None:
    out("verdicts (issue 30):")
    if "gapbench_tokens_per_s" in res and "eager_tokens_per_s" in res:
        gap, eager = res["gapbench_tokens_per_s"], res["eager_tokens_per_s"]
        out(f"  {_verdict(gap >= TARGETS['tokens_per_s'])} encoding >= 6,000,000 tokens/s: gapbench {gap:,.0f}")
        out(f"  {_verdict(gap / eager >= TARGETS['ceiling_share'])} encoding >= 75% of the forward-only ceiling "
            f"(eager, the ceiling the issue names): {gap / eager:.0%} of {eager:,.0f}")
    else:
        out("  encoding: not judged (the part did not finish)")
    if res.get("gapbench_queries_per_s"):
        gap, raw = res["gapbench_queries_per_s"], res["raw_queries_per_s"]
        out(f"  {_verdict(gap >= TARGETS['queries_per_s'])} search >= 150,000 queries/s at 2M x 384, top-10: "
            f"gapbench {gap:,.0f}")
        out(f"  {_verdict(gap >= TARGETS['vs_raw'] * raw)} search >= 2.5x raw torch's best batch "
            f"({raw:,.0f} queries/s at {res['raw_chunk']} a step): {gap / raw:.2f}x")
        out(f"  {_verdict(res['exact'])} search exact: gapbench's rankings equal the CPU dense_topk's")
    else:
        out("  search: not judged (the part did not finish)")
    if res.get("memory_card"):
        out(f"  {_verdict(res['memory_peak'] < res['memory_card'])} memory bounded at 10M x 768 on one card: "
            f"peak {res['memory_peak'] / 2**30:.1f} of {res['memory_card'] / 2**30:.1f} GiB")


# -- part 3: the MS MARCO-sized run
def run_msmarco(args, out: Out) -> int:
    """``args.msmarco`` synthetic passages indexed and searched end to end by gapbench's dense retriever (fast
    encoder, device search); with ``--ray`` again through gapbench's Ray path on one local node, results compared."""
    import torch

    from gapbench import distributed
    from gapbench.adapters.dense import Dense, resolve_model
    from gapbench.types import Corpus, Document, Queries, Query

    cuda = args.device.startswith("cuda")
    dtype = "float16" if cuda else "float32"
    path = resolve_model(args.model)
    n = args.msmarco
    t0 = time.perf_counter()
    vocab, p = msmarco_vocab(path if Path(path).is_dir() else None)
    texts = msmarco_texts(n, vocab, seed=0, p=p)
    gen_s = time.perf_counter() - t0
    out(f"msmarco: {n:,} synthetic passages ({np.mean([len(t.split(' ')) for t in texts[:20_000]]):.1f} words "
        f"a passage on average), generated in {gen_s:.1f}s (numpy, not part of the run's time)")
    options = dict(model=args.model, device=args.device, dtype=dtype, encoder="fast", batch_tokens=BATCH_TOKENS)
    sample = texts[: min(n, args.msmarco_sample)]
    probe = Dense(**options, cache=False)
    probe.encode_texts(sample[: max(1, len(sample) // 10)])  # model load and warm-up
    tok = probe.token_model().tokenizer
    sample_tokens = sum(len(i) for i in tok(sample, truncation=True, max_length=probe.token_model().max_seq_length,
                                            return_attention_mask=False)["input_ids"])
    _sync(args.device)
    t1 = time.perf_counter()
    probe.encode_texts(sample)
    rate = sample_tokens / (time.perf_counter() - t1)
    del probe
    per_text = sample_tokens / len(sample)
    rounds = 2 if args.ray else 1
    estimate = rounds * n * per_text / rate + args.msmarco_overhead_s * n / 1e6
    out(f"  measured on {len(sample):,} of them: {per_text:.1f} tokens a passage, {rate:,.0f} tokens/s -> "
        f"estimate {estimate:.0f}s for {n:,} passages ({rounds} encoding{'s' if rounds > 1 else ''}, "
        f"{args.msmarco_overhead_s:.0f}s a million for corpus, sorting and search)")
    left = args.budget_s - (time.perf_counter() - args.started) if args.budget_s else None
    if left is not None and estimate > left:
        fit = int(n * left / estimate) // 1000 * 1000
        if fit < 1000:
            out(f"  SKIPPED: not even 1,000 passages fit in the {left:.0f}s left of --budget-s {args.budget_s:.0f}s")
            return 1
        out(f"  the estimate exceeds the {left:.0f}s left of --budget-s {args.budget_s:.0f}s: running {fit:,} "
            f"passages instead of {n:,} (NOT the full MS MARCO size; give this command more time for it)")
        n, texts = fit, texts[:fit]
    t0 = time.perf_counter()
    corpus = Corpus(map(Document, (f"d{i:08d}" for i in range(n)), texts))
    pick = np.linspace(0, n - 1, min(args.msmarco_queries, n)).astype(np.int64)
    queries = Queries(Query(f"q{i}", " ".join(texts[i].split(" ")[2:14])) for i in pick.tolist())
    del texts
    out(f"  corpus and {len(queries):,} queries (12 words of a passage each) built: {time.perf_counter() - t0:.1f}s")
    home = Path(args.work or tempfile.mkdtemp(prefix="gapbench-msmarco-"))
    runs = {}
    for mode in ("single", "ray") if args.ray else ("single",):
        if mode == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                out("  --ray: ray does not import on this machine (pip install 'gapbench[ray]'): not run")
                return 1
            tree = _tree_for_workers()
            if tree:
                out(f"  (gapbench is not installed: Ray's workers import it from {tree}, links to this checkout)")
        # the Ray path encodes into the embedding cache, so with --ray both runs use one (each its own folder)
        os.environ["GAPBENCH_HOME"] = str(home / mode)
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(args.device)
        dense = Dense(**options, cache=bool(args.ray))
        with distributed.connect("local" if mode == "ray" else None) as session:
            t0 = time.perf_counter()
            dense.index(corpus)
            _sync(args.device)
            index_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            run = dense.search(queries, args.k)
            search_s = time.perf_counter() - t0
        runs[mode] = run
        peak = f"{torch.cuda.max_memory_allocated(args.device) / 2**30:.1f} GiB" if cuda else "-"
        first = np.mean([run[f"q{i}"][0][0] == f"d{i:08d}" for i in pick.tolist()])
        how = f"Ray on one local node ({session['gpus']} GPUs, {session['cpus']} CPUs)" if session else "one process"
        out(f"  {mode} ({how}, cache {'on' if dense.cache else 'off'}): index (sort + encode) {index_s:.1f}s "
            f"({n * per_text / index_s:,.0f} tokens/s est.), search {len(queries):,} queries top-{args.k} "
            f"{search_s:.1f}s; peak device memory {peak}, driver peak RSS {_peak_rss_gb():.1f} GB; "
            f"source passage ranked first for {first:.3f} of queries")
        del dense
    if args.ray:
        same = np.mean([[d for d, _ in runs["single"][q]] == [d for d, _ in runs["ray"][q]] for q in queries])
        out(f"  {_verdict(same == 1.0)} --ray identical: the same top-{args.k} ids for {same:.4f} of queries")
        return 0 if same == 1.0 else 1
    return 0


def header(args, out: Out) -> None:
    import torch

    versions = [f"torch {torch.__version__}"]
    for name in ("sentence_transformers", "transformers", "triton"):
        try:
            versions.append(f"{name.replace('_', '-')} {__import__(name).__version__}")
        except ImportError:
            versions.append(f"{name.replace('_', '-')} not installed")
    card = "cpu"
    if args.device.startswith("cuda"):
        props = torch.cuda.get_device_properties(args.device)
        card = f"{torch.cuda.get_device_name(args.device)} ({props.total_memory / 2**30:.0f} GiB)"
    out(f"bench_gpu: {card}; {', '.join(versions)}; python {sys.version.split()[0]}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="sentence-transformers name or local folder (default: MiniLM)")
    ap.add_argument("--n", type=int, default=30_000, help="passages to encode")
    ap.add_argument("--docs", type=int, default=2_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--check-cpu", type=int, default=200, help="queries re-ranked by the CPU path for comparison")
    ap.add_argument("--repeat", type=int, default=2, help="timed repeats per encoding setting (the best counts)")
    ap.add_argument("--mem-docs", type=int, default=10_000_000, help="documents of the memory part")
    ap.add_argument("--mem-dim", type=int, default=768)
    ap.add_argument("--mem-queries", type=int, default=300)
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the ceiling")
    ap.add_argument("--small", action="store_true", help="toy sizes on the CPU")
    ap.add_argument("--skip", choices=("encoding", "search", "memory", "compile"), action="append", default=[])
    ap.add_argument("--msmarco", type=int, nargs="?", const=MSMARCO_PASSAGES, default=None, metavar="N",
                    help=f"only the MS MARCO-sized run: N synthetic passages (default {MSMARCO_PASSAGES:,})")
    ap.add_argument("--ray", action="store_true", help="with --msmarco: again through Ray on one local node")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="with --msmarco: the seconds this command may take; fewer passages (said so) when the "
                    "estimate made after generating them exceeds what is left")
    ap.add_argument("--work", help="with --msmarco --ray: folder for the two embedding caches (default: a temp one)")
    ap.add_argument("--out", help="also write the output to this file")
    args = ap.parse_args(argv)
    _import_gapbench()
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.raw_batch_sizes = (128, 256)
    args.margins = (64,)
    args.batch_tokens = (65_536, 131_072)
    args.ceiling_tokens = BATCH_TOKENS
    args.matmul_chunks = (1024, 4096)
    args.raw_chunks = (128, 512, 2048)
    args.mem_block = 1 << 20
    args.msmarco_queries, args.msmarco_sample, args.msmarco_overhead_s = 10_000, 20_000, 8.0
    if args.small:
        args.n, args.docs, args.queries, args.device, args.check_cpu, args.repeat = 24, 3000, 50, "cpu", 50, 1
        args.raw_batch_sizes, args.margins, args.batch_tokens = (32,), (16,), (16_384,)
        args.ceiling_tokens, args.matmul_chunks, args.raw_chunks = 4_096, (16, 50), (16, 50)
        args.mem_docs, args.mem_dim, args.mem_queries, args.mem_block = 5_000, 64, 20, 2_000
        args.msmarco_queries, args.msmarco_sample = 50, 40
        if args.msmarco == MSMARCO_PASSAGES:
            args.msmarco = 2_000
        if args.compile_backend == "inductor":
            args.compile_backend = "eager"  # inductor on 2 CPU cores takes minutes; the path is what is checked
    out = Out(args.out)
    header(args, out)
    started = args.started = time.perf_counter()
    if args.msmarco is not None:
        try:
            rc = run_msmarco(args, out)
        except Exception:
            out("msmarco: FAILED\n" + traceback.format_exc())
            rc = 1
        out(f"total: {time.perf_counter() - started:.1f}s")
        return rc
    res: dict = {}
    failed = 0
    last = next((p for p in ("memory", "search", "encoding") if p not in args.skip), None)
    for part, fn in (("encoding", bench_encoding), ("search", bench_search), ("memory", bench_memory),
                     ("compile", bench_compile)):
        if part in args.skip:
            continue
        t0 = time.perf_counter()
        try:
            fn(args, out, res)
        except Exception:  # one part failing must not lose the others' figures
            failed += 1
            out(f"{part}: FAILED\n" + traceback.format_exc())
        finally:
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
        out(f"{part}: {time.perf_counter() - t0:.1f}s")
        if part == last:
            summary(out, res)  # before the compile: a compile cut short by a timeout leaves the verdicts written
    if "compiled_tokens_per_s" in res and "eager_tokens_per_s" in res:
        best = max(res["eager_tokens_per_s"], res["compiled_tokens_per_s"])
        out(f"  (gapbench's share of the best ceiling measured, torch.compile's included: "
            f"{res['gapbench_tokens_per_s'] / best:.0%} of {best:,.0f} tokens/s; the verdict above uses eager's)")
    out(f"total: {time.perf_counter() - started:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
