"""The probe shipped for the offline MiniLM (tasks/data/argus/probe_minilm): it loads for `dense` only, `--diagnosis auto`
picks it when the user's store has none, and a probe the user bound wins over it."""

from __future__ import annotations

import glob
import hashlib
import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from fx_warm_homes import copy_home

from gapbench.analyses.argus.remedy.probe_binding import (bind_probe, bound_probe, diagnosis_for, load_probe,
                                                          probe_store, shipped_probe, shipped_probe_dir)
from gapbench.analyses.argus.probe.training import Probe, ProbeMismatchError, train_probe
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


def test_the_shipped_files_are_the_ones_provenance_names():
    """The shipped files' own checksums (PROVENANCE.md, and probe.json's weights_sha256) prove the files are intact;
    they say nothing about a probe rebuilt on another machine, which the next test compares by value."""
    provenance = (SHIPPED / "PROVENANCE.md").read_text()
    listed = {name: sha for sha, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", provenance, re.M)}
    assert set(listed) == {"probe.json", "weights.npz"}
    for name, sha in listed.items():
        assert hashlib.sha256((SHIPPED / name).read_bytes()).hexdigest() == sha, name
    assert json.loads((SHIPPED / "probe.json").read_text())["weights_sha256"] == listed["weights.npz"]


# A rebuilt probe agrees with the shipped one to a tolerance, not byte for byte: MiniLM's embeddings differ in their
# last bits between machines and thread counts (CPU instruction sets, BLAS blocking), and so do the ridge coefficients
# fitted on them: 7.3e-7 at most between two machines (PROVENANCE.md), 2.4e-16 between 2 threads and 1 thread here.
# 1e-5 is more than ten times the drift seen and far below the coefficients' own size (mean |coef| 0.14, max 0.54).
# What a user reads stays exact: the family chosen, its parameters, the split, every fingerprint, and the metrics as
# the command prints them (3 decimals).
COEF_ATOL = 1e-5


@pytest.mark.slow
@pytest.mark.model
def test_the_shipped_probe_is_rebuilt_within_tolerance(tmp_path, monkeypatch, argus_slice_dense_home):
    from gapbench.cli import main
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    # MiniLM's span vectors of the slice's 620 entities, encoded once in the session by the same call as the
    # command's (embed_entities; tests/fx_docs.py's argus_slice_dense_home, on this run's threads as in CI's one-thread
    # step): what is rebuilt here is the audit and the probe trained on them
    copy_home(argus_slice_dense_home)
    # the saved probe is the undirected set's (the larger); training it alone gives the probe of PROVENANCE's command
    # with both sets
    rc = main(["argus", "probe", "-r", "dense", "--seed", "0", "--datasets", "undirected", "--out", str(tmp_path / "o")])
    assert rc == 0
    made = tmp_path / "o" / "probe"
    assert sorted(p.name for p in made.iterdir()) == ["probe.json", "weights.npz"]
    # the sidecar is exact but for the checksum of the weights' bytes
    side, shipped_side = (json.loads((d / "probe.json").read_text()) for d in (made, SHIPPED))
    assert side.pop("weights_sha256") == hashlib.sha256((made / "weights.npz").read_bytes()).hexdigest()
    shipped_side.pop("weights_sha256")
    assert side == shipped_side
    # the weights by value
    with np.load(made / "weights.npz") as got, np.load(SHIPPED / "weights.npz") as want:
        assert sorted(got.files) == sorted(want.files) == ["coef", "intercept", "mean", "scale"]
        for key in want.files:
            assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype, key
            np.testing.assert_allclose(got[key], want[key], rtol=0, atol=COEF_ATOL, err_msg=key)
    # so the rebuilt probe predicts what the shipped one predicts, within the coefficients' tolerance times |x|_1 + 1
    dense_fp = side["fingerprint"]
    x = np.random.default_rng(0).normal(size=(20, 384)) / np.sqrt(384)  # rows of about unit length, as MiniLM's
    drift = np.abs(Probe.load(made, dense_fp).predict(x) - Probe.load(SHIPPED, dense_fp).predict(x))
    assert (drift <= COEF_ATOL * (1 + np.abs(x).sum(axis=1))).all()
    # what the command reports, as PROVENANCE.md records it: the same family and split, the same 3-decimal metrics
    ds = json.loads((tmp_path / "o" / "argus_probe.json").read_text())["datasets"][0]
    assert ds["split"] == {"train": 416, "validation": 89, "test": 90}
    assert (ds["selected"]["family"], ds["selected"]["params"]) == ("ridge", {"alpha": 1.0, "standardize": False})
    printed = {"validation_rmse": (ds["selected"]["validation_rmse"], 0.429),
               "xgboost validation_rmse": (ds["families"]["xgboost"]["validation_rmse"], 0.444),
               "mlp validation_rmse": (ds["families"]["mlp"]["validation_rmse"], 0.433),
               "rmse": (ds["test"]["rmse"], 0.407), "mae": (ds["test"]["mae"], 0.344),
               "pearson": (ds["test"]["pearson"], 0.470), "spearman": (ds["test"]["spearman"], 0.461),
               "train-mean rmse": (ds["baselines"]["train_mean"]["rmse"], 0.458),
               "band accuracy": (ds["test"]["bands"]["accuracy"], 0.411),
               "band macro-F1": (ds["test"]["bands"]["macro_f1"], 0.393),
               "blind-spot accuracy": (ds["test"]["blind_spot"]["accuracy"], 0.722),
               "blind-spot macro-F1": (ds["test"]["blind_spot"]["macro_f1"], 0.695)}
    assert {k: round(v, 3) for k, (v, _) in printed.items()} == {k: want for k, (_, want) in printed.items()}
