"""dense:backend=openvino on the offline MiniLM: float32 vectors equal torch's in the texts' order (with one text a
batch as with many), the traced export is made once under its own key beside ONNX Runtime's, bfloat16 is either run
with its own cache key or refused on a CPU without it, and a missing extra or a setting it cannot honour is refused
with the fix."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from gapbench.adapters._dense_onnx import MODEL_FILE
from gapbench.adapters.dense import Dense
from gapbench.cache import cache_dir
from gapbench.errors import GapbenchError, MissingDependencyError, OptionsError
from gapbench.tasks.impliret import load_packaged

pytestmark = [pytest.mark.model]


@pytest.fixture(scope="module")
def wknow():
    return load_packaged("multispeaker", "wknow")


@pytest.fixture(scope="module")
def texts(wknow):
    # real passages of every length the corpus has, then a one-word text and a question
    docs = sorted((d.full_text for d in wknow.corpus.values()), key=len)
    return docs[:: max(1, len(docs) // 40)][:40] + ["a", "where does the speaker live"]


@pytest.fixture(scope="module")
def torch_vectors(texts):
    return Dense(cache=False).encode_texts(texts)


def test_float32_vectors_equal_torchs_in_order(module_home, texts, torch_vectors, capsys):
    capsys.readouterr()
    dense = Dense(backend="openvino", cache=False)
    told: list[int] = []
    vectors = dense.encode_texts(texts, progress=told.append)
    assert dense.exported_now
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines and all(line.startswith("gapbench: dense: ") for line in lines), lines
    assert any("as traced, for OpenVINO" in line for line in lines), lines
    assert dense._fast.precision == "f32"  # set, not OpenVINO's own default (bfloat16 on CPUs that have it)
    assert vectors.shape == torch_vectors.shape == (42, 384)
    assert np.abs(vectors - torch_vectors).max() < 1e-4
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert sum(told) == len(texts)
    # float32 keeps torch's cache key (vectors equal to float noise), as backend=onnx does
    assert dense.fingerprint == Dense().fingerprint


def test_one_text_a_batch_comes_back_in_the_texts_order(module_home, texts, torch_vectors):
    # batch_tokens=8: every text its own batch, the batches spread over the requests and finishing out of order
    dense = Dense(backend="openvino", cache=False, batch_tokens=8)
    told: list[int] = []
    vectors = dense.encode_texts(texts, progress=told.append)
    assert told == [1] * len(texts)
    assert np.abs(vectors - torch_vectors).max() < 1e-4


def test_the_traced_export_is_kept_beside_onnx_runtimes_and_reused(module_home, texts, capsys):
    Dense(backend="openvino", cache=False).encode_texts(texts[:2])
    exports = sorted(p.parent.name for p in cache_dir("onnx").glob(f"*/{MODEL_FILE}"))
    capsys.readouterr()
    again = Dense(backend="openvino", cache=False)
    again.encode_texts(texts[:3])
    assert not again.exported_now
    assert "exporting" not in capsys.readouterr().err
    assert sorted(p.parent.name for p in cache_dir("onnx").glob(f"*/{MODEL_FILE}")) == exports
    # ONNX Runtime's fused graph is another export under another key: one of each after both ran
    onnx = Dense(backend="onnx", cache=False)
    onnx.encode_texts(texts[:2])
    assert onnx.exported_now
    both = sorted(p.parent.name for p in cache_dir("onnx").glob(f"*/{MODEL_FILE}"))
    assert len(both) == len(exports) + 1
    traced = [name for name in both if '"graph": "traced"' in (cache_dir("onnx") / name / "export.json").read_text()]
    assert traced == exports


def test_bfloat16_runs_with_its_own_key_or_is_refused(module_home, texts, torch_vectors):
    import openvino

    dense = Dense(backend="openvino", dtype="bfloat16", cache=False)
    assert dense.fingerprint != Dense().fingerprint  # bfloat16 vectors never read float32's cache
    if "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        vectors = dense.encode_texts(texts)
        assert dense._fast.precision == "bf16"
        # bfloat16 keeps 8 bits of mantissa: vectors move by about 1e-3, beyond float32 noise, the cosine stays high
        diff = np.abs(vectors - torch_vectors).max()
        assert 1e-4 < diff < 0.05, diff
        assert (vectors * torch_vectors).sum(axis=1).min() > 0.99
        assert dense._load().dtype.is_floating_point and str(dense._load().dtype) == "torch.float32"  # exported fp32
    else:
        with pytest.raises(GapbenchError, match=r"needs a CPU with bfloat16 instructions.*dense:dtype=float32"):
            dense.encode_texts(texts[:1])


def test_a_missing_extra_names_the_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino now raises ImportError
    dense = Dense(backend="openvino", cache=False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'gapbench\[openvino\]'"):
        dense.encode_texts(["a passage"])
    assert dense.model_loads == 0  # refused before the model loads


def test_settings_it_cannot_honour_are_refused():
    with pytest.raises(OptionsError, match="backend=openvino runs on the CPU"):
        Dense(backend="openvino", device="cuda")
    with pytest.raises(OptionsError, match="backend=openvino computes in float32 or bfloat16"):
        Dense(backend="openvino", dtype="float16")
    with pytest.raises(OptionsError, match="quantize=int8 needs backend=onnx"):
        Dense(backend="openvino", quantize="int8")
    with pytest.raises(OptionsError, match="compile=true compiles gapbench's fast encoder"):
        Dense(backend="openvino", compile=True)
