"""GPU fast path: dense encoding throughput and exact search, gapbench beside the raw libraries in the same run.

(a) Encoding: seeded synthetic passages of MS MARCO-like lengths (20-120 words), encoded by raw
    ``SentenceTransformer.encode`` (model.half() on CUDA; best of batch sizes 128 and 256) and by gapbench's fast
    encoder (``Dense(encoder="fast")``), same model and dtype: tokens/s, texts/s, the ratio and the largest difference
    between the two sets of vectors.
(b) Search: 10,000 random unit queries over 2,000,000 random unit 384-d documents: gapbench's ``torch_topk`` (exact,
    gapbench's tie rule) in queries/s beside a raw ``(q @ D.T).topk`` loop in float16 and in float32, and how many
    top-k lists agree with the raw float32 ones.

    python benchmarks/bench_gpu.py [--model PATH] [--n 100000] [--docs 2000000] [--queries 10000] [--out FILE]
    python benchmarks/bench_gpu.py --small          # toy sizes on the CPU (what the test runs)

Imports only numpy, torch, sentence-transformers (and transformers) besides gapbench.topk and gapbench.adapters.dense,
which import only the standard library and numpy; gapbench need not be installed (it is loaded from this checkout).
A failure in one part is printed and the other part still runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _import_gapbench() -> None:
    """Make ``gapbench`` importable from this checkout when it is not installed (the GPU machine has no install)."""
    try:
        import gapbench  # noqa: F401
        return
    except ImportError:
        pass
    for name, folder in (("gapbench", "harness"), ("gapbench.adapters", "adapters")):
        spec = importlib.util.spec_from_file_location(name, ROOT / folder / "__init__.py",
                                                      submodule_search_locations=[str(ROOT / folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        if name == "gapbench":
            spec.loader.exec_module(module)
    # gapbench.adapters' __init__ registers adapters through the registry; the benchmark needs none of that
    sys.modules["gapbench"].adapters = sys.modules["gapbench.adapters"]


class Out:
    def __init__(self, path: str | None) -> None:
        self.fh = open(path, "w") if path else None

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        if self.fh:
            self.fh.write(line + "\n")
            self.fh.flush()


WORDS = None


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


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench_encoding(args, out: Out) -> None:
    import torch
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
    del raw
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
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
    out(f"  ratio best gapbench (batch_tokens={mine[1]}) / best raw (batch_size={best[1]}): {best[0] / mine[0]:.2f}x"
        f"   max |difference| of the vectors: {diff:.2e}")


def _raw_search(q, docs, k: int, chunk: int, dtype):
    import torch

    d = docs.to(dtype)
    ids = []
    for q0 in range(0, q.shape[0], chunk):
        ids.append((q[q0 : q0 + chunk].to(dtype) @ d.T).topk(k, dim=1).indices)
    return torch.cat(ids)


def bench_search(args, out: Out) -> None:
    import torch

    from gapbench.topk import CANDIDATE_MARGIN, DeviceDocs, torch_topk

    gen = torch.Generator(device=args.device).manual_seed(0)
    docs = torch.randn(args.docs, args.dim, generator=gen, device=args.device)
    docs /= torch.linalg.vector_norm(docs, dim=1, keepdim=True)
    queries = torch.randn(args.queries, args.dim, generator=gen, device=args.device)
    queries /= torch.linalg.vector_norm(queries, dim=1, keepdim=True)
    out(f"search: {args.queries} queries over {args.docs} x {args.dim} random unit vectors, k={args.k}, {args.device}")
    chunk = max(1, min(args.queries, (1 << 30) // (4 * args.docs)))
    raw = {}
    for dtype in (torch.float16, torch.float32):
        _raw_search(queries[:chunk], docs, args.k, chunk, dtype)
        _sync(args.device)
        t0 = time.perf_counter()
        raw[dtype] = _raw_search(queries, docs, args.k, chunk, dtype).cpu().numpy()
        took = time.perf_counter() - t0
        out(f"  raw torch (q @ D.T).topk, {str(dtype)[6:]}, {chunk} queries a step: {took:.3f}s  "
            f"{args.queries / took:,.0f} queries/s")
    q_np, d_np = queries.cpu().numpy(), docs.cpu().numpy()
    del docs
    keys = np.arange(args.docs, dtype=np.int64)  # ids d0000000.. in order: the key is the position
    t0 = time.perf_counter()
    held = DeviceDocs(d_np, keys, args.device)
    _sync(args.device)
    out(f"  gapbench DeviceDocs: {time.perf_counter() - t0:.2f}s to place the documents "
        f"({'on the device' if held.resident else 'streamed'}, float16 candidates: {held.low})")
    torch_topk(q_np, held, args.k)  # warm-up at its own tile size, as the raw loop's warm-up is at its own
    t0 = time.perf_counter()
    hits = torch_topk(q_np, held, args.k)
    took = time.perf_counter() - t0
    out(f"  gapbench torch_topk (exact, tie rule; defaults: margin {CANDIDATE_MARGIN}, automatic tile): {took:.3f}s  "
        f"{args.queries / took:,.0f} queries/s")
    for margin in args.margins:  # the same function with other settings, so the defaults can be chosen from data
        for tile in (None, chunk * 4 * args.docs):
            t0 = time.perf_counter()
            torch_topk(q_np, held, args.k, candidate_margin=margin, tile_bytes=tile)
            took = time.perf_counter() - t0
            out(f"    margin {margin}, tile {'automatic' if tile is None else f'{chunk} queries'}: {took:.3f}s  "
                f"{args.queries / took:,.0f} queries/s")
    same32 = np.mean([set(i.tolist()) == set(r.tolist()) for (i, _), r in zip(hits, raw[torch.float32])])
    same16 = np.mean([set(i.tolist()) == set(r.tolist()) for (i, _), r in zip(hits, raw[torch.float16])])
    out(f"  top-{args.k} sets equal to raw float32: {same32:.4f} of queries; to raw float16: {same16:.4f}")
    if args.check_cpu:
        want = _cpu_reference(q_np[: args.check_cpu], d_np, args.k, keys)
        exact = np.mean([w.tolist() == g[0].tolist() for w, g in zip(want, hits)])
        out(f"  rankings equal to gapbench's CPU dense_topk on the first {args.check_cpu} queries: {exact:.4f}")


def _cpu_reference(q, d, k, keys):
    from gapbench.topk import dense_topk

    return [i for i, _ in dense_topk(q, d, k, keys)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="sentence-transformers name or local folder (default: MiniLM)")
    ap.add_argument("--n", type=int, default=100_000, help="passages to encode")
    ap.add_argument("--docs", type=int, default=2_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--check-cpu", type=int, default=200, help="queries re-ranked by the CPU path for comparison")
    ap.add_argument("--repeat", type=int, default=2, help="timed repeats per encoding setting (the best counts)")
    ap.add_argument("--small", action="store_true", help="toy sizes on the CPU")
    ap.add_argument("--skip", choices=("encoding", "search"), action="append", default=[])
    ap.add_argument("--out", help="also write the output to this file")
    args = ap.parse_args(argv)
    _import_gapbench()
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.raw_batch_sizes = (128, 256)
    args.margins = (8, 16, 32, 64)
    args.batch_tokens = (65_536, 131_072)
    if args.small:
        args.n, args.docs, args.queries, args.device, args.check_cpu = 64, 3000, 50, "cpu", 50
        args.raw_batch_sizes = (32,)
        args.margins = (16,)
        args.batch_tokens = (16_384,)
    out = Out(args.out)
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    out(f"bench_gpu: {name}, torch {torch.__version__}")
    failed = 0
    for part, fn in (("encoding", bench_encoding), ("search", bench_search)):
        if part in args.skip:
            continue
        try:
            fn(args, out)
        except Exception:  # one part failing must not lose the other's figures
            failed += 1
            out(f"{part}: FAILED\n" + traceback.format_exc())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
