"""Reading a BEIR corpus.jsonl: today's dict of Documents against the memory-mapped Arrow corpus (corpus_store).

Synthetic corpus: seeded documents of 20-120 made-up words (a Zipf-like vocabulary), with titles, written once as a
BEIR ``corpus.jsonl``. Each step runs in a fresh subprocess, which prints its wall time and its peak resident memory
(``VmHWM`` from /proc/self/status, the interpreter and imports included; the imports alone are printed as the
floor). Times leave the imports out:

    dict      read_jsonl_corpus(path, compact="never") and its fingerprint (what every run computes)
    convert   the first load_compact(path): stream, validate, write the Arrow file, hash and sort the ids
    mapped    the second load_compact(path): open the converted copy (memory-mapped)
    pass      mapped, then one iter_texts pass over every text, tie_keys() and 10,000 lookups by id

Targets: the mapped load holds far less than the dict; conversion runs at close to the dict reader's speed.

    python benchmarks/bench_corpus_store.py --docs 200000 1000000
    python benchmarks/bench_corpus_store.py --docs 10000000 --steps floor convert mapped pass
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

import numpy as np

from _common import load_note  # noqa: E402  (benchmarks/ is on sys.path when a script runs)

# (imports, timed code): imports are outside the timed part (pyarrow and numpy alone take a few tenths of a second)
STEPS = {
    "floor": ("import gapbench.formats, gapbench.corpus_store", "pass"),
    "dict": ("from gapbench.corpus_store import read_jsonl_corpus as r",
             "c = r(PATH, compact='never'); c.fingerprint"),
    "convert": ("from gapbench.corpus_store import load_compact as l", "c = l(PATH)"),
    "mapped": ("from gapbench.corpus_store import load_compact as l", "c = l(PATH); len(c)"),
    "pass": ("from gapbench.corpus_store import load_compact as l",
             "c = l(PATH)\n"
             "n = sum(len(b) for b in c.iter_texts(batch_size=8192)); k = c.tie_keys(); k.max()\n"
             "ids = c.ids_at(range(0, len(c), max(1, len(c) // 10000))); assert [c.position(d) for d in ids]"),
}
_PROBE = """
import json, time, sys
PATH = sys.argv[1]
{setup}
t0 = time.perf_counter()
{code}
wall = time.perf_counter() - t0
hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM'))
print(json.dumps({{"wall": wall, "rss_mb": hwm / 1024}}))
"""


def write_corpus(path: Path, n: int, seed: int = 13) -> None:
    rng = np.random.default_rng(seed)
    vocab = np.array(["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), rng.integers(3, 10)))
                      for _ in range(50_000)])
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    with open(path, "w", encoding="utf-8") as fh:
        for lo in range(0, n, 10_000):
            m = min(10_000, n - lo)
            lengths = rng.integers(20, 121, m)
            words = vocab[rng.choice(len(vocab), int(lengths.sum()) + 5 * m, p=p)].tolist()
            at = 0
            for i in range(m):
                title = " ".join(words[at:at + 5])
                text = " ".join(words[at + 5:at + 5 + lengths[i]])
                at += 5 + lengths[i]
                fh.write(json.dumps({"_id": f"doc{lo + i}", "title": title, "text": text, "metadata": {}}) + "\n")


def step(name: str, path: Path, home: str) -> dict:
    env = {**os.environ, "GAPBENCH_HOME": home, "HF_HUB_OFFLINE": "1"}
    setup, code = STEPS[name]
    out = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup, code=code), str(path)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--steps", nargs="+", choices=list(STEPS), default=list(STEPS),
                        help="leave out dict at 10M documents: it needs about 10 GB")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; {load_note()}")
    for n in args.docs:
        with tempfile.TemporaryDirectory(prefix="gapbench-bench-") as tmp:
            path = Path(tmp) / "corpus.jsonl"
            t0 = time.perf_counter()
            write_corpus(path, n)
            print(f"\n{n:,} documents, corpus.jsonl {path.stat().st_size / 2**20:,.0f} MiB "
                  f"(written in {time.perf_counter() - t0:.0f} s)")
            rows = {name: step(name, path, tmp) for name in args.steps}
            arrow = next(Path(tmp, "cache", "corpora").glob("*/docs.arrow")).stat().st_size
            print(f"  Arrow copy {arrow / 2**20:,.0f} MiB")
            for name, row in rows.items():
                print(f"  {name:8s} {row['wall']:8.2f} s   peak RSS {row['rss_mb']:8.0f} MiB")
            if not {"floor", "dict", "convert", "mapped"} <= rows.keys():
                continue
            d, c, m = rows["dict"], rows["convert"], rows["mapped"]
            print(f"  convert / dict time {c['wall'] / d['wall']:.2f}x; mapped / dict peak RSS "
                  f"{m['rss_mb'] / d['rss_mb']:.3f}x (above the floor: "
                  f"{(m['rss_mb'] - rows['floor']['rss_mb']) / (d['rss_mb'] - rows['floor']['rss_mb']):.4f}x); "
                  f"mapped load {m['wall'] / n * 1e6:.2f} s per million documents")


if __name__ == "__main__":
    main()
