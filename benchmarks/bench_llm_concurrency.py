"""LLM client concurrency: N chat calls at concurrency C against a local OpenAI-compatible server answering in 100 ms.

The server is tests/llm_server.py (real HTTP on 127.0.0.1, in this process, a thread per connection) with a fixed
latency of 100 ms per request; the client is gapbench's ``LLMClient.chat_many`` with the response cache off, so every
request is an HTTP call. The ideal wall time is N x 0.1 s / C; the ratio wall / ideal counts the client's overhead
(thread pool, JSON, the openai package, retries bookkeeping) and the server's. One warm-up call (importing openai,
opening a connection) is not timed. Target: ratio <= 1.3 for every setting.

    python benchmarks/bench_llm_concurrency.py                       # N=64 C=4, N=256 C=16, N=512 C=32
    python benchmarks/bench_llm_concurrency.py --calls 128 --concurrency 8
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_HOME = tempfile.TemporaryDirectory(prefix="gapbench-bench-")
os.environ["GAPBENCH_HOME"] = _HOME.name
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from llm_server import LLMServer  # noqa: E402

from gapbench.llm.client import ChatRequest, LLMClient  # noqa: E402

TARGET = 1.3
LATENCY = 0.1


def run(n_calls: int, concurrency: int, reps: int) -> float:
    with LLMServer(latency=LATENCY) as srv:
        client = LLMClient(base_url=srv.base_url, model="bench", cache=False, concurrency=concurrency)
        client.chat("warm-up")
        best = float("inf")
        for rep in range(reps):
            reqs = [ChatRequest(f"request {rep}-{i}: rank nothing, just answer", tag=f"q{i % 50}")
                    for i in range(n_calls)]
            srv.reset_counts()
            start = time.perf_counter()
            out = client.chat_many(reqs)
            wall = time.perf_counter() - start
            assert len(out) == n_calls and srv.calls == n_calls, (len(out), srv.calls)
            assert srv.max_in_flight <= concurrency, srv.max_in_flight
            ideal = n_calls * LATENCY / concurrency
            print(f"  N={n_calls:4d} C={concurrency:3d} rep {rep + 1}: wall {wall:6.3f} s, ideal {ideal:6.3f} s, "
                  f"ratio {wall / ideal:5.3f}, server max in flight {srv.max_in_flight}")
            best = min(best, wall / ideal)
        client.close()
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, nargs="*", default=[64, 256, 512])
    ap.add_argument("--concurrency", type=int, nargs="*", default=[4, 16, 32])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if len(args.calls) != len(args.concurrency):
        ap.error("give as many --calls as --concurrency values")
    import openai

    from gapbench import __version__ as gb_version

    print(f"bench_llm_concurrency: server latency {LATENCY * 1000:.0f} ms per request, cache off, best of {args.reps}")
    print(f"python {platform.python_version()}, openai {openai.__version__}, gapbench {gb_version}, "
          f"cpus {os.cpu_count()}")
    failures = []
    for n, c in zip(args.calls, args.concurrency):
        ratio = run(n, c, args.reps)
        print(f"RATIO N={n} C={c}: wall / (N x {LATENCY} s / C) = {ratio:.3f}   target <= {TARGET}")
        if ratio > TARGET:
            failures.append(f"N={n} C={c} ratio {ratio:.3f}")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"PASS: every setting within wall / ideal <= {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
