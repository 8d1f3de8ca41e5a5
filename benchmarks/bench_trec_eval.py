"""``gapbench trec_eval -q -m all_trec qrels run`` against the trec_eval binary on the same large run (issue 42).

Synthetic data (seeded), written as TREC files: Q queries x D ranked documents (scores rounded to 3 decimals, so there
are ties) and graded qrels (grades 0-3, ~30 judged documents per query, most of them ranked). Both tools run as a user
runs them, a fresh process each, output to a file; the CPU time (user + system, of the child) and wall time of each
are printed, and, with a binary, whether the two outputs are the same bytes. Without ``--trec-eval`` the script times
gapbench alone. In one process it also splits gapbench's time into reading the two files and evaluating.

    python benchmarks/bench_trec_eval.py                                    # 2,000 x 1,000, gapbench alone
    python benchmarks/bench_trec_eval.py --trec-eval /path/to/trec_eval     # beside the binary
    python benchmarks/bench_trec_eval.py --queries 100000 --trec-eval ...   # the issue's size
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from _common import load_note  # noqa: E402  (benchmarks/ is on sys.path when a script runs)


def write_data(folder: str, n_queries: int, depth: int, judged: int, seed: int) -> tuple[str, str]:
    rng = np.random.default_rng(seed)
    run_path, qrels_path = os.path.join(folder, "run"), os.path.join(folder, "qrels")
    with open(run_path, "w") as run, open(qrels_path, "w") as qrels:
        for i in range(n_queries):
            docs = rng.choice(depth * 3, size=depth, replace=False)
            scores = np.round(rng.random(depth), 3)
            order = np.argsort(-scores, kind="stable")
            run.write("".join(f"q{i} Q0 d{docs[j]} {r + 1} {scores[j]:.3f} bench\n" for r, j in enumerate(order)))
            picked = np.concatenate([rng.choice(docs, size=judged * 2 // 3, replace=False),
                                     rng.choice(np.arange(depth * 3, depth * 4), size=judged // 3, replace=False)])
            grades = rng.integers(0, 4, size=len(picked))
            qrels.write("".join(f"q{i} 0 d{d} {g}\n" for d, g in zip(picked, grades)))
    return qrels_path, run_path


def timed(argv: list[str], out_path: str) -> dict[str, float]:
    """Run ``argv`` with stdout to ``out_path``: wall seconds, and the child's CPU seconds from os.wait4."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.execv(argv[0], argv)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"{' '.join(argv)} failed (wait status {status}); run it by hand to see why.")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime}


def phases(qrels_path: str, run_path: str) -> dict[str, float]:
    """gapbench's CPU seconds in one process: reading the two files, then evaluating and formatting."""
    from gapbench import trec_names
    from gapbench.evaluation import trec_eval_run
    from gapbench.formats import read_qrels, read_trec_run

    t0 = time.process_time()
    run = read_trec_run(run_path)
    qrels = read_qrels(qrels_path)
    t1 = time.process_time()
    result = trec_eval_run.run_trec_eval(run, qrels, trec_eval_run.measure_names(["all_trec"]))
    t2 = time.process_time()
    trec_names.trec_eval_lines(result.measures, result.per_query, result.summary, queries=True, texts=result.texts)
    t3 = time.process_time()
    return {"read": t1 - t0, "evaluate": t2 - t1, "format": t3 - t2}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--depth", type=int, default=1000)
    p.add_argument("--judged", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trec-eval", default=None, help="the trec_eval binary to time beside gapbench")
    p.add_argument("--no-phases", action="store_true", help="skip the in-process split of gapbench's time")
    args = p.parse_args()
    print(f"{args.queries:,} queries x {args.depth:,} documents, -q -m all_trec; {load_note()}")
    with tempfile.TemporaryDirectory(prefix="bench-trec-eval-") as folder:
        qrels_path, run_path = write_data(folder, args.queries, args.depth, args.judged, args.seed)
        flags = ["-q", "-m", "all_trec", qrels_path, run_path]
        ours = os.path.join(folder, "gapbench.out")
        g = timed([sys.executable, "-m", "gapbench", "trec_eval", *flags], ours)
        print(f"gapbench trec_eval: {g['cpu']:.1f} s CPU, {g['wall']:.1f} s wall")
        if args.trec_eval:
            theirs = os.path.join(folder, "trec_eval.out")
            t = timed([args.trec_eval, *flags], theirs)
            with open(ours, "rb") as a, open(theirs, "rb") as b:
                same = a.read() == b.read()
            print(f"trec_eval binary:   {t['cpu']:.1f} s CPU, {t['wall']:.1f} s wall")
            verdict = "byte-identical" if same else "DIFFER"
            print(f"gapbench / trec_eval CPU: {g['cpu'] / t['cpu']:.2f}; outputs {verdict}")
        if not args.no_phases:
            split = phases(qrels_path, run_path)
            print("gapbench in one process: " + ", ".join(f"{k} {v:.1f} s" for k, v in split.items()) + " (CPU)")


if __name__ == "__main__":
    main()
