"""corpus.jsonl into the compact corpus: CPU before and after orjson and Arrow (issue 46), at 1M documents.

Data: the synthetic BEIR folder of benchmarks/bench_scale.py (``generate``: N documents of 20-120 made-up words, about
575 MB per million), made once under ``--data-dir``. Each side is its own process, timed by ``os.wait4`` (CPU time,
user + system: what the process computed, which other processes on a busy machine inflate less than its wall time):

    convert before   gapbench.corpus_store.load_compact(corpus.jsonl) of the code at ``--before`` (default 79d7e64,
                     the commit before issue 46: Python's json per line, a Python loop per document), laid out from
                     `git archive` in a temporary folder and put first on PYTHONPATH
    convert after    the same call of this checkout: orjson per block, Arrow for the columns and the fingerprint
    bm25 before/after  with ``--bm25``: `gapbench run FOLDER -r bm25 --k 1000 -m nDCG@10 --json`, a fresh
                     GAPBENCH_HOME each (a cold run: conversion, index, search, evaluation), old code then this one

The two conversions must give byte-identical compact files (docs.arrow, hashes.npy, order.npy, tie_keys.npy,
meta.json); the script checks it. Target: the conversion after takes at most half the CPU of the one before.

    python benchmarks/bench_corpus_read.py --docs 1M             # ~2 minutes after the data is made
    python benchmarks/bench_corpus_read.py --docs 1M --bm25      # plus two cold BM25 runs (minutes each)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import load_note  # benchmarks/ is on sys.path when a script runs

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "79d7e64"
FILES = ("docs.arrow", "hashes.npy", "order.npy", "tie_keys.npy", "meta.json")
CONVERT = ("import sys\nfrom pathlib import Path\nfrom gapbench.corpus_store import load_compact\n"
           "corpus = load_compact(Path(sys.argv[1]), root=Path(sys.argv[2]))\nprint(corpus.folder)")


def size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def old_tree(rev: str, where: Path) -> Path:
    """The package at ``rev`` laid out as the wheel installs it (gapbench/, with tasks/ and adapters/ inside)."""
    for folder, target in (("harness", where / "gapbench"), ("tasks", where / "gapbench" / "tasks"),
                           ("adapters", where / "gapbench" / "adapters")):
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, folder], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "--strip-components=1", "-C", str(target)], input=archive.stdout, check=True)
    return where


def child(argv: list[str], env: dict[str, str]) -> dict:
    """Wall and CPU seconds, peak RSS (MB) and stdout of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed (wait status {status})")
    return {"wall": time.perf_counter() - t0, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024, "out": out.decode().strip()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", default="1M", help="documents (1M, 200k; default 1M)")
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "gapbench-bench-data")
    ap.add_argument("--before", default=BEFORE, help=f"the commit measured as before (default {BEFORE})")
    ap.add_argument("--bm25", action="store_true", help="also time a cold `gapbench run -r bm25` before and after")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_scale

    n = size(args.docs)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    folder = bench_scale.dataset(n, 0, args.data_dir)  # made once, kept by (size, seed) as bench_scale keeps it
    corpus = folder / "corpus.jsonl"
    print(f"start: {load_note()}")
    print(f"bench_corpus_read: {corpus} ({corpus.stat().st_size / 1e6:.0f} MB, {n:,} documents); before = "
          f"{args.before}, after = this checkout")
    with tempfile.TemporaryDirectory(prefix="gapbench-read-") as tmp:
        tmp = Path(tmp)
        old = old_tree(args.before, tmp / "old")
        envs = {"before": {**os.environ, "PYTHONPATH": str(old)}, "after": dict(os.environ)}
        results, folders = {}, {}
        for side in ("before", "after"):
            m = child([sys.executable, "-c", CONVERT, str(corpus), str(tmp / f"corpora-{side}")], envs[side])
            results[side], folders[side] = m, Path(m["out"].splitlines()[-1])
            print(f"  convert {side:<6} wall {m['wall']:6.1f} s  cpu {m['cpu']:6.1f} s  peak RSS {m['rss_mb']:5.0f} MB"
                  f"  ({load_note()})", flush=True)
        same = all((folders["before"] / f).read_bytes() == (folders["after"] / f).read_bytes() for f in FILES)
        fingerprint = json.loads((folders["after"] / "meta.json").read_text())["fingerprint"]
        print(f"compact files byte-identical: {same}; fingerprint {fingerprint[:16]}")
        ratio = results["after"]["cpu"] / results["before"]["cpu"]
        print(f"RATIO conversion CPU after / before = {results['after']['cpu']:.1f} / {results['before']['cpu']:.1f} "
              f"= {ratio:.2f} ({1 / ratio:.1f}x less); {n / results['after']['cpu']:,.0f} documents per CPU second")
        if args.bm25:
            for side in ("before", "after"):
                env = {**envs[side], "GAPBENCH_HOME": str(tmp / f"home-{side}"), "GAPBENCH_PROGRESS": "off"}
                m = child([sys.executable, "-m", "gapbench", "run", str(folder), "-r", "bm25", "--k", "1000",
                           "-m", "nDCG@10", "--json"], env)
                ndcg = json.loads(m["out"].splitlines()[-1])["measures"]["nDCG@10"]
                results[f"bm25 {side}"] = m
                print(f"  bm25 cold {side:<6} wall {m['wall']:6.1f} s  cpu {m['cpu']:6.1f} s  peak RSS "
                      f"{m['rss_mb']:5.0f} MB  nDCG@10 {ndcg:.4f}  ({load_note()})", flush=True)
            after, before = results["bm25 after"]["cpu"], results["bm25 before"]["cpu"]
            print(f"RATIO bm25 cold run CPU after / before = {after:.1f} / {before:.1f} = {after / before:.2f}")
    print(f"end: {load_note()}")
    print(f"{'PASS' if same and ratio <= 0.5 else 'MISS'}: the conversion takes at most half the CPU it took, with "
          "byte-identical files")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
