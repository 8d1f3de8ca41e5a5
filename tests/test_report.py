"""The gap report: built from two real runs (bm25, bm25-lucene on ImpliRet wknow), a real gap analysis (tournament
verifier against the local LLM server), the real coverage/signals/ARGUS files of tests/fixtures/outputs_v0_1, and a
small synthetic analysis of a kind without a model that exercises the rest of the generic renderer."""

from __future__ import annotations

import base64
import json
import re
import statistics
import sys
from pathlib import Path

import pytest

from gapbench.errors import ConfigError, DataFormatError
from gapbench.products.report_analyses import KNOWN_ANALYSES
from gapbench.products.report_build import build_report

TASK = "impliret/multispeaker/wknow"
GAP_QUERIES = 8


def _cli():
    import gapbench.cli as cli

    return cli.main


FIXTURES = Path(__file__).parent / "fixtures" / "outputs_v0_1"
REAL_KINDS = ("coverage", "signals", "argus_audit", "argus_compare")


def _real(kind: str, task: str = TASK) -> dict:
    """The real ``<kind>.json`` gapbench 0.1 wrote (tests/fixtures/outputs_v0_1, see PROVENANCE.md there), with its
    ``task`` set to ``task``: the report leaves out analyses of other tasks, and these were run on other ones."""
    return {**json.loads((FIXTURES / f"{kind}.json").read_text()), "task": task}


def _analyses(base: Path) -> dict[str, Path]:
    """One folder per analysis: the real coverage/signals/ARGUS files, and ``blindspots``, a TEST INPUT of a kind
    gapbench has no model for, which exercises the generic renderer (a histogram of a list of numbers, a value per
    query, a before/after table) on shapes the real files do not have."""
    note = "TEST INPUT written by tests/test_report.py; not produced by an analysis"
    files = {kind: _real(kind) for kind in REAL_KINDS}
    files["blindspots"] = {"kind": "blindspots", "task": TASK, "version": 1, "note": note, "n_probes": 7,
                           "rps": [round(0.05 * i, 2) for i in range(20)],
                           "rps_per_query": {str(q): round(0.04 * q, 2) for q in range(25)},
                           "before": {"nDCG@10": 0.1518, "R@100": 0.9827}, "after": {"nDCG@10": 0.1702, "R@100": 0.985}}
    out = {}
    for kind, content in files.items():
        d = base / "analyses" / kind
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{kind}.json").write_text(json.dumps(content, indent=2))
        out[kind] = d
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2), dpi=80)
    clusters = files["coverage"]["clusters"]
    ax.bar([c["label"][:12] for c in clusters], [c["n_queries"] for c in clusters])
    ax.set_title("TEST INPUT: coverage")
    fig.savefig(out["coverage"] / "coverage_clusters.png")
    plt.close(fig)
    return out


def build_inputs(home: Path) -> dict:
    """Real runs, a real gap analysis and the analyses of :func:`_analyses`, built under ``home`` (a second call finds
    them there); tests/fx_report.py's ``report_inputs`` builds them once in the session."""
    base = home / "report-test-inputs"
    marker = base / "done.json"
    if marker.exists():
        return _paths(json.loads(marker.read_text()))
    main = _cli()
    runs = {"bm25": base / "runs" / "bm25", "bm25-lucene": base / "runs" / "lucene"}
    for name, d in runs.items():
        assert main(["run", TASK, "-r", name, "-o", str(d)]) == 0
    # the gap: pools of both real runs, reranked by the tournament against the noise-free local judge
    sys.path.insert(0, str(Path(__file__).parent))
    from llm_server import LLMServer

    from gapbench.adapters.tournament import Tournament
    from gapbench.analyses.gap import GapOptions, measure_gap_with, save_report
    from gapbench.llm.client import LLMClient, LLMConfig
    from gapbench.store import load_run
    from gapbench.task import get_task

    data = get_task(TASK).load()
    qids = data.qrels.positive_queries()[:GAP_QUERIES]
    with LLMServer(qrels={q: dict(data.qrels[q]) for q in qids}, queries={q: data.queries[q].text for q in qids},
                   corpus={d: data.corpus[d].text for d in data.corpus}) as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url, model="judge", retry_wait=0.01, retry_wait_max=0.05),
                           cache=base / "llm.sqlite", api_key="sk-test")
        verifier = Tournament(client=client, concurrency=4)
        gap = measure_gap_with(TASK, data, [load_run(d) for d in runs.values()], verifier.rerank_pools,
                               GapOptions(depth=20, pool_sizes=(10, 20, 40)), query_ids=qids,
                               calls=lambda: verifier.llm_calls)
    from gapbench.schemas.gap import VerifierInfo

    gap.meta.verifier = VerifierInfo(name="tournament", config={})
    save_report(gap, base / "gap")
    out = {"runs": [str(d) for d in runs.values()], "gap": str(base / "gap"),
           **{k: str(v) for k, v in _analyses(base).items()}}
    marker.write_text(json.dumps(out))
    return _paths(out)


def _paths(stored: dict) -> dict:
    return {k: [Path(x) for x in v] if isinstance(v, list) else Path(v) for k, v in stored.items()}


@pytest.fixture(scope="module")
def inputs(report_inputs):
    return report_inputs  # built once in the session for every worker (tests/fx_report.py)


@pytest.fixture(scope="module")
def full(inputs, tmp_path_factory):
    dirs = [inputs["gap"], *(inputs[k] for k in ("coverage", "signals", "argus_audit", "argus_compare", "blindspots"))]
    report = build_report(TASK, inputs["runs"], dirs)
    out = tmp_path_factory.mktemp("report")
    return report, report.save(out), out


def _metrics(run_dir: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in (run_dir / "metrics.tsv").read_text().splitlines()[1:]:
        q, m, v = line.split("\t")
        out.setdefault(m, {})[q] = float(v)
    return out


def test_headline_means_cis_and_significance(full, inputs):
    report, paths, _ = full
    data = json.loads(paths["json"].read_text())
    assert data["kind"] == "report" and data["task"] == TASK and data["version"] == 1
    assert data["main_measure"] == "nDCG@10" and data["measures"] == ["nDCG@10", "R@10", "RR@10", "R@100"]
    for sys_, run_dir in zip(data["systems"], inputs["runs"]):
        stored = json.loads((run_dir / "results.json").read_text())
        assert sys_["system"] == stored["system"] and sys_["measures"] == stored["measures"]
        assert sys_["ci95"] == stored["ci95"]
    # the published bm25 nDCG@10 on wknow multi is 15.20 (README); bm25-lucene is lower on nDCG@10, higher on R@100
    bm25, lucene = data["systems"]
    assert round(bm25["measures"]["nDCG@10"] * 100, 2) == 15.18
    tests = {t["measure"]: t for t in data["tests"]}
    assert tests["nDCG@10"]["a"] == "bm25" and tests["nDCG@10"]["significant"] is False
    assert tests["R@100"]["significant"] is True and tests["R@100"]["delta"] < 0
    assert tests["R@100"]["delta"] == pytest.approx(bm25["measures"]["R@100"] - lucene["measures"]["R@100"])
    md = paths["md"].read_text()
    ci = bm25["ci95"]["nDCG@10"]
    assert f"| (a) bm25 | {bm25['measures']['nDCG@10']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]" in md
    assert f"{lucene['measures']['R@100']:.4f} [{lucene['ci95']['R@100'][0]:.4f}, {lucene['ci95']['R@100'][1]:.4f}]<sup>a</sup>" in md


def test_per_query_distribution_and_wins_from_metrics_files(full, inputs):
    _, paths, _ = full
    data = json.loads(paths["json"].read_text())
    a, b = (_metrics(d) for d in inputs["runs"])
    wtl = {x["measure"]: x for x in data["per_query"]["win_tie_loss"]}
    for m in data["measures"]:
        wins = sum(1 for q in a[m] if a[m][q] > b[m][q])
        losses = sum(1 for q in a[m] if a[m][q] < b[m][q])
        assert (wtl[m]["wins"], wtl[m]["losses"], wtl[m]["ties"]) == (wins, losses, 1500 - wins - losses)
    dist = data["per_query"]["distribution"]["bm25"]
    values = list(a["nDCG@10"].values())
    assert dist["n"] == 1500 and dist["median"] == statistics.median(values)
    assert dist["share_zero"] == pytest.approx(sum(v == 0 for v in values) / 1500)
    assert dist["mean"] == pytest.approx(sum(values) / 1500)
    md = paths["md"].read_text()
    assert f"| nDCG@10 | bm25 | bm25-lucene | {wtl['nDCG@10']['wins']} | {wtl['nDCG@10']['ties']} | {wtl['nDCG@10']['losses']} |" in md


def test_gap_section_bounds_and_pool_scaling(full, inputs):
    _, paths, _ = full
    data = json.loads(paths["json"].read_text())
    gap = json.loads((inputs["gap"] / "gap.json").read_text())
    entry = next(a for a in data["analyses"] if a["kind"] == "gap")
    assert entry["schema"] == "gap" and entry["data"] == gap
    # noise-free judge: the gold-infused verifier finds every gold document; the standard one exactly when pooled
    assert gap["verifier_gold_infused"]["value"] == 1.0
    assert gap["verifier_standard"]["value"] == pytest.approx(gap["pool_recall"])
    md = paths["md"].read_text()
    best = gap["best_retriever"]
    assert f"| retriever {best['name']} (best) | {best['value']:.4f} |" in md
    assert f"| verifier, gold-infused pool (upper bound) | 1.0000 | {1.0 - best['value']:+.4f} |" in md
    for row in gap["pool_scaling"]:
        assert f"| {row['pool_size']} | {row['pool_recall']:.3f} | {row['verifier_standard']:.4f} | 1.0000 |" in md
    # the pool-scaling PNG is embedded byte for byte in the page and copied beside report.md
    png = (inputs["gap"] / "pool_scaling.png").read_bytes()
    assert base64.b64encode(png).decode() in paths["html"].read_text()
    assert any((paths["md"].parent / f).read_bytes() == png for f in entry["figures"])


def test_generic_sections(full):
    report, paths, _ = full
    data = json.loads(paths["json"].read_text())
    assert data["not_run"] == [] and data["ignored"] == []
    assert [a["kind"] for a in data["analyses"]] == ["gap", "coverage", "argus_audit", "argus_compare", "signals",
                                                    "blindspots"]
    md = paths["md"].read_text()
    for kind, (title, _) in KNOWN_ANALYSES.items():
        assert f"## {title}" in md
    assert "## Blindspots" in md and "| n_probes | 7 |" in md
    # signals (fixture signals.json): a mapping of records becomes a table, a row per signal; max_score has auc
    # 0.46199..., separation 0.53800..., ci95 [0.40310..., 0.67463...]; dense_variance auc = separation 0.53605...
    assert "| max_score | yes | top-1 score of bm25 | lower_is_weaker | 80 | 0.4620 | 0.5380 | lower_is_weaker | " \
           "0.4031, 0.6746 |" in md
    assert "| dense_variance | yes | window scores of dense | lower_is_weaker | 80 | 0.5361 | 0.5361 |" in md
    # the gate's scalars a key/value table (gate.threshold 1.962722897529602)
    assert "| gate.threshold | 1.9627 |" in md and "| gate.rule | max_score < 1.96272 |" in md
    # ARGUS compare (fixture argus_compare.json): variants -> means pivoted into a table, one row per variant
    # (original nDCG@5 = nDCG@10 = 0.643558..., R@10 1.0), and the expansion's delta 0.356441... with its Holm p-values
    assert "*tasks./tmp/p2/t.variants: means*" in md
    assert "| original | 0.6436 | 0.6436 | 1.0000 |" in md and "| expansion | 1.0000 | 1.0000 | 1.0000 |" in md
    assert "| expansion | 0.3564 | 1.0000 | 0.5556 | no |" in md
    # before/after with the deltas (blindspots; the real ARGUS files have no before/after)
    assert "| nDCG@10 | 0.1518 | 0.1702 | +0.0184 |" in md and "| R@100 | 0.9827 | 0.9850 | +0.0023 |" in md
    # a list of numbers as a histogram and a value per query (blindspots: rps, rps_per_query 0.04 * q for q < 25)
    figs = {a["kind"]: a["figures"] for a in data["analyses"]}
    assert any(f.endswith("-rps.png") for f in figs["blindspots"])
    assert any("rps-per-query" in f for f in figs["blindspots"]) and "| rps_per_query | 25 values, mean 0.4800 |" in md
    # ARGUS audit (fixture argus_audit.json): 103 entity records, the first 40 shown (Kalapipal Mandi: rps 1.0, 3 hits
    # of 3 queries, ranks 15, 9, 13), a box per entity of its ranks, and mean_rps 0.409662...
    assert "*entities (first 40 of 103)*" in md and "| mean_rps | 0.4097 |" in md
    assert "| Q16978320 | Kalapipal Mandi | 1.0000 | 3 | 3 | high | 15, 9, 13 | 616, 616, 619 |" in md
    assert any(f.endswith("-entities-ranks.png") for f in figs["argus_audit"])
    # coverage (fixture coverage.json): the clusters table (cluster 1 has no query), msc 2/3, a histogram of
    # config.k_candidates (5..30, mean 17.5), a box per query of its clusters, and the analysis's own PNG
    assert "| 1 | bach / beethoven / chopin | 5 | 5 | 0 | no |" in md and "| coverage.msc | 0.6667 |" in md
    assert "| config.k_candidates | 6 values, mean 17.5000 |" in md
    assert any(f.endswith("-queries-clusters.png") for f in figs["coverage"])
    assert any("coverage-clusters" in f for f in figs["coverage"])
    html = paths["html"].read_text()
    assert html.count('src="data:image/png;base64,') == len(report.figure_blocks()) == len(data["figures"])
    for name in data["figures"]:
        assert (paths["md"].parent / name).stat().st_size > 1000 and f"]({name})" in md


def test_report_json_is_the_report_data(full):
    """report.json is the report's model written out: what build_report returns is a ReportData (its subclass adds
    no field), and the file loads back as a ReportData with the same fields; one of gapbench 0.1 loads too."""
    from gapbench.products.report_build import RenderedReport
    from gapbench.schemas import load_file
    from gapbench.schemas.report import ReportData

    report, paths, _ = full
    assert isinstance(report, ReportData) and RenderedReport.model_fields.keys() == ReportData.model_fields.keys()
    assert json.loads(paths["json"].read_text()) == report.model_dump(mode="json", by_alias=True)
    loaded = load_file(paths["json"])
    assert type(loaded) is ReportData and loaded.model_dump() == report.model_dump()
    assert loaded == ReportData.model_validate(report.model_dump(by_alias=True))
    assert [s.system for s in loaded.systems] == ["bm25", "bm25-lucene"]
    assert loaded.figures == report.figures == [f.name for f in report.figure_blocks()]
    assert str(report) == report.to_markdown() == paths["md"].read_text()
    old = load_file(FIXTURES / "report.json")
    assert old.per_query.distribution["bm25"].n == 1500 and old.per_query.win_tie_loss[0].wins == 278
    assert [(a.kind, a.renderer, a.figures) for a in old.analyses] == [("gap", "gap", ["fig03-gap-pool-scaling.png"])]


def test_self_contained_html(full):
    _, paths, _ = full
    html = paths["html"].read_text()
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html)
    assert refs and all(r.startswith(("data:image/png;base64,", "#")) for r in refs)
    assert "<script" not in html and "@import" not in html and "url(" not in html
    assert "<link" not in html


def test_not_run_and_other_task_and_reproducible(inputs, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    # the real signals.json (schema-valid: every file read is validated, whatever its task), of another task
    (other / "signals.json").write_text(json.dumps(_real("signals", "impliret/unispeaker/wknow")))
    r1 = build_report(TASK, inputs["runs"], [inputs["gap"], other])
    assert r1.not_run == ["coverage", "argus_audit", "argus_compare", "signals"]
    assert r1.ignored[0].source.endswith("signals.json")
    assert "not run" in r1.to_markdown() and "impliret/unispeaker/wknow" in r1.to_markdown()
    r2 = build_report(TASK, inputs["runs"], [inputs["gap"], other])
    assert r1.to_markdown() == r2.to_markdown() and r1.model_dump() == r2.model_dump()
    assert [f.png for f in r1.figure_blocks()] == [f.png for f in r2.figure_blocks()]
    # a probe saved by `gapbench argus probe` (kind argus_probe_model, no task) beside it is no analysis of this task
    import shutil

    shutil.copytree(Path("tasks/data/argus/probe_minilm"), other / "probe")
    r3 = build_report(TASK, inputs["runs"], [inputs["gap"], other])
    assert [a.kind for a in r3.analyses] == ["gap"]
    assert r3.model_dump(mode="json")["ignored"][1] == {"source": str(other / "probe" / "probe.json"),
                                          "reason": "kind 'argus_probe_model' with no task: not an analysis of a task"}


def test_single_system(inputs):
    r = build_report(TASK, inputs["runs"][:1], [])
    assert r.tests == [] and r.per_query.win_tie_loss == []
    assert "One system only" in r.to_markdown()
    assert r.not_run == list(KNOWN_ANALYSES)


def test_the_title_names_what_the_report_holds(inputs):
    """A report without a gap analysis is not titled a gap report: the title names the analyses it holds."""
    bare = build_report(TASK, inputs["runs"], [])
    assert bare.to_markdown().startswith(f"# Evaluation report: {TASK}\n")
    assert f"<h1>Evaluation report: {TASK}</h1>" in bare.to_html()
    signals = build_report(TASK, inputs["runs"], [inputs["signals"]])
    assert signals.to_markdown().startswith(f"# Evaluation and signals: {TASK}\n")
    both = build_report(TASK, inputs["runs"], [inputs["signals"], inputs["coverage"]])
    assert both.to_markdown().startswith(f"# Evaluation, coverage and signals: {TASK}\n")
    gap = build_report(TASK, inputs["runs"], [inputs["gap"], inputs["signals"]])
    assert gap.to_markdown().startswith(f"# Gap report: {TASK}\n")


def test_strict_gap_json_and_bad_inputs(inputs, tmp_path):
    bad = tmp_path / "gap"
    bad.mkdir()
    gap = json.loads((inputs["gap"] / "gap.json").read_text())
    del gap["pool_recall"]
    (bad / "gap.json").write_text(json.dumps(gap))
    with pytest.raises(DataFormatError, match=r"gap\.json: lacks the key 'pool_recall'"):
        build_report(TASK, inputs["runs"], [bad])
    (bad / "gap.json").write_text("{not json")
    with pytest.raises(DataFormatError, match="malformed JSON"):
        build_report(TASK, inputs["runs"], [bad])
    with pytest.raises(ConfigError, match="is for task 'impliret/multispeaker/wknow'"):
        build_report("impliret/unispeaker/wknow", inputs["runs"], [])
    with pytest.raises(ConfigError, match="not stored in every run directory"):
        build_report(TASK, inputs["runs"], [], measure="AP")
    with pytest.raises(ConfigError, match="analysis directory not found"):
        build_report(TASK, inputs["runs"], [tmp_path / "nope"])


def test_cli(inputs, tmp_path, capsys):
    main = _cli()
    out = tmp_path / "rep"
    code = main(["report", TASK, *map(str, inputs["runs"]), "--analyses", str(inputs["gap"]),
                 "--analyses", str(inputs["signals"]), "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "analyses: gap, signals; not run: coverage, argus_audit, argus_compare" in text
    assert {p.name for p in out.iterdir()} >= {"report.html", "report.md", "report.json"}
    bad = tmp_path / "badgap"
    bad.mkdir()
    (bad / "gap.json").write_text(json.dumps({"task": TASK}))
    assert main(["report", TASK, *map(str, inputs["runs"]), "--analyses", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err  # the first key the gap model misses (which one is the gap schema's order)
    assert f"{bad / 'gap.json'}: lacks the key '" in err and "re-run `gapbench gap` to rewrite it" in err


def test_generic_nested_tables(inputs, tmp_path):
    # TEST INPUT shaped like argus_compare (tasks -> variants -> means/growth), of a kind without a model so that
    # it reaches the generic nested-table renderer unvalidated
    doc = {"kind": "custom_nested", "task": TASK, "version": 1, "retriever": "bm25",
           "tasks": {TASK: {"n_queries": 1500, "variants": {
               "original": {"means": {"nDCG@10": 0.1518, "R@100": 0.9827}, "growth": {"n_views": 0}},
               "expansion": {"means": {"nDCG@10": 0.16, "R@100": 0.985}, "growth": {"n_views": 40}}}}}}
    (tmp_path / "custom_nested.json").write_text(json.dumps(doc))
    md = build_report(TASK, inputs["runs"], [tmp_path]).to_markdown()
    assert f"*tasks.{TASK}.variants: means*" in md
    assert "| original | 0.1518 | 0.9827 |" in md and "| expansion | 0.1600 | 0.9850 |" in md
    assert "| expansion | 40 |" in md and f"| tasks.{TASK}.n_queries | 1500 |" in md


def _bad_coverage(tmp_path: Path, change: dict) -> Path:
    """A folder holding the real coverage.json (task set to TASK) with ``change`` applied."""
    bad = tmp_path / "badcoverage"
    bad.mkdir()
    (bad / "coverage.json").write_text(json.dumps({**_real("coverage"), **change}))
    return bad


@pytest.mark.parametrize("change, message", [
    ({"coverage": "0.6667"}, "coverage.json: 'coverage' is '0.6667': input should be a valid dictionary"),
    ({"clusterz": 3}, "coverage.json: has the key 'clusterz', which is not part of its schema"),
], ids=["mistyped", "unknown-key"])
def test_analysis_files_are_validated(inputs, tmp_path, capsys, change, message):
    bad = _bad_coverage(tmp_path, change)
    with pytest.raises(DataFormatError) as err:
        build_report(TASK, inputs["runs"], [bad])
    assert str(err.value).startswith(str(bad / "coverage.json")) and message in str(err.value)
    main = _cli()
    assert main(["report", TASK, *map(str, inputs["runs"]), "--analyses", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_cli_takes_two_folders_after_one_analyses(inputs, tmp_path, capsys):
    """`--analyses A B`: an option takes one value, so B arrived among the run directories and was read as one
    (exit 2); given --analyses, a folder of analysis outputs there is an analysis folder. Same report as
    `--analyses A --analyses B`."""
    main = _cli()
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["report", TASK, *map(str, inputs["runs"]), "--analyses", str(inputs["gap"]),
                 "--analyses", str(inputs["signals"]), "--out", str(one)]) == 0
    first = capsys.readouterr().out
    assert main(["report", TASK, *map(str, inputs["runs"]), "--analyses", str(inputs["gap"]), str(inputs["signals"]),
                 "--out", str(two)]) == 0
    assert "analyses: gap, signals; not run:" in capsys.readouterr().out and "analyses: gap, signals;" in first
    a, b = (json.loads((d / "report.json").read_text()) for d in (one, two))
    assert [s["run_dir"] for s in b["systems"]] == list(map(str, inputs["runs"]))
    assert [x["kind"] for x in a["analyses"]] == [x["kind"] for x in b["analyses"]] == ["gap", "signals"]


def test_analysis_files_are_read_strictly(inputs, tmp_path):
    """The report reads analysis files with the strict reader of every file gapbench writes: a NaN or a key given
    twice is refused naming the file, instead of a NaN shown as a number or the second key silently winning."""
    gap = json.loads((Path(inputs["gap"]) / "gap.json").read_text())
    text = json.dumps(gap, indent=2)
    for name, bad, message in (("nan", text.replace('"pool_depth": 20', '"pool_depth": NaN', 1), "NaN"),
                               ("twice", text.replace('"pool_depth": 20', '"pool_depth": 20, "pool_depth": 40', 1),
                                "'pool_depth'")):
        folder = tmp_path / name
        folder.mkdir()
        assert bad != text
        (folder / "gap.json").write_text(bad)
        with pytest.raises(DataFormatError) as err:
            build_report(TASK, inputs["runs"], [folder])
        assert str(err.value).startswith(f"{folder / 'gap.json'}: ") and message in str(err.value)
