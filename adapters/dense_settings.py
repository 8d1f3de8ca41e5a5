"""The settings of the ``dense`` retriever (``dense:model=NAME,batch_size=32``), and the torch device type that
``colbert`` shares: one pydantic model on the verbs' contract (:class:`gapbench.settings.Settings`)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from gapbench.contract import BatchSize, ModelName, Positive, Text
from gapbench.settings import Settings

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEVICES = r"(cpu|cuda|mps|xpu)(:[0-9]+)?"


def _device(value: str) -> str:
    if not re.fullmatch(DEVICES, value):
        raise ValueError("must be cpu, cuda, cuda:N, mps or xpu")
    return value


Device = Annotated[str, AfterValidator(_device), Field(json_schema_extra={"accepts": "cpu, cuda, cuda:N, mps or xpu"})]
"""A torch device: cpu, cuda, cuda:N, mps or xpu."""

class DenseSettings(Settings):
    """The settings of ``dense`` (``dense:model=NAME,batch_size=32``)."""

    model: ModelName = Field(DEFAULT_MODEL, description="A sentence-transformers model: a hub name or a local "
                                                        "folder (minilm: the offline MiniLM).")
    revision: Text | None = Field(None, description="The model's pinned hub revision; none: the latest.")
    query_prompt: str = Field("", description="Text put before each query.")
    doc_prompt: str = Field("", description="Text put before each document.")
    batch_size: BatchSize = Field(64, description="Texts encoded at once.")
    max_length: Positive | None = Field(None, description="Tokens kept per text; none: the model's own limit.")
    device: Device = Field("cpu", description="The torch device that encodes.")
    normalize: bool = Field(True, description="L2-normalise the vectors (cosine similarity).")
    use_title: bool = Field(True, description="Encode the title before the text.")
    chunk_size: BatchSize = Field(2048, description="Documents per cached chunk of vectors.")
    cache: bool = Field(True, description="Keep the vectors in gapbench's cache for the next run.")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="Weights' precision (with backend=openvino: the precision OpenVINO computes in, float32 "
                            "or bfloat16); auto: float16 on CUDA, float32 elsewhere.")
    encoder: Literal["auto", "fast", "sentence-transformers"] = Field(
        "auto", description="The encoding loop: gapbench's length-sorted one (fast) or sentence-transformers'.")
    batch_tokens: BatchSize | None = Field(None, description="Padded tokens per batch of the fast encoder; none: "
                                                                "65,536 on CUDA, 16,384 elsewhere, 4,096 with "
                                                                "backend=onnx, 2,048 with backend=openvino.")
    compile: bool = Field(
        False, description="Run the fast encoder's model through torch.compile (dynamic shapes, batch widths rounded "
                           "up to a multiple of 8); the first batches wait for the compile. Vectors equal the "
                           "uncompiled ones' within float tolerance (the same cache key). Selects encoder=fast.")
    backend: Literal["torch", "onnx", "openvino"] = Field(
        "torch", description="What runs the model: torch, onnx (exported once to ONNX, kept in the cache, run by "
                             "ONNX Runtime on the CPU; pip install 'gapbench[onnx]') or openvino (the same export run "
                             "by OpenVINO on the CPU; pip install 'gapbench[openvino]').")
    quantize: Literal["none", "int8"] = Field(
        "none", description="With backend=onnx: int8 runs ONNX Runtime's dynamic int8 quantisation of the export "
                            "(faster, vectors differ: its own cache key).")

    @model_validator(mode="after")
    def _backend_fits(self) -> DenseSettings:
        if self.quantize != "none" and self.backend != "onnx":
            raise ValueError(f"quantize={self.quantize} needs backend=onnx (backend is {self.backend})")
        if self.backend != "torch" and not self.device.startswith("cpu"):
            raise ValueError(f"backend={self.backend} runs on the CPU (device is {self.device}); use device=cpu, or "
                             "backend=torch on a GPU")
        if self.compile and (self.encoder == "sentence-transformers" or self.backend != "torch"):
            raise ValueError(f"compile=true compiles gapbench's fast encoder (encoder is {self.encoder}, backend is "
                             f"{self.backend}); use encoder=fast (or auto) with backend=torch, or compile=false")
        if self.backend == "onnx" and self.dtype not in ("auto", "float32"):
            raise ValueError(f"backend=onnx exports float32 weights (dtype is {self.dtype}); use quantize=int8 for "
                             "a smaller, faster model")
        if self.backend == "openvino" and self.dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"backend=openvino computes in float32 or bfloat16 (dtype is {self.dtype}); use "
                             "dtype=float32 (or auto), or dtype=bfloat16 on a CPU with bfloat16 instructions")
        return self
