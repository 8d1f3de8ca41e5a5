"""The gap on the embedded SmolLM2 (llama.cpp's single-slot server): LLM concurrency adapted vs fixed at 8.

The slow test's workload (tests/test_local_llm.py): impliret/multispeaker/wknow, 2 seeded queries, the bm25 top 5 as the
pool, the tournament with passages cut to 200 characters, answers stopped at their first line and at 64 tokens. One
llama.cpp server (``gapbench.llm.local.LocalServer``) serves both modes in turn, each with an empty response cache and
``concurrency=8``: once ``adaptive=True`` (the default), once ``adaptive=False``. Printed per mode: wall time, LLM calls
and requests, retries and failures, prompt and completion tokens, the lowest concurrency the pacer reached, and the
share of rankings completed by the fallback. Nothing here asserts on time: the machine is noisy, compare within a run.

    python benchmarks/bench_local_llm_gap.py                    # needs gapbench[local-llm]
    python benchmarks/bench_local_llm_gap.py --queries 3 --depth 10
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_HOME = tempfile.TemporaryDirectory(prefix="gapbench-bench-")
os.environ["GAPBENCH_HOME"] = _HOME.name

from gapbench.adapters.tournament import Tournament  # noqa: E402
from gapbench.analyses.gap import GapOptions, measure_gap_with  # noqa: E402
from gapbench.llm.client import LLMClient, LLMConfig  # noqa: E402
from gapbench.llm.local import LocalServer  # noqa: E402
from gapbench.retrieval import get_retriever, search_with  # noqa: E402
from gapbench.task import get_task  # noqa: E402
from gapbench.types import Queries  # noqa: E402

TASK = "impliret/multispeaker/wknow"


def one(server: LocalServer, data, run, qids, depth: int, adaptive: bool, timeout: float) -> dict:
    config = LLMConfig(base_url=server.base_url, model=server.model, concurrency=8, adaptive=adaptive,
                       max_tokens=64, stop=("\n",), timeout=timeout)
    with tempfile.TemporaryDirectory() as tmp:
        client = LLMClient(config, cache=os.path.join(tmp, "responses.sqlite"), api_key="local")
        verifier = Tournament(client=client, max_chars=200, concurrency=8)
        start = time.perf_counter()
        report = measure_gap_with(TASK, data, [run], verifier.rerank_pools, GapOptions(depth=depth, pool_sizes=()),
                                  query_ids=qids, calls=lambda: verifier.llm_calls)
        wall = time.perf_counter() - start
        usage, manifest = client.usage.total(), client.manifest()
        answers = verifier.answers
        client.close()
    return {"adaptive": adaptive, "wall_s": round(wall, 1), "calls": usage["calls"], "requests": usage["requests"],
            "retries": usage["retries"], "failures": usage["failures"], "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"], "lowest_concurrency": manifest["pacing"]["lowest"],
            "fallback_rate": answers["fallback_rate"], "verifier_standard": report.verifier_standard.value}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2)
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=120.0, help="LLMConfig.timeout: seconds without progress")
    args = ap.parse_args()
    data = get_task(TASK).load()
    qids = data.qrels.positive_queries()[: args.queries]
    bm25 = get_retriever("bm25")
    bm25.index(data.corpus)
    run = search_with(bm25, Queries(data.queries[q] for q in qids), args.depth, None)
    print(f"bench_local_llm_gap: {TASK}, {len(qids)} queries, depth {args.depth}, timeout {args.timeout:g} s, load average "
          f"{os.getloadavg()[0]:.2f}")
    with LocalServer() as server:
        for adaptive in (True, False):
            print(json.dumps(one(server, data, run, qids, args.depth, adaptive, args.timeout)))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
