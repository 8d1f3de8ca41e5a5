"""The report over real outputs of every analysis (no synthetic inputs), rendered in headless Chromium.

A 60-document BEIR folder cut from ImpliRet multispeaker/wknow keeps it quick: two real runs, then gapbench's own
gap (against the local LLM server), coverage, signals, ARGUS audit and ARGUS compare commands write their outputs,
and `gapbench report` puts them on one page.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import gapbench
from gapbench.cli import main
from gapbench.formats import write_beir_folder
from gapbench.types import Corpus, Qrels, Queries, TaskData

from llm_server import LLMServer
from test_report_browser import Browser, foreign  # noqa: F401  (the CDP driver and its request filter)


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    data = gapbench.get_task("impliret/multispeaker/wknow").load()
    ids = data.corpus.ids()[:60]
    root = tmp_path_factory.mktemp("real-report")
    folder = root / "wknow60"
    sub = TaskData(Corpus(data.corpus[i] for i in ids), Queries(data.queries[i] for i in ids), Qrels({i: {i: 1} for i in ids}))
    write_beir_folder(sub, folder)
    task = str(folder)
    runs = [root / "runs" / "bm25", root / "runs" / "dense"]
    for spec, out in zip(("bm25", "dense"), runs):
        assert main(["run", task, "-r", spec, "-m", "nDCG@10,R@10,R@100", "-o", str(out)]) == 0
    an = root / "analyses"
    with LLMServer(qrels={q: dict(sub.qrels[q]) for q in sub.qrels}, queries={q: sub.queries[q].text for q in sub.queries},
                   corpus={d: sub.corpus[d].text for d in sub.corpus}, noise=0.1) as srv:
        old = os.environ.get("OPENAI_API_KEY")
        os.environ["OPENAI_API_KEY"] = "sk-report-test"
        try:
            assert main(["gap", task, "--retrievers", "bm25,dense", "--llm-base-url", srv.base_url, "--llm-model",
                         "judge", "--max-queries", "10", "--depth", "10", "--pool-sizes", "10,30", "-o",
                         str(an / "gap")]) == 0
        finally:
            if old is None:
                os.environ.pop("OPENAI_API_KEY", None)
            else:
                os.environ["OPENAI_API_KEY"] = old
    assert main(["coverage", task, "--retrievers", "bm25,dense", "--clusters", "4", "--out", str(an / "coverage")]) == 0
    assert main(["signals", task, "--retrievers", "bm25,dense", "-o", str(an / "signals")]) == 0
    assert main(["argus", "compare", task, "-r", "bm25", "--kb", "landmarks-oracle", "--diagnosis", "label-prior",
                 "--variants", "original,expansion",
                 "-o", str(an / "argus")]) == 0
    return task, runs, an


@pytest.mark.slow
@pytest.mark.model
def test_report_over_real_analyses_in_chromium(analyses, tmp_path, capsys):
    task, runs, an = analyses
    out = tmp_path / "report"
    assert main(["report", task, *map(str, runs), "--analyses", str(an), "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    text = json.dumps(report)
    for kind in ("gap", "coverage", "signals", "argus_compare"):
        assert kind in text, kind
    html = (out / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    browser = Browser(Path(tmp_path / "profile"))
    try:
        page = (out / "report.html").resolve().as_uri()
        browser.load(page)
        assert browser.problems() == []
        assert foreign(browser.requests(), page) == []
        images = browser.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
        assert len(images) >= 6 and all(ok and w > 0 for ok, w in images)
        titles = browser.evaluate("Array.from(document.querySelectorAll('h2')).map(h => h.textContent)")
        assert any("gap" in t.lower() for t in titles) and any("coverage" in t.lower() for t in titles)
        assert browser.screenshot(tmp_path / "report.png").stat().st_size > 50_000
    finally:
        browser.close()
