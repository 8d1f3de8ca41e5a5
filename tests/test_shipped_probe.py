"""The probe shipped for the offline MiniLM (tasks/data/argus/probe_minilm): it loads for `dense` only, `--diagnosis auto`
picks it when the user's store has none, and a probe the user bound wins over it."""

from __future__ import annotations

import glob
import hashlib
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from gapbench.analyses.argus.augment import (bind_probe, bound_probe, diagnosis_for, load_probe, probe_store,
                                             shipped_probe, shipped_probe_dir)
from gapbench.analyses.argus.probe import Probe, ProbeMismatchError, train_probe
from gapbench.retrieval import get_retriever

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "tasks" / "data" / "argus" / "probe_minilm"


@pytest.fixture()
def empty_home(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # an empty probe store
    return tmp_path / "home"


def _span_fp(retriever) -> str:
    return hashlib.sha256(f"argus-span-mean:v1:{retriever.fingerprint}".encode()).hexdigest()


def test_the_shipped_probe_is_a_small_ridge_probe_for_dense():
    assert shipped_probe_dir().resolve() == SHIPPED.resolve()
    assert sorted(p.name for p in SHIPPED.iterdir()) == ["PROVENANCE.md", "probe.json", "weights.npz"]
    assert (SHIPPED / "weights.npz").stat().st_size < 20_000  # 384 ridge coefficients and 384 means/scales
    side = json.loads((SHIPPED / "probe.json").read_text())
    assert (side["family"], side["dim"], side["meta"]["seed"], side["meta"]["n_train"]) == ("ridge", 384, 0, 416)
    assert side["meta"]["retriever"] == "dense" and side["meta"]["dataset"] == "undirected"
    dense = get_retriever("dense")
    # trained on dense's span-pooled embeddings: the probe carries the span encoder's and the retriever's fingerprints
    assert side["fingerprint"] == _span_fp(dense) and side["meta"]["retriever_fingerprint"] == dense.fingerprint
    probe = Probe.load(SHIPPED, _span_fp(dense))
    assert probe.family == "ridge" and probe.params == {"alpha": 1.0, "standardize": False}
    # ridge without standardisation: the prediction is intercept + x . coef, clipped to [0, 1]
    with np.load(SHIPPED / "weights.npz") as z:
        coef, intercept = z["coef"], float(z["intercept"])
    x = np.zeros((2, 384))
    x[1, 0] = 1.0
    assert probe.predict(x) == pytest.approx(np.clip([intercept, intercept + coef[0]], 0, 1))
    with pytest.raises(ProbeMismatchError):
        Probe.load(SHIPPED, get_retriever("bm25").fingerprint)


def test_auto_picks_the_shipped_probe_for_dense_only(empty_home):
    dense = get_retriever("dense")
    method, probe, source = diagnosis_for("auto", dense)
    assert method == "probe" and probe.fingerprint == _span_fp(dense)
    assert source == f"shipped:{shipped_probe_dir()}"
    assert diagnosis_for("probe", dense)[2] == source  # --diagnosis probe finds it too
    assert not probe_store().exists()  # nothing was written to the user's store
    bm25 = get_retriever("bm25")
    assert shipped_probe(bm25) is None and bound_probe(bm25) is None
    assert diagnosis_for("auto", bm25) == ("audit", None, None)
    # another MiniLM-like spec (another model name) has another fingerprint: not the shipped probe either
    other = get_retriever("dense:model=sentence-transformers/paraphrase-MiniLM-L3-v2")
    assert other.fingerprint != dense.fingerprint and shipped_probe(other) is None


def test_a_probe_the_user_bound_wins_over_the_shipped_one(empty_home):
    dense = get_retriever("dense")
    span_fp = _span_fp(dense)
    x = np.random.default_rng(0).normal(size=(40, 384))
    mine, _ = train_probe(x, np.clip(0.5 + 0.2 * x[:, 0], 0, 1), span_fp, seed=0, families=("ridge",))
    folder = bind_probe(mine)
    method, found, source = diagnosis_for("auto", dense)
    assert method == "probe" and source == str(folder) and not source.startswith("shipped:")
    assert found.meta["n_train"] == 28  # the user's probe (70% of 40), not the shipped one (416)
    assert load_probe(shipped_probe_dir(), dense).meta["n_train"] == 416


def test_the_wheel_globs_cover_the_shipped_probe():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["gapbench.tasks"]
    # setuptools expands package-data globs with glob(recursive=True) relative to the package folder
    packaged = {m for g in globs for m in glob.glob(g, root_dir=ROOT / "tasks", recursive=True)}
    assert {f.relative_to(ROOT / "tasks").as_posix() for f in SHIPPED.iterdir()} <= packaged


@pytest.mark.slow
def test_the_shipped_probe_is_byte_reproducible(tmp_path, monkeypatch):
    from gapbench.cli import main
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    # the saved probe is the undirected set's (the larger); training it alone gives the same files as PROVENANCE's
    # command with both sets
    rc = main(["argus", "probe", "-r", "dense", "--seed", "0", "--datasets", "undirected", "--out", str(tmp_path / "o")])
    assert rc == 0
    for name in ("probe.json", "weights.npz"):
        assert (tmp_path / "o" / "probe" / name).read_bytes() == (SHIPPED / name).read_bytes(), name
