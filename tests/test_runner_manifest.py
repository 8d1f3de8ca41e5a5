"""What ``gapbench.run`` records reads back through the validated read path: a run directory written with a reranker
(task defaults, LLM settings and answers in its manifest, which RunManifest refused before it declared task_defaults)
loads with ``load_manifest``, and the document read back is the manifest the run returned."""

from __future__ import annotations

from pathlib import Path

import gapbench
import gapbench.tasks.obliq as obliq
from gapbench.store import MANIFEST_VERSION, load_manifest, load_results

from llm_server import LLMServer

FIXTURES = Path(__file__).parent / "fixtures" / "obliq"


def test_a_reranked_run_reads_back(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))  # a fresh answer cache
    data = obliq.load("math", data_dir=str(FIXTURES))
    judge = LLMServer(qrels={q: dict(data.qrels[q]) for q in data.qrels},
                      queries={q: data.queries[q].text for q in data.queries},
                      corpus={d: data.corpus[d].text for d in data.corpus})
    with judge as srv:
        result = gapbench.run(f"obliq/math:data_dir={FIXTURES}", "bm25", k=20, reranker="tournament:batch_size=3",
                              llm_base_url=srv.base_url, llm_model="judge", output=tmp_path / "run")
    manifest = load_manifest(tmp_path / "run")
    assert manifest["manifest_version"] == MANIFEST_VERSION
    assert manifest == result.manifest.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert manifest["reranker"]["task_defaults"] == {"promote": 2, "max_final": 16}
    assert manifest["reranker"]["llm"]["model"] == "judge" and manifest["reranker"]["answers"]["rankings"] > 0
    assert list(manifest["timings"]) == ["index_s", "search_s", "rerank_s"]
    assert load_results(tmp_path / "run").means == result.means
