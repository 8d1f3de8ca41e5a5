"""BM25 end to end: gapbench's ``bm25`` adapter against raw bm25s, in one process.

Synthetic corpus: seeded random documents drawn from a Zipf-like vocabulary of made-up words, and short queries drawn
from the same distribution.

Raw side (bm25s, default tokenizer arguments except ``show_progress=False``; gapbench also turns progress bars off):
    bm25s.tokenize(docs); bm25s.BM25().index(tokens); bm25s.tokenize(queries); retriever.retrieve(q_tokens, k=100)
gapbench side (what a user writes, including building the Corpus and Queries objects):
    Corpus(Document(...) ...); Queries(...); BM25().index(corpus); .search(queries, 100)

Both sides are timed end to end, in wall time and in this process's CPU time (both sides are single-threaded, so CPU
time is the steadier figure when other work shares the machine; PASS/MISS is judged on it, wall time is printed too).
Each side is repeated (interleaved, alternating which goes first) and the best time counts.
Target: gapbench / raw <= 1.15.

    python benchmarks/bench_bm25.py                     # 100k docs, 1000 queries
    python benchmarks/bench_bm25.py --docs 5000 --queries 100 --reps 2   # small
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_HOME = tempfile.TemporaryDirectory(prefix="gapbench-bench-")
os.environ["GAPBENCH_HOME"] = _HOME.name  # private, empty cache: nothing is reused across runs

import numpy as np  # noqa: E402


from _common import load_note  # noqa: E402  (benchmarks/ is on sys.path when a script runs)

TARGET = 1.15
K = 100


def make_vocab(n_words: int, rng: np.random.Generator, banned: set[str]) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n_words:
        for ln in rng.integers(3, 11, size=n_words):
            w = "".join(rng.choice(letters, size=ln))
            if w not in seen and w not in banned:
                seen.add(w)
                words.append(w)
                if len(words) == n_words:
                    break
    return words


def make_texts(n: int, lo: int, hi: int, vocab: np.ndarray, probs: np.ndarray, rng: np.random.Generator) -> list[str]:
    lengths = rng.integers(lo, hi + 1, size=n)
    flat = rng.choice(len(vocab), size=int(lengths.sum()), p=probs)
    out = []
    pos = 0
    for ln in lengths:
        out.append(" ".join(vocab[flat[pos : pos + ln]]))
        pos += ln
    return out


def raw_bm25s(docs: list[str], queries: list[str], k: int):
    import bm25s

    corpus_tokens = bm25s.tokenize(docs, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    query_tokens = bm25s.tokenize(queries, show_progress=False)
    idx, scores = retriever.retrieve(query_tokens, k=k, show_progress=False)
    return idx, scores


def gapbench_bm25(doc_ids: list[str], docs: list[str], qids: list[str], queries: list[str], k: int):
    from gapbench.adapters.bm25 import BM25
    from gapbench.types import Corpus, Document, Queries, Query

    corpus = Corpus(Document(d, t) for d, t in zip(doc_ids, docs))
    qs = Queries(Query(q, t) for q, t in zip(qids, queries))
    bm = BM25()
    bm.index(corpus)
    return bm.search(qs, k)


def timed(fn, *args):
    """(wall seconds, CPU seconds of this process, result). Both sides are single-threaded, so CPU time is the
    steadier measure on a machine shared with other work; wall time is what a user waits."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, time.process_time() - c0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--vocab", type=int, default=30_000)
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each side (interleaved); best counts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--zipf", type=float, default=1.07,
                    help="vocabulary skew: word r has weight 1/(r+2.7)^zipf; lower it (e.g. 0.5) for sparse matches")
    args = ap.parse_args(argv)
    print(f"start: {load_note()}")

    import bm25s

    import gapbench

    rng = np.random.default_rng(args.seed)
    banned = set(bm25s.stopwords.STOPWORDS_EN) if hasattr(bm25s, "stopwords") else set()
    t0 = time.perf_counter()
    vocab = np.array(make_vocab(args.vocab, rng, banned))
    ranks = np.arange(1, args.vocab + 1, dtype=np.float64)
    probs = 1.0 / (ranks + 2.7) ** args.zipf  # Zipf-Mandelbrot-like
    probs /= probs.sum()
    docs = make_texts(args.docs, 50, 150, vocab, probs, rng)
    queries = make_texts(args.queries, 3, 8, vocab, probs, rng)
    doc_ids = [f"d{i}" for i in range(args.docs)]
    qids = [f"q{i}" for i in range(args.queries)]
    gen_s = time.perf_counter() - t0

    print(f"bench_bm25: {args.docs} docs (50-150 tokens), {args.queries} queries (3-8 tokens), vocab {args.vocab}, "
          f"zipf {args.zipf}, k={K}, seed {args.seed} (data generated in {gen_s:.1f}s)")
    print(f"python {platform.python_version()}, bm25s {bm25s.__version__}, gapbench {gapbench.__version__}, "
          f"numpy {np.__version__}, cpus {os.cpu_count()}, GAPBENCH_HOME={os.environ['GAPBENCH_HOME']} (fresh)")

    raw_times, gb_times, raw_cpu, gb_cpu = [], [], [], []
    raw_out = gb_out = None
    for rep in range(args.reps):
        # alternate which side goes first so warm-up and allocator state do not favour one side
        order = ("raw", "gb") if rep % 2 == 0 else ("gb", "raw")
        for side in order:
            if side == "raw":
                t, c, raw_out = timed(raw_bm25s, docs, queries, K)
                raw_times.append(t)
                raw_cpu.append(c)
            else:
                t, c, gb_out = timed(gapbench_bm25, doc_ids, docs, qids, queries, K)
                gb_times.append(t)
                gb_cpu.append(c)
            print(f"  rep {rep + 1} {'raw bm25s' if side == 'raw' else 'gapbench ':9s}: {t:7.2f} s wall, {c:7.2f} s cpu")

    # agreement of the top-10 lists; they may differ only where scores tie
    idx, scores = raw_out
    same = tie_only = other = 0
    for qi, qid in enumerate(qids):
        raw_ids = [doc_ids[j] for j in idx[qi, :10]]
        raw_sc = scores[qi, :10]
        gb = gb_out[qid][:10]
        gb_ids = [d for d, _ in gb]
        gb_sc = np.array([s for _, s in gb], dtype=np.float32)
        if raw_ids == gb_ids:
            same += 1
        elif len(gb_sc) == len(raw_sc) and np.allclose(np.sort(gb_sc), np.sort(raw_sc), rtol=1e-5, atol=1e-6):
            tie_only += 1  # same score profile, different order among equal scores
        else:
            other += 1
    n = len(qids)
    agree = (same + tie_only) / n

    raw_best, gb_best = min(raw_times), min(gb_times)
    wall_ratio = gb_best / raw_best
    raw_cbest, gb_cbest = min(raw_cpu), min(gb_cpu)
    ratio = gb_cbest / raw_cbest
    print(f"top-10 agreement: {same}/{n} identical, {tie_only} differ only among tied scores, {other} differ "
          f"otherwise -> {agree:.1%} agree {'(OK)' if other == 0 else '(CHECK)'}")
    print(f"best of {args.reps} each: raw bm25s {raw_best:.2f} s wall / {raw_cbest:.2f} s cpu, "
          f"gapbench {gb_best:.2f} s wall / {gb_cbest:.2f} s cpu")
    print(f"RATIO gapbench/raw = {ratio:.3f} (cpu time; wall time {wall_ratio:.3f})   target <= {TARGET}")
    print(f"end: {load_note()}")
    print(f"{'PASS' if ratio <= TARGET else 'MISS'}: bm25 end-to-end ratio {ratio:.3f} cpu time, {wall_ratio:.3f} wall "
          f"(target <= {TARGET}, judged on cpu time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
