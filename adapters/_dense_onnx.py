"""``dense:backend=onnx``: the model exported once to ONNX, kept in gapbench's cache, run by ONNX Runtime on the CPU.

The export is the model's own Transformer and Pooling modules traced together (``torch.onnx.export``, dynamic batch
and sequence axes), so pooling runs inside the graph and only the pooled vectors leave it; normalising stays outside,
as on the torch path. It is written under ``cache/onnx/<key>/`` where the key covers the model (its name, revision and
files' digest), the export's settings (opset, quantisation) and this module's export version: a second run, in any
process, loads it without exporting. For BERT-family models the traced graph (attention traced in its eager form) is
fused by ONNX Runtime's transformer optimiser (Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu)
before it is kept or quantised (``backend=openvino`` keeps the graph as traced instead, under its own key: see
:mod:`gapbench.adapters._dense_openvino`). ``quantize=int8`` adds ONNX Runtime's dynamic int8 quantisation of that
export (``onnxruntime.quantization.quantize_dynamic``, weights int8 per channel, activations quantised per batch at run
time: the method sentence-transformers' ``export_dynamic_quantized_onnx_model`` applies through optimum).

Texts go through the same loop as the fast encoder (:class:`~gapbench.adapters._dense_fast.FastEncoder`): tokenised
once in threads, sorted by token count, cut into batches by padded tokens, and the session runs with one intra-op
thread per core the process may use.

Why not sentence-transformers' ``backend="onnx"``: it loads through optimum-onnx, whose releases (0.1.0 at most)
require transformers < 4.58, while gapbench's dense extra runs transformers 5; the exported graph and ONNX Runtime are
the same either way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from gapbench.cache import cache_dir
from gapbench.errors import GapbenchError, MissingDependencyError
from gapbench.progress import say

from ._dense_fast import FastEncoder, Tokens, cores, padded

EXPORT_VERSION = 3  # bump when the exported graph changes, so older exports are not reused
OPSET = 17
MODEL_FILE = "model.onnx"
# padded tokens per batch: smaller than the torch CPU path's 16,384, as attention's (tokens x tokens) scores per head
# then stay in the CPU's caches (measured on 2 AVX2 cores: float32 about 15% less CPU time than at 16,384)
BATCH_TOKENS = 4_096


def require_onnxruntime() -> Any:
    """The ``onnxruntime`` module, or a :class:`MissingDependencyError` naming the ``onnx`` extra."""
    try:
        import onnxruntime  # type: ignore[import-untyped]  # no stubs, no py.typed
    except ImportError:
        raise MissingDependencyError("onnxruntime", "onnx", "dense:backend=onnx") from None
    return onnxruntime


def export_key(identity: dict[str, Any], quantize: str, fuse: bool = True) -> str:
    """The cache key of an export: the model's identity (name, revision, files' digest) and the export's settings
    (the graph as traced, for OpenVINO, has its own key; ONNX Runtime's fused graph keeps the key it always had)."""
    payload = {**identity, **_settings(quantize, fuse)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def _settings(quantize: str, fuse: bool) -> dict[str, Any]:
    return {"quantize": quantize, "opset": OPSET, "export_version": EXPORT_VERSION, **({} if fuse else
                                                                                         {"graph": "traced"})}


class _Graph:
    """The traced part of the model: Transformer then Pooling; token ids, mask (and types) in, pooled vectors out."""

    @staticmethod
    def module(model: Any, with_types: bool) -> Any:
        import torch

        class Traced(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.transformer, self.pooling = model[0].auto_model, model[1]

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
                kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
                if token_type_ids is not None:
                    kwargs["token_type_ids"] = token_type_ids
                tokens = self.transformer(**kwargs, return_dict=True).last_hidden_state
                return self.pooling({"token_embeddings": tokens, "attention_mask": attention_mask})[
                    "sentence_embedding"]

        return Traced().eval()


def _export(model: Any, with_types: bool, target: Path) -> None:
    """Trace ``model`` (Transformer + Pooling) to ``target`` in float32."""
    import torch

    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_types else [])
    # an example with padding (texts of two lengths, by the model's own tokenizer): a mask of ones only could let the
    # attention code leave the mask out of the trace
    features = model.tokenize(["a passage of several words to encode", "a word"])
    ids, mask = features["input_ids"], features["attention_mask"]
    if bool(mask.all()):
        raise GapbenchError("dense: backend=onnx needs a tokenizer that pads a batch (this one did not).")
    example = (ids, mask, torch.zeros_like(ids))[: len(names)]
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    axes["sentence_embedding"] = {0: "batch"}
    # the tracer's warnings (a mask branch taken as a constant, advanced indexing spelt in several ops) are about
    # inputs unlike the example; tests/test_dense_onnx.py checks the graph against torch on real texts of many lengths
    # attention traced in its eager form (matmul, softmax), the pattern ONNX Runtime's transformer optimiser fuses into
    # one Attention node (scaled_dot_product_attention traces into a graph it does not recognise)
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings(), _eager_attention(model):
        warnings.simplefilter("ignore")
        torch.onnx.export(_Graph.module(model, with_types), example, str(target), input_names=names,
                          output_names=["sentence_embedding"], dynamic_axes=axes, opset_version=OPSET,
                          dynamo=False)


@contextmanager
def _eager_attention(model: Any) -> Iterator[None]:
    """The model's Transformer with eager attention while inside, its own attention again after."""
    auto = model[0].auto_model
    config = getattr(auto, "config", None)
    before = getattr(config, "_attn_implementation", None)
    switch = getattr(auto, "set_attn_implementation", None)
    if before in (None, "eager") or switch is None:  # nothing to switch, or a model that cannot say
        yield
        return
    switch("eager")
    try:
        yield
    finally:
        switch(before)


BERT_FAMILY = {"bert", "roberta", "xlm-roberta"}  # the encoders ONNX Runtime's optimiser fuses as model_type="bert"


def _optimize(source: Path, target: Path, config: Any) -> bool:
    """ONNX Runtime's transformer optimiser on ``source`` into ``target`` (attention, embedding + LayerNorm, skip +
    LayerNorm and bias + GELU each fused into one node); False, and nothing written, for a model outside the BERT
    family, whose export is used as traced."""
    if getattr(config, "model_type", None) not in BERT_FAMILY:
        return False
    try:
        from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]
    except ImportError:
        raise MissingDependencyError("onnxruntime", "onnx", "dense:backend=onnx") from None
    heads, hidden = (int(getattr(config, name, 0) or 0) for name in ("num_attention_heads", "hidden_size"))
    optimize_model(str(source), model_type="bert", num_heads=heads, hidden_size=hidden).save_model_to_file(str(target))
    return True


def _quantize(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic int8 quantisation of ``source`` (weights int8 per channel) into ``target``."""
    try:
        from onnx import TensorProto
        from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]
    except ImportError:
        raise MissingDependencyError("onnx", "onnx", "dense:backend=onnx,quantize=int8") from None
    root = logging.getLogger()  # ORT advises on the root logger to pre-process the model (for static quantisation)
    advice = _Drop("pre-processing before quantization")
    root.addFilter(advice)
    try:
        # the fused nodes (ONNX Runtime's own operators) leave shape inference without their outputs' type: float32
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        root.removeFilter(advice)


class _Drop(logging.Filter):
    """Drops log records whose message holds ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def exported_model(model: Any, identity: dict[str, Any], quantize: str, with_types: bool,
                   fuse: bool = True) -> tuple[Path, bool]:
    """The export of ``model`` in gapbench's cache, made now if it is not there: ``(path, made_now)``.

    ``fuse=False`` keeps the graph as traced (standard ONNX operators only, for OpenVINO, which fuses it itself);
    otherwise BERT-family graphs are fused by ONNX Runtime's optimiser. Written into a temporary folder beside its
    place and renamed into it, so a crash leaves no half export and two processes exporting at once both end with one
    whole export."""
    if fuse or quantize != "none":
        require_onnxruntime()
    key = export_key(identity, quantize, fuse)
    folder = cache_dir("onnx") / key
    path = folder / MODEL_FILE
    if path.is_file():
        return path, False
    folder.parent.mkdir(parents=True, exist_ok=True)
    name = identity.get("model", "the model")
    flavour = " (int8)" if quantize == "int8" else "" if fuse else " (the graph as traced, for OpenVINO)"
    say(f"dense: exporting {name} to ONNX{flavour} once; kept in {folder}")
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    try:
        plain = work / "traced.onnx"
        try:
            _export(model, with_types, plain)
        except Exception as exc:  # the tracer's errors are many kinds; the message says which model and why
            raise GapbenchError(
                f"dense: cannot export {name!r} to ONNX ({type(exc).__name__}: {(str(exc) or '-').splitlines()[0]}). "
                "Use dense:backend=torch for this model.") from exc
        fused = work / "fused.onnx"
        config = getattr(model[0].auto_model, "config", None)
        graph = fused if fuse and _optimize(plain, fused, config) else plain
        if quantize == "int8":
            _quantize(graph, work / MODEL_FILE)
        else:
            graph.rename(work / MODEL_FILE)
        for extra in work.iterdir():
            if extra.name != MODEL_FILE:
                extra.unlink()
        (work / "export.json").write_text(json.dumps({**identity, **_settings(quantize, fuse)}, indent=1,
                                                     sort_keys=True))
        try:
            work.rename(folder)
        except OSError:  # another process put its export there first: keep that one
            if not path.is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    say(f"dense: ONNX export done in {time.perf_counter() - started:.1f} s")
    return path, True


class GraphEncoder(FastEncoder):
    """The fast encoder's tokenising and batching feeding an exported graph whose inputs are named ``inputs``:
    the base of the ONNX Runtime and OpenVINO encoders."""

    inputs: list[str]

    def _arrays(self, ids: Tokens, rows: np.ndarray) -> dict[str, np.ndarray]:
        input_ids, mask = padded(ids, rows, self.pad_id, self.pad_left)
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        return {name: feed[name] for name in self.inputs}

    @staticmethod
    def _assemble(outs: list[np.ndarray], batches: list[np.ndarray], normalize: bool) -> np.ndarray:
        """The batches' pooled vectors back in the texts' order, as float32, L2-normalised when ``normalize``."""
        flat = np.concatenate(outs).astype(np.float32, copy=False)
        if normalize:
            flat = flat / np.maximum(np.linalg.norm(flat, axis=1, keepdims=True), 1e-12)
        out = np.empty_like(flat)
        out[np.concatenate(batches)] = flat
        return out


class OnnxEncoder(GraphEncoder):
    """The fast encoder's batches run by an ONNX Runtime session of the exported model (CPU)."""

    def __init__(self, model: Any, path: Path, batch_tokens: int | None = None, threads: int | None = None) -> None:
        super().__init__(model, batch_tokens or BATCH_TOKENS)
        ort = require_onnxruntime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or cores()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # threads that wait for work sleep instead of spinning: on a few shared cores spinning burns the CPU time
        # the other thread (or another process) needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.path = path

    def encode(self, texts: list[str], *, normalize: bool = True,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
        """float32 vectors of ``texts`` in the given order; ``progress(n)`` after each batch."""
        ids = self.tokenize(texts)
        batches = self.batches(ids)
        outs = []
        for rows in batches:
            outs.append(np.asarray(self.session.run(None, self._arrays(ids, rows))[0]))
            if progress:
                progress(len(rows))
        return self._assemble(outs, batches, normalize)
