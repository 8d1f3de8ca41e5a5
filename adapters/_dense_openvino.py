"""``dense:backend=openvino``: the model's ONNX export (kept in gapbench's cache) run by OpenVINO on the CPU.

The export is :mod:`gapbench.adapters._dense_onnx`'s, with the graph kept as traced (standard ONNX operators;
OpenVINO's CPU plugin fuses attention and the rest itself) under a cache key of its own. OpenVINO computes in the
precision it is told: float32 by default (``dense:dtype=float32`` or ``auto``), bfloat16 with ``dense:dtype=bfloat16``
on a CPU with bfloat16 instructions. The precision is always set, never left to OpenVINO: on CPUs with bfloat16
instructions its own default is bfloat16, whose vectors are not float32's.

Texts go through the fast encoder's tokenising and batching (:class:`~gapbench.adapters._dense_onnx.GraphEncoder`) and
the batches run in OpenVINO's throughput mode: several inference requests in flight (OpenVINO's optimal number for
the machine: one per stream, each stream on its own cores), so no core waits for another's part of a batch.

Why not sentence-transformers' ``backend="openvino"``: it loads through optimum-intel, which brings nncf, torchvision
and openvino-tokenizers with it and exports through optimum; the graph OpenVINO runs is the same either way.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from gapbench.errors import GapbenchError, MissingDependencyError

from ._dense_fast import cores
from ._dense_onnx import GraphEncoder

# padded tokens per batch (measured on 2 Zen 4 cores, MiniLM float32: 1,024 and 2,048 alike, 4,096 about 4% slower,
# 8,192 about 6% slower)
BATCH_TOKENS = 2_048
PRECISIONS = {"float32": "f32", "bfloat16": "bf16"}


def require_openvino() -> Any:
    """The ``openvino`` module, or a :class:`MissingDependencyError` naming the ``openvino`` extra."""
    try:
        import openvino  # type: ignore[import-untyped]  # no stubs for its compiled core
    except ImportError:
        raise MissingDependencyError("openvino", "openvino", "dense:backend=openvino") from None
    return openvino


def has_bfloat16(core: Any) -> bool:
    """Whether OpenVINO's CPU plugin computes bfloat16 natively on this CPU (AVX-512 BF16 or AMX)."""
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


class OpenVinoEncoder(GraphEncoder):
    """The fast encoder's batches run by OpenVINO's CPU plugin on the traced export, several requests in flight."""

    def __init__(self, model: Any, path: Path, dtype: str = "float32", batch_tokens: int | None = None,
                 threads: int | None = None) -> None:
        super().__init__(model, batch_tokens or BATCH_TOKENS)
        ov = require_openvino()
        if dtype not in PRECISIONS:
            raise GapbenchError(f"dense: backend=openvino computes in float32 or bfloat16, not {dtype}.")
        core = ov.Core()
        if dtype == "bfloat16" and not has_bfloat16(core):
            raise GapbenchError(
                "dense: dtype=bfloat16 with backend=openvino needs a CPU with bfloat16 instructions (AVX-512 BF16 or "
                "AMX); this CPU has none, and OpenVINO would compute in float32 under bfloat16's cache key. Use "
                "dense:dtype=float32.")
        config = {"INFERENCE_PRECISION_HINT": PRECISIONS[dtype], "PERFORMANCE_HINT": "THROUGHPUT",
                  "INFERENCE_NUM_THREADS": threads or cores()}
        self.compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
        requests = max(1, int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        self._requests = [self.compiled.create_infer_request() for _ in range(requests)]
        self.inputs = [port.get_any_name() for port in self.compiled.inputs]
        self.precision = self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()  # f32 or bf16
        self.path = path

    def encode(self, texts: list[str], *, normalize: bool = True,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """float32 vectors of ``texts`` in the given order; ``progress(n)`` as batches finish.

        One Python thread per inference request, each running its batches with ``infer`` (which releases the GIL):
        OpenVINO never calls back into Python from its own threads (an ``AsyncInferQueue`` callback can deadlock
        with the interpreter when a compiled model is freed)."""
        ids = self.tokenize(texts)
        batches = self.batches(ids)
        free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for request in self._requests:
            free.put(request)

        def run(rows: np.ndarray) -> np.ndarray:
            feed = self._arrays(ids, rows)
            request = free.get()
            try:
                result = request.infer(feed)
                return np.array(result[self.compiled.outputs[0]], dtype=np.float32)  # a copy: the request is reused
            finally:
                free.put(request)

        with ThreadPoolExecutor(max_workers=len(self._requests)) as pool:
            futures = {pool.submit(run, rows): len(rows) for rows in batches}
            if progress:
                for future in as_completed(futures):
                    progress(futures[future])
            outs = [future.result() for future in futures]
        return self._assemble(outs, batches, normalize)
