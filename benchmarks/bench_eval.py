"""Evaluation: ``gapbench.evaluate`` against raw pytrec_eval, in one process.

Synthetic data (seeded): Q queries x D ranked documents with random scores rounded to 3 decimals (so there are score
ties, which exercises the tie rule), and graded qrels with ~10 judged documents per query (grades 0-2, about 70% of
them among the ranked documents; every query gets at least one positive judgement so both tools score the same query
set).

Raw side:      pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "recip_rank"}).evaluate(run)
gapbench side: gapbench.evaluate(run, qrels, ["nDCG@10", "R@100", "RR"])
  - as a user calls it: plain dict run and dict qrels, default arguments, and the confidence intervals read (they are
    computed lazily on first read, 1000 bootstrap resamples, as print(result) does);
  - the same call without reading the CIs (so no bootstrap runs);
  - with a prebuilt gapbench Run and Qrels (construction not timed), with and without the bootstrap.

Each variant is repeated (interleaved with the raw side) and the best time counts; times are taken as this process's
CPU time (all of it single-threaded, so steadier than wall time on a shared machine; wall time is printed too). Target: gapbench / raw <= 1.5 for the
user-facing call. Mean nDCG@10 (and the other two measures, per query) must agree to 1e-9.

    python benchmarks/bench_eval.py                       # 5000 queries x 100 docs
    python benchmarks/bench_eval.py --queries 500 --reps 2   # small
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
os.environ["GAPBENCH_HOME"] = _HOME.name

import numpy as np  # noqa: E402


from _common import load_note  # noqa: E402  (benchmarks/ is on sys.path when a script runs)

TARGET = 1.5
RAW_MEASURES = {"ndcg_cut.10", "recall.100", "recip_rank"}
GB_MEASURES = ["nDCG@10", "R@100", "RR"]
PAIRS = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100", "RR": "recip_rank"}


def make_data(n_queries: int, depth: int, n_docs: int, judged: int, seed: int):
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    n_in = int(round(judged * 0.7))
    for i in range(n_queries):
        qid = f"q{i}"
        docs = rng.choice(n_docs, size=depth + judged, replace=False)
        ranked = docs[:depth]
        scores = np.round(rng.random(depth), 3)
        run[qid] = {f"d{d}": float(s) for d, s in zip(ranked, scores)}
        picked = list(rng.choice(ranked, size=n_in, replace=False)) + list(docs[depth : depth + judged - n_in])
        grades = rng.integers(0, 3, size=len(picked))
        if not (grades > 0).any():
            grades[rng.integers(len(grades))] = int(rng.integers(1, 3))
        qrels[qid] = {f"d{d}": int(g) for d, g in zip(picked, grades)}
    return run, qrels


def raw_eval(run, qrels):
    import pytrec_eval

    return pytrec_eval.RelevanceEvaluator(qrels, RAW_MEASURES).evaluate(run)


def timed(fn, *args, **kw):
    """(wall seconds, CPU seconds of this process, result); everything timed here is single-threaded."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t0, time.process_time() - c0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=5_000)
    ap.add_argument("--depth", type=int, default=100, help="ranked documents per query")
    ap.add_argument("--docs", type=int, default=50_000, help="size of the doc-id pool")
    ap.add_argument("--judged", type=int, default=10, help="judged documents per query")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"start: {load_note()}")

    import ir_measures
    import pytrec_eval  # noqa: F401

    import gapbench
    from gapbench.types import Qrels, Run

    t0 = time.perf_counter()
    run, qrels = make_data(args.queries, args.depth, args.docs, args.judged, args.seed)
    gen_s = time.perf_counter() - t0
    n_pairs = sum(len(r) for r in run.values())
    n_judg = sum(len(r) for r in qrels.values())
    print(f"bench_eval: {args.queries} queries x {args.depth} docs ({n_pairs} run rows), {n_judg} judgements "
          f"(grades 0-2), seed {args.seed} (data generated in {gen_s:.1f}s)")
    print(f"python {platform.python_version()}, gapbench {gapbench.__version__}, ir_measures {ir_measures.__version__}, "
          f"numpy {np.__version__}, cpus {os.cpu_count()}")

    t_build, _, (run_obj, qrels_obj) = timed(lambda: (Run(run), Qrels(qrels)))
    print(f"building gapbench Run + Qrels from the dicts: {t_build:.3f} s (not timed in the 'prebuilt' variants)")

    def gb(run_in, qrels_in, read_ci: bool):
        res = gapbench.evaluate(run_in, qrels_in, GB_MEASURES)
        if read_ci:
            res.ci  # noqa: B018 - bootstrap CIs (1000 resamples by default), what print(result) shows
        return res

    variants = {
        "raw pytrec_eval": lambda: raw_eval(run, qrels),
        "gapbench dict, default + CIs read": lambda: gb(run, qrels, True),
        "gapbench dict, default, CIs not read": lambda: gb(run, qrels, False),
        "gapbench prebuilt Run+Qrels, default + CIs read": lambda: gb(run_obj, qrels_obj, True),
        "gapbench prebuilt Run+Qrels, CIs not read": lambda: gb(run_obj, qrels_obj, False),
    }
    short = dict(zip(variants, ["raw", "gb dict+CI", "gb dict", "gb prebuilt+CI", "gb prebuilt"]))
    times: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    outs: dict[str, object] = {}
    names = list(variants)
    for rep in range(args.reps):
        order = names if rep % 2 == 0 else names[::-1]
        for name in order:
            t, c, outs[name] = timed(variants[name])
            times[name].append(t)
            cpu[name].append(c)
        print(f"  rep {rep + 1} (cpu s): " + ", ".join(f"{short[n]} {cpu[n][-1]:.3f}" for n in names))

    # agreement
    raw = outs["raw pytrec_eval"]
    res = outs["gapbench dict, default + CIs read"]
    qids = sorted(raw)
    worst = 0.0
    for gm, rm in PAIRS.items():
        for q in qids:
            worst = max(worst, abs(res.per_query[gm][q] - raw[q][rm]))
    raw_mean = sum(raw[q]["ndcg_cut_10"] for q in qids) / len(qids)
    gb_mean = res.means["nDCG@10"]
    same_set = set(qids) == set(res.query_ids)
    ok = abs(raw_mean - gb_mean) <= 1e-9 and worst <= 1e-9 and same_set
    print(f"mean nDCG@10: raw {raw_mean:.12f}  gapbench {gb_mean:.12f}  |diff| {abs(raw_mean - gb_mean):.1e}; "
          f"largest per-query difference over the 3 measures {worst:.1e}; same query set: {same_set} "
          f"-> {'AGREE (<= 1e-9)' if ok else 'DISAGREE'}")
    print(f"gapbench means: " + ", ".join(f"{m} {res.means[m]:.4f} CI [{res.ci[m][0]:.4f}, {res.ci[m][1]:.4f}]"
                                          for m in GB_MEASURES))

    wall = {k: min(v) for k, v in times.items()}
    best = {k: min(v) for k, v in cpu.items()}
    base = best["raw pytrec_eval"]
    print(f"best of {args.reps} (cpu time, which decides PASS/MISS; wall time in brackets):")
    for name in names:
        extra = "" if name.startswith("raw") else (f"   RATIO gapbench/raw = {best[name] / base:.3f} "
                                                   f"(wall {wall[name] / wall['raw pytrec_eval']:.3f})")
        print(f"  {name:48s} {best[name]:7.3f} s ({wall[name]:.3f} s){extra}")
    main_ratio = best["gapbench dict, default + CIs read"] / base
    no_boot = best["gapbench dict, default, CIs not read"] / base
    pre = best["gapbench prebuilt Run+Qrels, default + CIs read"] / base
    pre_no_boot = best["gapbench prebuilt Run+Qrels, CIs not read"] / base
    print(f"target <= {TARGET} (user-facing call: dict run and qrels, default arguments, CIs read as print(result) does)")
    print(f"end: {load_note()}")
    print(f"{'PASS' if main_ratio <= TARGET else 'MISS'}: eval ratio {main_ratio:.3f} (target <= {TARGET}); "
          f"without bootstrap {no_boot:.3f} ({'PASS' if no_boot <= TARGET else 'MISS'}); prebuilt Run+Qrels "
          f"{pre:.3f} (without bootstrap {pre_no_boot:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
