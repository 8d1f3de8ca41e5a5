"""Schemas as code: result files written by gapbench 0.1 keep loading, unknown fields are refused with a clear
message, the committed JSON Schemas equal a fresh export, and the submission model accepts and refuses exactly what the
submission validator does."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gapbench import schemas
from gapbench.schemas import SCHEMAS, SchemaError, load_file, validate
from gapbench.products.submissions.validate import validate_submission

ROOT = Path(__file__).resolve().parents[1]
OLD = Path(__file__).parent / "fixtures" / "outputs_v0_1"
BOARD = ROOT / "leaderboards" / "impliret"
REVISION = "github:ZeinabTaghavi/ImpliRet@ddd14afc6efa55a0f832315314ca556ac6a1df39"

# fixture -> schema (files named as gapbench names them are found by name or kind; the others are given)
FIXTURES = {
    "manifest.json": "run_manifest", "manifest_first_shape.json": "run_manifest", "results.json": "run_results",
    "compare.json": "compare", "regress.json": "regress", "gap.json": "gap", "signals.json": "signals",
    "coverage.json": "coverage", "argus_audit.json": "argus_audit", "argus_probe.json": "argus_probe",
    "argus_compare.json": "argus_compare", "sweep.json": "argus_sweep", "argus_dataset.json": "argus_dataset",
    "report.json": "report", "leaderboard.json": "leaderboard", "matrix.json": "reproduce", "card.json": "obliq_build",
    "submissions/bm25/submission.json": "submission", "submissions/bm25-lucene/submission.json": "submission",
    "submissions/dense/submission.json": "submission", "submissions/bm25/scores.json.gz": "scores",
}


def read(rel: str):
    path = OLD / rel
    text = gzip.decompress(path.read_bytes()).decode() if rel.endswith(".gz") else path.read_text()
    return json.loads(text)


def test_every_schema_has_an_old_file():
    assert sorted(set(FIXTURES.values()) | {"task_info"}) == sorted(SCHEMAS)


@pytest.mark.parametrize("rel", FIXTURES)
def test_old_files_load(rel):
    data = read(rel)
    model = validate(FIXTURES[rel], data, source=rel)
    assert isinstance(model, SCHEMAS[FIXTURES[rel]])
    # nothing is lost or invented: the model gives back the document (keys absent from old files stay absent)
    assert model.model_dump(mode="json", by_alias=True, exclude_unset=True) == data


@pytest.mark.parametrize("rel", [r for r in FIXTURES if not r.endswith((".gz", "compare.json", "first_shape.json"))
                                 or r == "argus_compare.json"])
def test_schema_found_by_kind_or_file_name(rel):
    assert type(load_file(OLD / rel)) is SCHEMAS[FIXTURES[rel]]


def test_old_values_read_back():
    manifest = validate("run_manifest", read("manifest.json"))
    assert manifest.task.name == "impliret/multispeaker/wknow" and manifest.task.revision == REVISION
    assert (manifest.task.n_docs, manifest.task.n_queries, manifest.k) == (1500, 1500, 1000)
    assert manifest.retriever.class_ == "gapbench.adapters.bm25.BM25" and manifest.retriever.config["k1"] == 1.5
    assert manifest.memory_budget == 2 * 2**30 and manifest.ray is None
    first = validate("run_manifest", read("manifest_first_shape.json"))
    assert (first.reranker, first.augment, first.memory_budget, first.ray) == (None, None, None, None)
    assert first.fingerprints == manifest.fingerprints
    results = validate("run_results", read("results.json"))
    assert results.n_queries == 1500 and results.measures["nDCG@10"] == pytest.approx(0.15175935839712337)
    scores = validate("scores", read("submissions/bm25/scores.json.gz"))
    wknow = scores.tasks["impliret/multispeaker/wknow"]
    assert wknow.measures["nDCG@10"] == results.measures["nDCG@10"] and len(wknow.per_query["nDCG@10"]) == 1500
    assert scores.manifest.n_resamples == 1000 and set(scores.full_benchmark_avg) >= {"nDCG@10"}
    gap = validate("gap", read("gap.json"))
    assert (gap.best_retriever.name, gap.verifier_gold_infused.value, gap.pool_depth) == ("bm25", 1.0, 20)


def test_task_info_of_every_registered_task():
    from gapbench.task import list_tasks

    infos = [validate("task_info", t.info(), source=t.name) for t in list_tasks()]
    assert any(i.name == "impliret/multispeaker/wknow" and i.revision == REVISION for i in infos)


def test_the_live_board_files_load():
    for path in sorted(BOARD.glob("submissions/*/*.json")) + [BOARD / "leaderboard.json"]:
        load_file(path)


@pytest.mark.parametrize("rel", FIXTURES)
def test_unknown_top_level_field_is_refused(rel):
    data = {**read(rel), "surprise": 1}
    with pytest.raises(SchemaError) as info:
        validate(FIXTURES[rel], data, source=f"old/{rel}")
    message = str(info.value)
    assert message.startswith(f"old/{rel}: does not follow the {FIXTURES[rel]} schema: unknown field surprise")
    assert "remove it" in message and f"docs/schemas/{FIXTURES[rel]}.schema.json" in message and "\n" not in message


def test_wrong_types_and_missing_keys_are_named():
    data = read("manifest.json")
    data["k"] = "1000"
    del data["date"]
    with pytest.raises(SchemaError, match=r"^m\.json: does not follow the run_manifest schema: k is '1000': input "
                                          r"should be a valid integer; missing field date\."):
        validate("run_manifest", data, source="m.json")
    nested = read("gap.json")
    nested["best_retriever"]["rank"] = 1
    with pytest.raises(SchemaError, match=r"unknown field best_retriever\.rank "):
        validate("gap", nested)


def test_unknown_kind_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"kind": "mystery"}')
    with pytest.raises(SchemaError, match=r"other\.json: is not a gapbench JSON document .*kind 'mystery'.*"
                                          r"accepted kinds: submission_scores, gap,"):
        load_file(path)


def test_committed_json_schemas_equal_a_fresh_export(tmp_path):
    assert schemas.main(["export", str(tmp_path)]) == 0
    fresh = {p.name: p.read_text() for p in tmp_path.iterdir()}
    committed = {p.name: p.read_text() for p in (ROOT / "docs" / "schemas").iterdir()}
    assert sorted(fresh) == sorted(f"{name}.schema.json" for name in SCHEMAS)
    assert committed == fresh, "docs/schemas is stale: run `python -m gapbench.schemas export docs/schemas`"
    sub = json.loads(fresh["submission.schema.json"])
    assert sub["additionalProperties"] is False and sub["properties"]["system"]["maxLength"] == 64
    assert sub["properties"]["system"]["pattern"] == "^(?:[A-Za-z0-9][A-Za-z0-9._+-]{0,63})$"


def test_export_usage_error(capsys):
    assert schemas.main(["exprt", "docs"]) == 2
    assert "usage: python -m gapbench.schemas export DIR" in capsys.readouterr().err


# ---------------------------------------------------------------- the model mirrors the submission validator

def _set(path: str, value):
    def change(meta: dict) -> None:
        *parents, last = path.split(".")
        node = meta
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return change


_DELETE = object()
WKNOW = "impliret/multispeaker/wknow"
CASES = {
    "as committed": (True, lambda m: None),
    "no k": (True, _set("k", _DELETE)),
    "k 1000": (True, _set("k", 1000)),
    "a model": (True, _set("models", [{"name": "org/model-1", "revision": "v1.0"}])),
    "no adapter fingerprint": (True, _set("adapter.fingerprint", _DELETE)),
    "url and date": (True, lambda m: m.update(url="https://example.org/code", date="2026-11-26")),
    "unknown field": (False, _set("surprise", 1)),
    "system with a space": (False, _set("system", "bm 25")),
    "system with trailing space": (False, _set("system", "bm25 ")),
    "system empty": (False, _set("system", "")),
    "description with a bell": (False, _set("description", "BM25\x07")),
    "description too long": (False, _set("description", "x" * 1001)),
    "contact missing": (False, _set("contact", _DELETE)),
    "contact a number": (False, _set("contact", 7)),
    "format_version 2": (False, _set("format_version", 2)),
    "format_version true": (False, _set("format_version", True)),
    "k 0": (False, _set("k", 0)),
    "k 1001": (False, _set("k", 1001)),
    "k true": (False, _set("k", True)),
    "url ftp": (False, _set("url", "ftp://example.org")),
    "date not ISO": (False, _set("date", "26-11-2026")),
    "models not a list": (False, _set("models", {})),
    "model with extra field": (False, _set("models", [{"name": "a", "revision": "b", "licence": "x"}])),
    "model without revision": (False, _set("models", [{"name": "a"}])),
    "21 models": (False, _set("models", [{"name": "a", "revision": "b"}] * 21)),
    "adapter without config": (False, _set("adapter.config", _DELETE)),
    "adapter config a list": (False, _set("adapter.config", [])),
    "adapter extra field": (False, _set("adapter.version", "1")),
    "adapter fingerprint with a space": (False, _set("adapter.fingerprint", "ab cd")),
    "tasks empty": (False, _set("tasks", {})),
    "task entry extra field": (False, _set(f"tasks.{WKNOW}.notes", "x")),
    "task sha256 short": (False, _set(f"tasks.{WKNOW}.sha256", "abc")),
    "task run misnamed": (False, _set(f"tasks.{WKNOW}.run", "runs/impliret__unispeaker__wknow.trec.gz")),
    "task revision empty": (False, _set(f"tasks.{WKNOW}.revision", " ")),
}


@pytest.fixture(scope="module")
def submission_dir(tmp_path_factory) -> tuple[Path, dict]:
    """(a submission folder, its submission.json), shared by every case: the committed bm25 submission with each run
    cut to its first 200 lines and the hashes updated. The cases change submission.json only, and the validator reads
    every run in full for each of them: the committed runs (900,000 lines in all) made each case take seconds."""
    folder = tmp_path_factory.mktemp("sub") / "bm25"
    (folder / "runs").mkdir(parents=True)
    meta = json.loads((BOARD / "submissions" / "bm25" / "submission.json").read_text())
    for entry in meta["tasks"].values():
        with gzip.open(BOARD / "submissions" / "bm25" / entry["run"], "rt") as fh:
            head = "".join(line for _, line in zip(range(200), fh))
        (folder / entry["run"]).write_bytes(gzip.compress(head.encode(), mtime=0))
        entry["sha256"] = hashlib.sha256((folder / entry["run"]).read_bytes()).hexdigest()
    return folder, meta


@pytest.mark.parametrize("case", CASES)
def test_submission_model_accepts_what_the_validator_accepts(case, submission_dir):
    ok, change = CASES[case]
    folder, committed = submission_dir
    meta = copy.deepcopy(committed)
    change(meta)
    (folder / "submission.json").write_text(json.dumps(meta))
    report = validate_submission(folder, check_ids=False, check_scores=False)
    try:
        validate("submission", meta)
        model_ok = True
    except SchemaError:
        model_ok = False
    assert (report.ok, model_ok) == (ok, ok), report.one_line() if not report.ok else case
