"""The gap report: built from two real runs (bm25, bm25-lucene on ImpliRet wknow), a real gap analysis (tournament
verifier against the local LLM server) and small synthetic analysis files that exercise the generic sections."""

from __future__ import annotations

import base64
import json
import re
import statistics
import sys
from pathlib import Path

import pytest

from gapbench.errors import ConfigError, DataFormatError
from gapbench.products.report import KNOWN_ANALYSES, build_report

TASK = "impliret/multispeaker/wknow"
GAP_QUERIES = 8


def _cli():
    import gapbench.cli as cli
    from gapbench.cli.report import register

    if not any(c.name == "report" for c in cli.app.registered_commands):
        register(cli.app)
    return cli.main


def _synthetic(base: Path) -> dict[str, Path]:
    """TEST INPUTS, not outputs of the real analyses: minimal coverage/signals/ARGUS files in plausible schemas."""
    note = "TEST INPUT written by tests/test_report.py; not produced by an analysis"
    files = {
        "coverage": {"kind": "coverage", "task": TASK, "version": 1, "note": note, "n_clusters": 3, "coverage": 0.62,
                     "clusters": [
                         {"cluster": "c0", "n_docs": 120, "n_queries": 40, "covered": 0.9, "similarity": [0.8, 0.7, 0.9, 0.6]},
                         {"cluster": "c1", "n_docs": 80, "n_queries": 5, "covered": 0.4, "similarity": [0.3, 0.5, 0.2]},
                         {"cluster": "c2", "n_docs": 50, "n_queries": 0, "covered": 0.0, "similarity": [0.1, 0.15]},
                     ]},
        "signals": {"kind": "signals", "task": TASK, "version": 1, "note": note,
                    "signals": {"query_length": {"auc": 0.61, "n": 1500}, "bm25_top_score": {"auc": 0.72, "n": 1500}},
                    "gate": {"signal": "bm25_top_score", "threshold": 0.4, "precision": 0.7, "recall": 0.5}},
        "argus_audit": {"kind": "argus_audit", "task": TASK, "version": 1, "note": note,
                        "rps": [round(0.05 * i, 2) for i in range(20)], "n_queries": 20,
                        "rps_per_query": {str(q): round(0.04 * q, 2) for q in range(25)}},
        "argus_compare": {"kind": "argus_compare", "task": TASK, "version": 1, "note": note,
                          "before": {"nDCG@10": 0.1518, "R@100": 0.9827}, "after": {"nDCG@10": 0.1702, "R@100": 0.985}},
        "blindspots": {"kind": "blindspots", "task": TASK, "version": 1, "note": note, "n_probes": 7},
    }
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
    ax.bar(["c0", "c1", "c2"], [0.9, 0.4, 0.0])
    ax.set_title("TEST INPUT: coverage")
    fig.savefig(out["coverage"] / "coverage_clusters.png")
    plt.close(fig)
    return out


def build_inputs(home: Path) -> dict:
    """Real runs, a real gap analysis and synthetic analyses, built once per session under GAPBENCH_HOME."""
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
    from gapbench.analyses.gap import measure_gap, save_report
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
        gap = measure_gap(TASK, data, [load_run(d) for d in runs.values()], verifier.rerank_pools, depth=20,
                          pool_sizes=[10, 20, 40], query_ids=qids, calls=lambda: verifier.llm_calls)
    gap.meta["verifier"] = {"name": "tournament"}
    save_report(gap, base / "gap")
    out = {"runs": [str(d) for d in runs.values()], "gap": str(base / "gap"),
           **{k: str(v) for k, v in _synthetic(base).items()}}
    marker.write_text(json.dumps(out))
    return _paths(out)


def _paths(stored: dict) -> dict:
    return {k: [Path(x) for x in v] if isinstance(v, list) else Path(v) for k, v in stored.items()}


@pytest.fixture(scope="module")
def inputs(_gapbench_home):
    return build_inputs(Path(_gapbench_home))


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
    # signals: a mapping of records becomes a table; the gate's scalars a key/value table
    assert "| query_length | 0.6100 | 1500 |" in md and "| bm25_top_score | 0.7200 | 1500 |" in md
    assert "| gate.threshold | 0.4000 |" in md
    # ARGUS before/after with the deltas
    assert "| nDCG@10 | 0.1518 | 0.1702 | +0.0184 |" in md and "| R@100 | 0.9827 | 0.9850 | +0.0023 |" in md
    # RPS histogram, per-cluster box plot, and the analysis's own PNG embedded
    figs = {a["kind"]: a["figures"] for a in data["analyses"]}
    assert any(f.endswith("-rps.png") for f in figs["argus_audit"])
    assert any("rps-per-query" in f for f in figs["argus_audit"]) and "| rps_per_query | 25 values, mean 0.4800 |" in md
    assert any("similarity" in f for f in figs["coverage"]) and any("coverage-clusters" in f for f in figs["coverage"])
    assert "| c1 | 80 | 5 | 0.4000 |" in md
    html = paths["html"].read_text()
    assert html.count('src="data:image/png;base64,') == len(report.figures) == len(data["figures"])
    for name in data["figures"]:
        assert (paths["md"].parent / name).stat().st_size > 1000 and f"]({name})" in md


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
    (other / "signals.json").write_text(json.dumps({"kind": "signals", "task": "impliret/unispeaker/wknow", "version": 1}))
    r1 = build_report(TASK, inputs["runs"], [inputs["gap"], other])
    assert r1.data["not_run"] == ["coverage", "argus_audit", "argus_compare", "signals"]
    assert r1.data["ignored"][0]["source"].endswith("signals.json")
    assert "not run" in r1.to_markdown() and "impliret/unispeaker/wknow" in r1.to_markdown()
    r2 = build_report(TASK, inputs["runs"], [inputs["gap"], other])
    assert r1.to_markdown() == r2.to_markdown() and r1.to_dict() == r2.to_dict()
    assert [f.png for f in r1.figures] == [f.png for f in r2.figures]


def test_single_system(inputs):
    r = build_report(TASK, inputs["runs"][:1], [])
    assert r.data["tests"] == [] and r.data["per_query"]["win_tie_loss"] == []
    assert "One system only" in r.to_markdown()
    assert r.data["not_run"] == list(KNOWN_ANALYSES)


def test_strict_gap_json_and_bad_inputs(inputs, tmp_path):
    bad = tmp_path / "gap"
    bad.mkdir()
    gap = json.loads((inputs["gap"] / "gap.json").read_text())
    del gap["pool_recall"]
    (bad / "gap.json").write_text(json.dumps(gap))
    with pytest.raises(DataFormatError, match=r"gap\.json: key 'pool_recall' must be a number"):
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
    assert "gap.json: key 'measure' must be a string" in capsys.readouterr().err


def test_generic_nested_tables(inputs, tmp_path):
    # TEST INPUT shaped like argus_compare's documented schema (tasks -> variants -> means/growth)
    doc = {"kind": "argus_compare", "task": TASK, "version": 1, "retriever": "bm25",
           "tasks": {TASK: {"n_queries": 1500, "variants": {
               "original": {"means": {"nDCG@10": 0.1518, "R@100": 0.9827}, "growth": {"n_views": 0}},
               "expansion": {"means": {"nDCG@10": 0.16, "R@100": 0.985}, "growth": {"n_views": 40}}}}}}
    (tmp_path / "argus_compare.json").write_text(json.dumps(doc))
    md = build_report(TASK, inputs["runs"], [tmp_path]).to_markdown()
    assert f"*tasks.{TASK}.variants: means*" in md
    assert "| original | 0.1518 | 0.9827 |" in md and "| expansion | 0.1600 | 0.9850 |" in md
    assert "| expansion | 40 |" in md and f"| tasks.{TASK}.n_queries | 1500 |" in md
