"""Tournament reranking wall time against a local OpenAI-compatible server that answers in a fixed latency.

Target (issue: LLM tournament reranker): wall <= 1.3 x (calls x latency / concurrency), i.e. the reranker keeps
``concurrency`` calls in flight. Queries run in parallel; each query's rounds run in sequence.

    python benchmarks/bench_tournament.py [--queries 64] [--pool 100] [--latency 0.1] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


SERVER = """
import sys, time
from llm_server import LLMServer
with LLMServer(latency={latency}) as srv:
    print(srv.base_url, flush=True)
    while True:
        time.sleep(3600)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--pool", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()

    from gapbench.adapters.tournament import Tournament, tournament_calls
    from gapbench.llm.client import LLMClient, LLMConfig
    from gapbench.types import Corpus, Document, Queries, Query

    docs = [Document(f"d{i}", f"passage number {i} about topic {i % 17}") for i in range(args.pool * 4)]
    corpus = Corpus(docs)
    queries = Queries(Query(f"q{j}", f"what about topic {j % 17} number {j}") for j in range(args.queries))
    pools = {f"q{j}": [f"d{(j * 7 + i) % len(docs)}" for i in range(args.pool)] for j in range(args.queries)}
    expected_calls = sum(tournament_calls(len(p)) for p in pools.values())
    # The server runs in its own process, as a real endpoint does: in-process, its request handling would compete
    # with the client for the GIL and the benchmark would measure the test server, not the reranker.
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(latency=args.latency)], stdout=subprocess.PIPE, text=True,
        cwd=str(Path(__file__).resolve().parents[1] / "tests"),
    )
    try:
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            client = LLMClient(LLMConfig(base_url=base_url, model="judge", concurrency=args.concurrency),
                               cache=Path(tmp) / "c.sqlite", api_key="sk-bench")
            reranker = Tournament(client=client, concurrency=args.concurrency)
            t0 = time.perf_counter()
            reranker.rerank_pools(queries, pools, corpus)
            wall = time.perf_counter() - t0
            calls = int(client.usage.total()["calls"])
    finally:
        server.terminate()
        server.wait()
    in_flight = "n/a (server in another process)"
    ideal = calls * args.latency / args.concurrency
    ratio = wall / ideal
    print(f"bench_tournament: {args.queries} queries x pool {args.pool}, B=20 P=4 final=20, latency {args.latency}s, "
          f"concurrency {args.concurrency}")
    print(f"calls {calls} (analytic {expected_calls}), max in flight {in_flight}")
    print(f"wall {wall:.2f}s, ideal calls x latency / concurrency = {ideal:.2f}s")
    print(f"RATIO wall/ideal = {ratio:.3f}   target <= 1.3")
    print(("PASS" if ratio <= 1.3 else "MISS") + f": tournament concurrency ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
