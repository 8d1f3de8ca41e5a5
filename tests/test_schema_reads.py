"""The read paths validate through gapbench.schemas: a run directory's manifest.json and results.json as gapbench 0.1
wrote them keep loading, and a file with an unknown or mistyped key is refused with the file, the key and the fix
named; analyses are checked by their kind (``validate_analysis``)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from gapbench.errors import DataFormatError
from gapbench.schemas import SchemaError, validate_analysis
from gapbench.store import load_manifest, load_results, read_manifest

OLD = Path(__file__).parent / "fixtures" / "outputs_v0_1"
WKNOW = "impliret/multispeaker/wknow"
REMAKE = "re-create the run directory with `gapbench run TASK -r RETRIEVER --output DIR`"
ANALYSES = {"gap.json": "gap", "signals.json": "signals", "coverage.json": "coverage",
            "argus_audit.json": "argus_audit", "argus_probe.json": "argus_probe", "argus_compare.json": "argus_compare"}


@pytest.fixture(scope="module")
def old_run_dir(tmp_path_factory) -> Path:
    """A run directory of gapbench 0.1: its manifest.json and results.json unchanged, and the metrics.tsv that run
    wrote, rebuilt from the per-query values scores.json kept for the same run (bm25 on wknow, the same means)."""
    folder = tmp_path_factory.mktemp("v0_1") / "bm25"
    folder.mkdir()
    for name in ("manifest.json", "results.json"):
        shutil.copy(OLD / name, folder / name)
    scores = json.loads(gzip.decompress((OLD / "submissions" / "bm25" / "scores.json.gz").read_bytes()))
    per_query = scores["tasks"][WKNOW]["per_query"]
    measures = json.loads((OLD / "results.json").read_text())["measures"]
    lines = ["query_id\tmeasure\tvalue\n"] + [f"{q}\t{m}\t{v!r}\n" for m in measures for q, v in per_query[m].items()]
    (folder / "metrics.tsv").write_text("".join(lines))
    return folder


def _copy_with(folder: Path, tmp_path: Path, name: str, edit) -> Path:
    """``folder`` copied to ``tmp_path/run`` with ``edit(doc)`` applied to its ``name``."""
    out = tmp_path / "run"
    shutil.copytree(folder, out)
    doc = json.loads((out / name).read_text())
    edit(doc)
    (out / name).write_text(json.dumps(doc, indent=2))
    return out


def test_old_manifest_loads_through_read_manifest(old_run_dir):
    stored = json.loads((OLD / "manifest.json").read_text())
    manifest = read_manifest(old_run_dir)
    assert manifest == stored  # the document itself, unchanged
    assert manifest["task"]["name"] == WKNOW and manifest["k"] == 1000 and manifest["memory_budget"] == 2 * 2**30
    assert load_manifest(old_run_dir) == stored


def test_first_manifest_shape_loads(old_run_dir, tmp_path):
    out = tmp_path / "first"
    shutil.copytree(old_run_dir, out)
    shutil.copy(OLD / "manifest_first_shape.json", out / "manifest.json")
    manifest = read_manifest(out)
    assert not {"reranker", "augment", "memory_budget", "ray"} & set(manifest)
    assert manifest["fingerprints"]["qrels"] == "1e8bb85b7474b1e35da254b1611481b6ddbe062d78d41366069dcad0b61f7a69"


def test_old_results_load_through_load_results(old_run_dir):
    res = load_results(old_run_dir)
    assert (res.task, res.system, res.n_queries, res.n_missing) == (WKNOW, "bm25", 1500, 0)
    assert list(res.measures) == ["nDCG@10", "R@10", "RR@10", "R@100"]
    assert res.means["nDCG@10"] == pytest.approx(0.15175935839712337, abs=1e-12)
    assert res.ci["R@100"] == (0.976, 0.9886666666666667)  # the stored interval


def test_a_manifest_with_a_reranker_loads(old_run_dir, tmp_path):
    """What ``gapbench run --reranker`` records, the task's defaults included."""
    reranker = {"name": "tournament", "config": {"batch_size": 6}, "task_defaults": {"promote": 2},
                "llm": {"model": "m"}, "answers": {"rankings": 3}}
    out = _copy_with(old_run_dir, tmp_path, "manifest.json", lambda d: d.update(reranker=reranker))
    assert read_manifest(out)["reranker"] == reranker


def test_manifest_with_an_unknown_key_is_refused(old_run_dir, tmp_path):
    out = _copy_with(old_run_dir, tmp_path, "manifest.json", lambda d: d.update(remarks="hand-edited"))
    with pytest.raises(SchemaError) as info:
        read_manifest(out)
    assert str(info.value) == (f"{out / 'manifest.json'}: has the key 'remarks', which is not part of its schema: remove "
                               f"it (docs/schemas/run_manifest.schema.json lists the keys), or {REMAKE}.")
    assert isinstance(info.value, DataFormatError)


@pytest.mark.parametrize("edit, named", [
    (lambda d: d.update(k="1000"), "'k' is '1000': input should be a valid integer"),
    (lambda d: d["task"].update(n_docs="1500"), "'task.n_docs' is '1500': input should be a valid integer"),
    (lambda d: d["fingerprints"].pop("qrels"), "lacks the key 'fingerprints.qrels'"),
    (lambda d: d.pop("seed"), "lacks the key 'seed' (keys found: 'manifest_version', 'task', 'system',"),
    (lambda d: d.update(seed=-1), "'seed' is -1: input should be greater than or equal to 0"),
])
def test_manifest_with_a_mistyped_key_is_refused(old_run_dir, tmp_path, edit, named):
    out = _copy_with(old_run_dir, tmp_path, "manifest.json", edit)
    with pytest.raises(SchemaError) as info:
        load_manifest(out)
    message = str(info.value)
    assert message.startswith(f"{out / 'manifest.json'}: {named}") and message.endswith(f"; {REMAKE}.")


@pytest.mark.parametrize("edit, named", [
    (lambda d: d.update(surprise=1), "has the key 'surprise', which is not part of its schema: remove it "
                                     "(docs/schemas/run_results.schema.json lists the keys), or"),
    (lambda d: d.update(n_queries="1500"), "'n_queries' is '1500': input should be a valid integer;"),
    (lambda d: d["measures"].update({"R@10": "0.33"}), "'measures.R@10' is '0.33': input should be a valid number;"),
    (lambda d: d["ci95"].update({"R@10": [0.35, 0.30]}),
     "'ci95.R@10' is [0.35, 0.3]: its low end is above its high end (an interval is [low, high]);"),
    (lambda d: d["ci95"].update({"P@5": [0.1, 0.2]}),
     "'ci95.P@5' is the interval of a measure that 'measures' does not list;"),
    (lambda d: d.pop("system"), "lacks the key 'system' (keys found: 'task', 'n_queries', 'n_missing', "),
])
def test_results_with_an_unknown_or_mistyped_key_are_refused(old_run_dir, tmp_path, edit, named):
    out = _copy_with(old_run_dir, tmp_path, "results.json", edit)
    with pytest.raises(SchemaError) as info:
        load_results(out)
    message = str(info.value)
    assert message.startswith(f"{out / 'results.json'}: {named}") and message.endswith(f" {REMAKE}.")


@pytest.mark.parametrize("name", ANALYSES)
def test_old_analyses_pass_validate_analysis_unchanged(name):
    data = json.loads((OLD / name).read_text())
    kind = ANALYSES[name]
    assert data["kind"] == kind
    assert validate_analysis(kind, data, OLD / name) is data


def test_a_gap_json_without_kind_is_checked_as_the_kind_given():
    data = {k: v for k, v in json.loads((OLD / "gap.json").read_text()).items() if k != "kind"}
    assert validate_analysis("gap", data, "gap.json") is data
    with pytest.raises(SchemaError, match=r"^gap\.json: lacks the key 'pool_depth' "):
        validate_analysis("gap", {k: v for k, v in data.items() if k != "pool_depth"}, "gap.json")


def test_an_analysis_with_a_mistyped_key_is_refused():
    data = json.loads((OLD / "signals.json").read_text())
    data["n_queries"] = "80"
    with pytest.raises(SchemaError) as info:
        validate_analysis("signals", data, "out/signals.json")
    assert str(info.value) == ("out/signals.json: 'n_queries' is '80': input should be a valid integer; re-run "
                               "`gapbench signals` to rewrite it.")
    audit = {**json.loads((OLD / "argus_audit.json").read_text()), "extra": []}
    with pytest.raises(SchemaError, match=r"^a\.json: has the key 'extra', which is not part of its schema: remove it "
                                          r"\(docs/schemas/argus_audit\.schema\.json lists the keys\), or re-run "
                                          r"`gapbench argus audit` to rewrite it\.$"):
        validate_analysis("argus_audit", audit, "a.json")


def test_unknown_kinds_pass_through():
    data = {"kind": "mcr", "task": WKNOW, "anything": [1, 2]}
    assert validate_analysis("mcr", data, "mcr.json") is data
