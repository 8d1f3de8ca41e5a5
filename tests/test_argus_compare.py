"""With and without ARGUS: Original vs Expansion vs Synthesis on small real tasks, through the API and the CLI."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from fx_warm_homes import copy_home

import gapbench.cli as cli
from gapbench.analyses.argus.remedy.compare_report import read_outputs
from gapbench.analyses.argus.remedy.remedy_compare import ArgusCompareOptions, argus_compare
from gapbench.analyses.argus.remedy.compare_report import read_comparison
from gapbench.errors import ConfigError, GapbenchError, OptionsError
from gapbench.schemas import ArgusCompare
from gapbench.suites import SUITES, Suite

from test_argus_augment import SynthServer

DOCS = {
    "d0": "Ivan trained near Soyu Stadium every morning before work.",
    "d1": "Maria painted the view by Newlands Cricket Ground at dusk.",
    "d2": "Chen cooked dinner at home with friends.",
    "d3": "Omar read books about Japanese history at home.",
}
QUERIES = {"q0": "Who exercised in Japan?", "q1": "Who made art in South Africa?", "q2": "Who cooked dinner?"}
QRELS = {"q0": {"d0": 1}, "q1": {"d1": 1}, "q2": {"d2": 1}}


def beir_folder(root, docs=DOCS, queries=QUERIES, qrels=QRELS):
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                               for d, t in docs.items()))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, row in qrels.items() for d, r in row.items()))
    return str(root)


@pytest.fixture(scope="module")
def argus_cli():
    return cli.main


def test_expansion_lifts_the_gold_document_behind_a_landmark(tmp_path):
    task = beir_folder(tmp_path / "t")
    res = argus_compare(task, "bm25", kb="landmarks-oracle", diagnosis="label-prior",
                        variants=["original", "expansion"], measures=["nDCG@10", "RR@10"], k=10)
    name, row = next(iter(res.tasks.items()))
    orig, exp = res.results()["original"], res.results(name)["expansion"]
    # Original: no document shares a term with q0 or q1 ("Japanese" is not "japan" without stemming), so all score 0
    # and ties go by doc id descending (d3, d2, d1, d0): q0's gold d0 is 4th, nDCG@10 = 1/log2(5); q1's gold d1 is
    # 3rd, 1/log2(4) = 0.5. q2 ("cooked", "dinner") finds d2 first.
    assert orig.per_query["nDCG@10"]["q0"] == pytest.approx(1 / math.log2(5))
    assert orig.per_query["nDCG@10"]["q1"] == pytest.approx(0.5)
    assert orig.per_query["nDCG@10"]["q2"] == pytest.approx(1.0)
    # Expansion: the flagged landmarks' KB passages name Japan and South Africa: both golds go to rank 1
    assert exp.per_query["RR@10"] == {"q0": 1.0, "q1": 1.0, "q2": 1.0}
    assert row.deltas["expansion"]["RR@10"].delta == pytest.approx(1.0 - orig.means["RR@10"])
    d = res.model_dump(mode="json", exclude_unset=True)
    row = d["tasks"][name]
    assert row["deltas"]["expansion"]["RR@10"]["delta"] == pytest.approx(1.0 - orig.means["RR@10"])
    assert row["diagnosis"]["method"]["method"] == "label-prior"
    g = row["variants"]["expansion"]["growth"]
    assert g["n_docs"] == 4 and g["docs_with_views"] == 2 and g["indexed"] == 4 + g["n_views"]
    assert row["variants"]["original"]["growth"]["n_views"] == 0
    assert "synthesis" not in row["variants"]


def test_cli_compare_writes_json_md_png_with_synthesis(tmp_path, argus_cli, monkeypatch):
    import gapbench.llm.local as local

    def no_embedded(*a, **kw):
        raise AssertionError("an explicit --llm-base-url/--llm-model must not ask for the embedded LLM")

    monkeypatch.setattr(local, "embedded_server", no_embedded)
    task = beir_folder(tmp_path / "t")
    out = tmp_path / "out"
    with SynthServer() as srv:
        rc = argus_cli(["argus", "compare", task, "-r", "bm25", "--kb", "landmarks-oracle", "--diagnosis",
                        "label-prior", "--llm-base-url", srv.base_url, "--llm-model", "judge", "-m",
                        "nDCG@5,nDCG@10,R@10", "--k", "10", "-o", str(out)])
        assert rc == 0
        assert srv.counts["chat"] == 2  # one synthesis call per document with flagged entities that have passages
    d = read_outputs(out)
    assert d["kind"] == "argus_compare" and d["version"] == 1 and d["retriever"] == "bm25"
    row = next(iter(d["tasks"].values()))
    assert list(row["variants"]) == ["original", "expansion", "synthesis"]
    assert row["variants"]["synthesis"]["growth"]["n_views"] == 2
    assert row["variants"]["synthesis"]["growth"]["views_per_doc"] == 0.5
    assert row["llm"]["requests"] == 2 and row["llm"]["prompt_tokens"] > 0
    assert d["config"]["llm"]["endpoint"] == srv.base_url and d["config"]["llm"]["model"] == "judge"
    for v in ("expansion", "synthesis"):
        assert set(row["deltas"][v]) == {"nDCG@5", "nDCG@10", "R@10"}
        for m, x in row["deltas"][v].items():
            assert x["delta"] == pytest.approx(row["variants"][v]["means"][m] - row["variants"]["original"]["means"][m])
            assert 0.0 <= x["p_randomization_holm"] <= 1.0
    md = (out / "argus_compare.md").read_text()
    assert "| expansion |" in md and "| synthesis |" in md and "label-prior" in md
    assert (out / "argus_compare.png").read_bytes()[:4] == b"\x89PNG"
    # the file is the model: read back, it is the same comparison and renders the same Markdown; the per-query
    # results were only in the memory of the process that ran it
    back = read_comparison(out)
    assert isinstance(back, ArgusCompare) and str(back) == md
    assert back.model_dump(mode="json", exclude_unset=True) == d
    assert back.variants == ["original", "expansion", "synthesis"]
    assert back.tasks[next(iter(d["tasks"]))].variants["synthesis"].growth.synthesis.asked == 2
    with pytest.raises(GapbenchError, match="per-query results .* are not kept in argus_compare.json"):
        back.results()


def test_a_file_written_by_gapbench_0_1_loads_and_renders():
    old = Path(__file__).parent / "fixtures" / "outputs_v0_1" / "argus_compare.json"
    cmp = read_comparison(old)
    # nothing lost, nothing invented
    assert cmp.model_dump(mode="json", exclude_unset=True) == json.loads(old.read_text())
    assert cmp.config.diagnosis is None and cmp.config.pipeline_check is None  # keys that file predates
    row = cmp.tasks["/tmp/p2/t"]
    assert row.diagnosis.method.method == "label-prior" and row.diagnosis.seconds.audit is None
    assert row.deltas["expansion"]["nDCG@5"].delta == pytest.approx(0.356441147308869)
    assert "probe none (label-prior fallback)" in str(cmp) and "| expansion | 100.00 (+35.64) |" in str(cmp)


def test_options_name_the_setting_and_the_command_names_the_flag(tmp_path, argus_cli, capsys):
    with pytest.raises(OptionsError, match=r"^ArgusCompareOptions: tau must be a predicted RPS .*got 0\.$"):
        ArgusCompareOptions(tau=0)
    # k is gapbench.contract's Depth, worded as every options class words it
    with pytest.raises(OptionsError,
                       match=r"k_aug must be at least 1, got 0; k must be greater than or equal to 1, got 0\.$"):
        ArgusCompareOptions(k=0, k_aug=0)
    with pytest.raises(OptionsError, match=r"variants must include original .*got \['expansion'\]"):
        ArgusCompareOptions(variants=["expansion"])
    with pytest.raises(OptionsError, match=r"variants\.1 must be 'original', 'expansion' or 'synthesis', got 'sy'"):
        ArgusCompareOptions(variants=["original", "sy"])
    with pytest.raises(OptionsError, match=r"probe must be left out: diagnosis 'label-prior' uses no probe"):
        ArgusCompareOptions(diagnosis="label-prior", probe=tmp_path)
    with pytest.raises(OptionsError, match=r"measures must be measure names ir-measures reads; measure 'nDCG@x'"):
        ArgusCompareOptions(measures=["nDCG@x"])
    with pytest.raises(OptionsError, match=r"no_such is not a setting of this analysis"):
        ArgusCompareOptions(no_such=1)
    opts = ArgusCompareOptions(variants=["original", "expansion", "original"], measures=None, probe=str(tmp_path))
    assert opts.variants == ("original", "expansion") and opts.measures[:2] == ("nDCG@5", "nDCG@10")
    assert opts.probe == tmp_path and ArgusCompareOptions().kb == "wikipedia-slice"
    task = beir_folder(tmp_path / "t")
    assert argus_cli(["argus", "compare", task, "-r", "bm25", "--tau", "2", "--variants", "expansion"]) == 2
    err = capsys.readouterr().err
    assert "--tau must be a predicted RPS" in err and "--variants must include original" in err and "tau must" not in \
        err.replace("--tau must", "")


def test_suite_reports_full_benchmark_avg(tmp_path):
    a = beir_folder(tmp_path / "a")
    b = beir_folder(tmp_path / "b", queries={"q0": "Who exercised in Japan?"}, qrels={"q0": {"d0": 1}})
    SUITES.register("argus-test-suite", Suite("argus-test-suite", (a, b), "test"), replace=True)
    try:  # the process's registry is every later test's too: a suite left there changes what their errors list
        res = argus_compare("argus-test-suite", "bm25", kb="landmarks-oracle", diagnosis="label-prior",
                            variants=["original", "expansion"], measures=["nDCG@10"], k=10)
    finally:
        SUITES.unregister("argus-test-suite")
    d = res.model_dump(mode="json", exclude_unset=True)
    assert d["suite"] == "argus-test-suite" and len(d["tasks"]) == 2
    per = [t["variants"]["original"]["means"]["nDCG@10"] for t in d["tasks"].values()]
    assert d["full_benchmark_avg"]["original"]["nDCG@10"] == pytest.approx(sum(per) / 2)
    # task b's only query is q0 (original 1/log2(5)), task a's mean is (1/log2(5) + 0.5 + 1) / 3
    assert per[1] == pytest.approx(1 / math.log2(5))
    assert per[0] == pytest.approx((1 / math.log2(5) + 0.5 + 1.0) / 3)
    assert d["full_benchmark_avg"]["expansion"]["nDCG@10"] == pytest.approx(1.0)


def test_bad_input_errors(tmp_path, argus_cli, capsys):
    task = beir_folder(tmp_path / "t")
    with pytest.raises(ConfigError, match="variants"):
        argus_compare(task, "bm25", kb="landmarks-oracle", diagnosis="label-prior", variants=["expansion"])
    rc = argus_cli(["argus", "compare", task, "-r", "bm25", "--kb", "landmarks-oracle", "--probe",
                    str(tmp_path / "missing")])
    assert rc == 2 and "does not exist" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- synthesis without an endpoint
NO_ENDPOINT = ("OPENAI_BASE_URL", "OPENAI_API_KEY")
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def no_endpoint(monkeypatch):
    for name in NO_ENDPOINT:
        monkeypatch.delenv(name, raising=False)


def test_synthesis_without_an_endpoint_asks_for_the_embedded_llm_once(tmp_path, argus_cli, no_endpoint, monkeypatch,
                                                                    capsys):
    """No --llm-base-url, no --llm-model: the embedded server is asked for (once, for SmolLM2), and synthesis talks
    to what it answers with. The test server stands in for llama.cpp and knows only the SmolLM2 name."""
    import gapbench.llm.local as local

    with SynthServer(models={SMOLLM2}) as srv:
        asked = []

        def embedded_server(model=None, **kw):
            asked.append(model)
            return type("Embedded", (), {"base_url": srv.base_url, "model": SMOLLM2})()

        monkeypatch.setattr(local, "embedded_server", embedded_server)
        out = tmp_path / "out"
        rc = argus_cli(["argus", "compare", beir_folder(tmp_path / "t"), "-r", "bm25", "--kb", "landmarks-oracle",
                        "--diagnosis", "label-prior",
                        "--variants", "original,synthesis", "-m", "nDCG@10", "--k", "10", "-o", str(out)])
        assert rc == 0, capsys.readouterr().err
        assert srv.counts["chat"] == 2  # the two documents with flagged entities that have KB passages
    assert asked == [None]  # one server asked for, the default model: the notice is printed once
    d = read_outputs(out)
    llm = d["config"]["llm"]
    assert llm["endpoint"] == srv.base_url and llm["model"] == SMOLLM2 and llm["concurrency"] == 1
    row = next(iter(d["tasks"].values()))
    assert row["variants"]["synthesis"]["growth"]["n_views"] == 2 and row["llm"]["requests"] == 2


def test_synthesis_without_an_endpoint_or_the_extra_says_how_to_get_either(tmp_path, argus_cli, no_endpoint,
                                                                           monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if gapbench[local-llm] were not installed
    task = beir_folder(tmp_path / "t")
    with pytest.raises(ConfigError) as err:
        argus_compare(task, "bm25", kb="landmarks-oracle", diagnosis="label-prior", variants=["original", "synthesis"],
                      measures=["nDCG@10"])
    said = str(err.value)
    assert said.startswith("no LLM endpoint given and the embedded LLM is not installed; give an OpenAI-compatible "
                           "endpoint")
    assert "pip install 'gapbench[local-llm]'" in said
    assert said.endswith(" To compare without synthesis, give variants=('original', 'expansion').")
    rc = argus_cli(["argus", "compare", task, "-r", "bm25", "--kb", "landmarks-oracle", "--diagnosis", "label-prior",
                    "--variants", "original,expansion,synthesis", "-m", "nDCG@10"])
    err_text = capsys.readouterr().err
    assert rc == 2 and "the embedded LLM is not installed" in err_text and "variants=('original', 'expansion')" in err_text


def test_without_an_endpoint_only_original_and_expansion_run_and_the_hint_says_how_to_add_synthesis(
        tmp_path, argus_cli, no_endpoint, monkeypatch, capsys):
    """No endpoint and no --variants: the embedded LLM is not started (it took 15 minutes on 2 cores before); the
    comparison has Original and Expansion, and stderr, the notes and the Markdown say how to add Synthesis."""
    import gapbench.llm.local as local
    from gapbench.analyses.argus.remedy.remedy_compare import SYNTHESIS_SKIPPED

    def no_embedded(*a, **kw):
        raise AssertionError("no endpoint and no --variants: the embedded LLM must not be started")

    monkeypatch.setattr(local, "embedded_server", no_embedded)
    out = tmp_path / "out"
    rc = argus_cli(["argus", "compare", beir_folder(tmp_path / "t"), "-r", "bm25", "--kb", "landmarks-oracle",
                    "--diagnosis", "label-prior", "-m", "nDCG@10", "--k", "10", "-o", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert f"gapbench: {SYNTHESIS_SKIPPED}\n" in captured.err
    assert "--llm-base-url" in SYNTHESIS_SKIPPED and "--variants original,expansion,synthesis" in SYNTHESIS_SKIPPED
    d = read_outputs(out)
    assert d["config"]["variants"] == ["original", "expansion"] and d["config"]["llm"] is None
    row = next(iter(d["tasks"].values()))
    assert list(row["variants"]) == ["original", "expansion"] and row["llm"] is None
    assert SYNTHESIS_SKIPPED in d["notes"] and SYNTHESIS_SKIPPED in (out / "argus_compare.md").read_text()
    # an endpoint in the environment ($OPENAI_BASE_URL, or $OPENAI_API_KEY for OpenAI's) brings Synthesis back
    from gapbench.analyses.argus.remedy.remedy_compare import ArgusCompareOptions, _variants

    assert _variants(ArgusCompareOptions()) == (("original", "expansion"), True)
    assert _variants(ArgusCompareOptions(variants=["original", "synthesis"])) == (("original", "synthesis"), False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert _variants(ArgusCompareOptions()) == (("original", "expansion", "synthesis"), False)
    monkeypatch.delenv("OPENAI_API_KEY")
    with SynthServer() as srv:  # through Python, with the endpoint in the environment
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        cmp = argus_compare(beir_folder(tmp_path / "t"), "bm25", kb="landmarks-oracle", diagnosis="label-prior",
                            llm_model="judge", measures=["nDCG@10"], k=10)
    assert cmp.variants == ["original", "expansion", "synthesis"] and SYNTHESIS_SKIPPED not in cmp.notes
    assert next(iter(cmp.tasks.values())).llm["requests"] == 2  # answered by the server or by the LLM cache of an earlier test


@pytest.mark.slow
def test_pinned_impliret_multispeaker_wknow_bm25_expansion(wknow_ner_home):
    """The real case: ImpliRet multispeaker wknow, bm25, label-prior diagnosis, the packaged landmarks KB. spaCy's
    mentions of the 1,500 passages are tagged once in the session (tests/fx_docs.py, by the command's own call,
    extract_mentions) and found in the cache, as by a user's second comparison; the tagging itself is checked on the
    small tasks above and in tests/test_argus_ner.py."""
    copy_home(wknow_ner_home)
    res = argus_compare("impliret/multispeaker/wknow", "bm25", kb="landmarks-oracle", diagnosis="label-prior",
                        variants=["original", "expansion"], measures=["nDCG@10", "R@100"], k=100)
    t = res.tasks["impliret/multispeaker/wknow"]
    assert t.variants["original"].means["nDCG@10"] == pytest.approx(0.15176, abs=1e-4)  # published 15.20 (bm25s)
    assert t.variants["expansion"].means["nDCG@10"] == pytest.approx(0.70449, abs=1e-4)
    assert t.variants["expansion"].growth.n_views == 2258
    assert t.deltas["expansion"]["nDCG@10"].p_randomization_holm < 0.001


@pytest.mark.model
def test_cli_probe_path_loads_a_gapbench_probe_for_dense(tmp_path, argus_cli):
    """--probe PATH with a probe from gapbench.analyses.argus.probe.training.train_probe, keyed by dense's span-encoder fingerprint."""
    import hashlib

    import numpy as np

    from gapbench.analyses.argus.remedy.diagnosis import diagnose, mention_embeddings
    from gapbench.analyses.argus.remedy.ner import extract_mentions
    from gapbench.analyses.argus.probe.training import Probe, train_probe
    from gapbench.retrieval import get_retriever
    from gapbench.types import Corpus, Document

    dense = get_retriever("dense")
    span_fp = hashlib.sha256(f"argus-span-mean:v1:{dense.fingerprint}".encode()).hexdigest()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 384)).astype(np.float32)
    y = np.clip(0.5 + x[:, 0] * 0.2, 0, 1)
    probe, _ = train_probe(x, y, span_fp, seed=0, families=("ridge",))
    probe.save(tmp_path / "probe")
    task = beir_folder(tmp_path / "t")
    out = tmp_path / "out"
    rc = argus_cli(["argus", "compare", task, "-r", "dense", "--kb", "landmarks-oracle", "--probe",
                    str(tmp_path / "probe"), "--variants", "original,expansion", "-m", "nDCG@10", "--k", "10",
                    "-o", str(out)])
    assert rc == 0
    row = next(iter(read_outputs(out)["tasks"].values()))
    assert row["diagnosis"]["method"]["method"] == "probe"
    assert row["diagnosis"]["method"]["probe_fingerprint"] == span_fp
    # the same flags by hand: the loaded probe on the span embeddings, min per entity, below 0.3
    corpus = Corpus(Document(d, t) for d, t in DOCS.items())
    ms = extract_mentions(corpus)
    emb, _ = mention_embeddings(dense, corpus, ms)
    pred = Probe.load(tmp_path / "probe", span_fp).predict(emb)
    flat = [m for d in ms for m in ms[d]]
    low: dict = {}
    for m, p in zip(flat, pred):
        low[(m.doc_id, m.key)] = min(low.get((m.doc_id, m.key), 1.0), float(p))
    assert row["diagnosis"]["n_flagged_entities"] == sum(1 for v in low.values() if v < 0.3)
    assert diagnose(corpus, dense, probe=probe).stats()["n_flagged_entities"] == row["diagnosis"]["n_flagged_entities"]


def test_ner_help_names_every_accepted_form():
    from gapbench.cli.argus_compare import FLAGS

    said = next(p for p in FLAGS.click_params() if p.name == "ner").help  # the field's description
    assert said.startswith("spacy (offline default), auto (the paper's dslim/bert-base-NER when it is on disk")
    assert said.endswith("else spacy) or a transformers NER model name or folder.")
