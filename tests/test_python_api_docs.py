"""docs/python-api.md runs as written: every Python block, in order, in one namespace, as a user pasting them would.

The LLM the gap example asks is the real local HTTP test server (tests/llm_server.py), judging by ImpliRet's qrels,
reached through $OPENAI_BASE_URL and $OPENAI_MODEL as the page says. After the blocks, the values they computed are
checked against gapbench's own lower-level functions and against hand-derived facts.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest

import gapbench
from llm_server import LLMServer

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
TASK = "impliret/multispeaker/wknow"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_every_analysis_has_a_worked_example():
    code = "\n".join(blocks())
    for verb in ("run", "compare", "report", "regress", "gap", "signals", "coverage", "argus_audit", "argus_probe",
                 "argus_compare"):
        assert f"gapbench.{verb}(" in code, verb
    for options in ("GapOptions", "SignalsOptions", "CoverageOptions", "ArgusAuditOptions", "ArgusProbeOptions",
                    "ArgusCompareOptions"):
        assert f"{options}(" in code and options in gapbench.__all__, options


def test_the_analyses_are_exported_lazily():
    import subprocess
    import sys

    code = ("import sys, gapbench\n"
            "names = ['gap', 'signals', 'coverage', 'argus_audit', 'argus_probe', 'argus_compare', 'report', "
            "'regress', 'GapOptions', 'ArgusProbeOptions']\n"
            "before = [n for n in ('gapbench.analyses.gap', 'gapbench.products.report_build') if n in sys.modules]\n"
            "objs = [getattr(gapbench, n) for n in names]\n"
            "print(before, all(callable(o) for o in objs))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] True"


@pytest.mark.slow
def test_the_python_api_page_runs_as_written(tmp_path, monkeypatch, capsys, wknow_ner_home, wknow_coverage_home):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # the LLM answers and embeddings cached apart
    # but spaCy's mentions of the task's passages, which argus_compare tags, and coverage's spaCy entities of them (the
    # first 300 characters) with MiniLM's vectors of their forms, as the session computed them once (tests/fx_docs.py;
    # the ARGUS page's `argus compare` and the coverage page's worked example on the task read the same)
    for seeded in (wknow_ner_home, wknow_coverage_home):
        shutil.copytree(seeded / "home", tmp_path / "home", dirs_exist_ok=True)
    data = gapbench.get_task(TASK).load()
    with LLMServer(qrels={q: dict(data.qrels[q]) for q in data.qrels},
                   queries={q: data.queries[q].text for q in data.queries},
                   corpus={d: data.corpus[d].text for d in data.corpus}) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_MODEL", "judge")
        namespace: dict = {}
        for i, block in enumerate(blocks()):
            exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)
        calls = server.counts["chat"]
    out = capsys.readouterr().out
    ns = namespace

    # run and compare: the same numbers as evaluating the run again, and two run results compare like their runs
    base, tuned = ns["base"], ns["tuned"]
    again = gapbench.evaluate(base.run, data.qrels, ["nDCG@10", "AP", "P@10"])
    assert base.means == again.means and base.n_queries == 1500
    assert base.manifest.versions["gapbench"] == gapbench.__version__
    direct = gapbench.compare([base.run, tuned.run], data.qrels, list(base.measures))
    assert [t.__dict__ for t in ns["comparison"].tests] == [t.__dict__ for t in direct.tests]
    assert f"map                   \tall\t{base.means['AP']:.4f}" in out
    # evaluate and compare take their options objects: the same means, the alpha asked for
    assert ns["again"].means["nDCG@10"] == base.means["nDCG@10"] and ns["again"].n_queries == 1500
    assert ns["strict"].alpha == 0.01 and "True\n0.01\n" in out

    # report and regress over the in-memory results: the same rows as over run directories written by run
    assert [s.system for s in ns["report"].systems] == ["bm25", "bm25:k1=0.9,b=0.4"]
    assert all(s.run_dir.endswith("(in memory)") for s in ns["report"].systems)
    # the report is the model of report.json (a ReportData) that also renders itself
    from gapbench.schemas.report import ReportData
    assert isinstance(ns["report"], ReportData) and str(ns["report"]) == ns["report"].to_markdown()
    assert f"{ns['report'].main_measure} ['bm25', 'bm25:k1=0.9,b=0.4'] " in out
    written = [gapbench.run(TASK, spec, measures=["nDCG@10"], output=tmp_path / name)
               for spec, name in (("bm25", "a"), ("bm25:k1=0.9,b=0.4", "b"))]
    from gapbench.products.regress import regress as regress_dirs

    by_dirs = regress_dirs(tmp_path / "a", tmp_path / "b", measure="nDCG@10", max_drop=0.01)
    gate = ns["gate"]
    assert [r.__dict__ for r in gate.rows] == [r.__dict__ for r in by_dirs.rows]
    assert gate.rows[0].drop == pytest.approx(base.means["nDCG@10"] - tuned.means["nDCG@10"])
    assert gate.passed and gate.baseline == "bm25 on impliret/multispeaker/wknow (in memory)"
    assert gapbench.regress(written[0], written[1], measure="nDCG@10").baseline == str(tmp_path / "a")

    # the gap: six queries judged by the server, whose verifier knows the qrels, so it ranks at least as well
    gap = ns["gap"].model_dump(mode="json")
    assert calls > 0 and gap["n_queries"] == 6
    # signals, coverage, audit, probe, comparison: their reports, with the numbers the options asked for
    assert ns["signals"].n_queries == 300
    cov = ns["coverage"]
    assert cov.clustering.k == 8 and 0 < cov.coverage.n_touched <= 8
    # the plain mean over the judged queries is the run's own nDCG@10 on them
    assert cov.systems["bm25"].mean == pytest.approx(base.means["nDCG@10"])
    audit = ns["audit"]
    assert audit.k == 50 and audit.n_requested == 300
    # a random encoder ranks a target among ~300 candidates by chance: its mean RPS stays near k/N
    assert abs(audit.mean_rps - audit.chance) < 0.1
    assert ns["probe_report"].selected.family == "ridge" and math.isfinite(ns["probe_report"].test.rmse)
    argus = ns["argus"]
    assert set(argus.results()) == set(argus.tasks["impliret/multispeaker/wknow"].variants) == {"original", "expansion"}
    assert argus.results()["original"].means["nDCG@10"] == pytest.approx(base.means["nDCG@10"])
