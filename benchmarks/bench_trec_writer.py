"""The TREC run writer's formatting: lines per second of the column-wise writer (issue 46) beside the f-string writer
it replaced, on a run shaped as ImpliRet wknow's dense run (1,500 queries x 1,000 documents, float32 cosines).

Both sides format the same Run in this process (no gzip: its level and bytes are unchanged), timed by CPU time
(``time.process_time``), the median of ``--reps``; the texts must be equal. Target: at least 1M lines per second on
one core.

    python benchmarks/bench_trec_writer.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from _common import load_note  # benchmarks/ is on sys.path when a script runs

TARGET = 1_000_000


def reference(run, tag: str) -> str:
    """The writer before issue 46: one f-string per line, a join per query."""
    end = f" {tag}\n"
    return "".join("".join([f"{qid} Q0 {did} {i} {score!r}{end}" for i, (did, score) in enumerate(ranking, 1)])
                   for qid, ranking in run.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1500)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    from gapbench.formats import TREC_BLOCK_LINES, trec_lines
    from gapbench.types import Run

    rng = np.random.default_rng(0)
    rankings = {}
    for q in range(args.queries):
        docs = rng.choice(1_000_000, args.k, replace=False)
        scores = np.sort(rng.random(args.k, dtype=np.float32))[::-1].astype(np.float64)
        rankings[f"q{q}"] = tuple(zip((f"doc{d}" for d in docs.tolist()), scores.tolist()))
    run = Run(rankings, "dense", _sorted=True)
    items, lines = list(run.items()), args.queries * args.k
    per_block = max(1, TREC_BLOCK_LINES // args.k)

    def column_wise() -> str:
        return "".join(trec_lines(items[i:i + per_block], " dense\n") for i in range(0, len(items), per_block))

    print(f"start: {load_note()}")
    times = {}
    for name, write in (("f-string", lambda: reference(run, "dense")), ("column-wise", column_wise)):
        spent = []
        for _ in range(args.reps):
            t0 = time.process_time()
            text = write()
            spent.append(time.process_time() - t0)
        times[name] = (statistics.median(spent), text)
        print(f"  {name:<12} {times[name][0]:6.2f} s CPU  {lines / times[name][0]:12,.0f} lines/s  ({load_note()})")
    same = times["f-string"][1] == times["column-wise"][1]
    speed = lines / times["column-wise"][0]
    print(f"same text: {same}; {lines:,} lines, {len(times['column-wise'][1]) / 1e6:.0f} MB")
    print(f"RATIO f-string / column-wise CPU = {times['f-string'][0]:.2f} / {times['column-wise'][0]:.2f} = "
          f"{times['f-string'][0] / times['column-wise'][0]:.1f}x")
    print(f"end: {load_note()}")
    print(f"{'PASS' if same and speed >= TARGET else 'MISS'}: {speed:,.0f} lines/s on one core (target "
          f"{TARGET:,})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
