"""LLM client on a single-slot server: N chat calls sent 8 at a time, adaptive concurrency vs fixed at 8.

The server is tests/llm_server.py with ``slots=1`` (real HTTP on 127.0.0.1, in this process): it serves one request at
a time in ``--service`` seconds while the others wait in its queue, as llama.cpp's server does. The client is
``LLMClient.chat_many`` with the cache off, ``concurrency=8`` and a per-attempt ``timeout`` shorter than the wait of
the eighth request in the queue (8 x service), once with ``adaptive=True`` and once with ``adaptive=False``. The ideal
wall time is N x service whatever the concurrency: the server is the bottleneck. Reported per mode: wall time, HTTP
calls (N when nothing timed out), retries, the most requests the server held at once and the share of requests that
found others queued ahead of them. Nothing here asserts on time.

    python benchmarks/bench_llm_single_slot.py                   # N=32, service 0.2 s, timeout 1.0 s
    python benchmarks/bench_llm_single_slot.py --calls 16 --service 0.5 --timeout 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_HOME = tempfile.TemporaryDirectory(prefix="gapbench-bench-")
os.environ["GAPBENCH_HOME"] = _HOME.name
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from llm_server import LLMServer  # noqa: E402

from gapbench.llm.client import LLMClient  # noqa: E402


def run(n_calls: int, service: float, timeout: float, adaptive: bool) -> dict:
    with LLMServer(slots=1, latency=service) as srv:
        client = LLMClient(base_url=srv.base_url, model="bench", cache=False, concurrency=8, timeout=timeout,
                           adaptive=adaptive, retry_wait=0.05, retry_wait_max=0.5)
        client.chat("warm-up")
        warm = client.usage.total()
        srv.reset_counts()
        start = time.perf_counter()
        out = client.chat_many([f"request {i}: rank nothing, just answer" for i in range(n_calls)])
        wall = time.perf_counter() - start
        assert len(out) == n_calls
        usage, arrivals = client.usage.total(), list(srv.arrivals)
        row = {"wall": wall, "calls": usage["calls"] - warm["calls"], "retries": usage["retries"] - warm["retries"],
               "max_in_flight": srv.max_in_flight, "queued": sum(a > 1 for a in arrivals) / len(arrivals), "pacing": client.manifest()["pacing"]}
        client.close()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=32)
    ap.add_argument("--service", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=1.0)
    args = ap.parse_args()
    print(f"bench_llm_single_slot: N={args.calls}, service {args.service} s, timeout {args.timeout} s, "
          f"ideal wall {args.calls * args.service:.2f} s, load average {os.getloadavg()[0]:.2f}")
    for adaptive in (True, False):
        r = run(args.calls, args.service, args.timeout, adaptive)
        print(f"  {'adaptive ' if adaptive else 'fixed at 8'}: wall {r['wall']:6.2f} s, calls {r['calls']:3d}, "
              f"retries {r['retries']:3d}, server max in flight {r['max_in_flight']}, "
              f"requests that queued {r['queued']:.0%}, pacing {r['pacing']}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
