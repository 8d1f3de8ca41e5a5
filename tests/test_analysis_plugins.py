"""Each analysis tested as a plugin author's would be (issue 25 part 5): ``gapbench.testing.AnalysisContract`` checks
that it registers through the entry-point group ``gapbench.analyses`` (verbs, options, report models, commands) and
that each verb, run on a small task, returns its report model, which reads back equal from its JSON."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from gapbench.errors import GapbenchError
from gapbench.plugins import GROUP, Analysis, PluginError, Verb, analyses, get_analysis, load_entry_point
from gapbench.testing import AnalysisContract, contract_data, tiny_task
from gapbench.types import Run


class PoolOrder:
    """A verifier without an LLM: each pool ranked by its judgements, then by doc id."""

    name = "pool-order"

    def __init__(self, qrels):
        self.qrels = qrels

    def rerank(self, queries, run, corpus):
        return run

    def rerank_pools(self, queries, pools, corpus, seed=None):
        return Run({q: {d: self.qrels.get(q, {}).get(d, 0) + 1.0 / (2 + i) for i, d in enumerate(sorted(pool))}
                    for q, pool in pools.items()}, "pool-order")


class HashEmbedder:
    """Eight seeded dimensions per text, from its hash: coverage's embedder without a model."""

    def embed(self, texts):
        rows = [np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=8)
                for t in texts]
        return np.asarray(rows, dtype=np.float32)


class HashValues(HashEmbedder):
    """HashEmbedder under the retriever's name that obliq build's ``embedder`` option takes (it calls only embed)."""

    name = "hash-values"

    def index(self, corpus):
        raise NotImplementedError("obliq build only embeds")

    def search(self, queries, k, exclude=None):
        raise NotImplementedError("obliq build only embeds")


class TestGap(AnalysisContract):
    analysis = "gap"

    def call(self, verb, function, options, task):
        return function(task, ["bm25"], options(verifier=PoolOrder(contract_data().qrels), depth=5, pool_sizes=(3, 8),
                                                max_queries=4, seed=1))


class TestSignals(AnalysisContract):
    analysis = "signals"

    def call(self, verb, function, options, task):
        return function(task, "bm25", options(window=5, n_bootstrap=20, bar=0.5))


class TestCoverage(AnalysisContract):
    analysis = "coverage"

    def call(self, verb, function, options, task):
        return function(task, ["bm25"], options(embedder=HashEmbedder(), clusters=3, n_resamples=20, min_queries=1))


class TestArgus(AnalysisContract):
    analysis = "argus"

    def call(self, verb, function, options, task):
        # audit, probe and sweep: the shipped slice, seeded random vectors as the encoder
        if verb == "argus_audit":
            return function(None, "random", options(k=5, n=20))
        if verb == "argus_sweep":
            return function(None, ["random"], options(ns=(20,), ks=(5,)))
        if verb == "argus_probe":
            return function(None, "random", options(families=("ridge",)))
        return function(task, "bm25", options(kb="landmarks-oracle", diagnosis="label-prior",
                                              variants=("original", "expansion"), measures=("nDCG@10",), k=10))


class TestObliq(AnalysisContract):
    analysis = "obliq"

    def call(self, verb, function, options, task):
        from obliq_server import ObliqServer
        from test_obliq_build import DOCS, client, world
        from test_obliq_build import options as build_options

        folder = Path(task).parent
        corpus = folder / "obliq_corpus.jsonl"
        corpus.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()), encoding="utf-8")
        from gapbench.retrieval import RETRIEVERS

        # the values clustered by their hashes' vectors rather than MiniLM's (its load was most of this test): equal
        # values still fall together, and the report model is what this contract checks (the clusters MiniLM makes:
        # tests/test_obliq_build.py)
        RETRIEVERS.register("zz-hash-embedder", f"{__name__}:HashValues")
        try:
            with ObliqServer(world()) as srv:
                return function(str(corpus), build_options(folder / "built", pool_retrievers=("bm25",),
                                                           embedder="zz-hash-embedder",
                                                           llm_client=client(srv, folder / "llm.sqlite")))
        finally:
            RETRIEVERS.unregister("zz-hash-embedder")


def test_every_analysis_of_gapbench_is_registered():
    assert list(analyses()) == ["argus", "coverage", "gap", "obliq", "signals"]
    assert [v.name for v in get_analysis("argus").verbs] == ["argus_audit", "argus_probe", "argus_sweep",
                                                            "argus_compare"]
    assert dict(get_analysis("argus").augmenters) == {
        "argus-expand": "gapbench.analyses.argus.remedy.augment:augment_for_run",
        "argus-synth": "gapbench.analyses.argus.remedy.augment:augment_for_run"}
    with pytest.raises(GapbenchError, match=r"^unknown analysis 'covrage'\. Did you mean 'coverage'\?"):
        get_analysis("covrage")


class _EntryPoint:
    """What importlib.metadata gives for one entry point, for the refusals below."""

    def __init__(self, name, value, obj):
        self.name, self.value, self.obj, self.dist = name, value, obj, None

    def load(self):
        if isinstance(self.obj, Exception):
            raise self.obj
        return self.obj


def test_an_unusable_entry_point_is_named_with_the_fix():
    good = Analysis("novelty", "How novel.", verbs=(Verb("novelty", "math:sqrt", "math:pi", "math:e"),))
    assert load_entry_point(_EntryPoint("novelty", "pkg.plugin:ANALYSIS", good)) is good
    cases = [
        (_EntryPoint("novelty", "pkg.plugin:ANALYSIS", ModuleNotFoundError("No module named 'pkg'")),
         r"^entry point 'novelty' = 'pkg.plugin:ANALYSIS' of group 'gapbench.analyses' cannot be imported "
         r"\(ModuleNotFoundError: No module named 'pkg'\); reinstall the distribution that declares it, or uninstall"),
        (_EntryPoint("novelty", "pkg.plugin:ANALYSIS", {"name": "novelty"}),
         r"gives dict, expected a gapbench.plugins.Analysis; point the entry point at one\.$"),
        (_EntryPoint("other", "pkg.plugin:ANALYSIS", good),
         r"gives the analysis 'novelty'; name the entry point as the analysis\.$"),
    ]
    for ep, message in cases:
        with pytest.raises(PluginError, match=message):
            load_entry_point(ep)
    # a verb whose parts are not what they must be: math.pi is no options model
    with pytest.raises(PluginError, match=r"^verb 'novelty': the options 'math:pi' is not a pydantic model class"):
        good.verb("novelty").load()
    with pytest.raises(PluginError, match=r"^verb 'novelty': the function 'nowhere:f' cannot be imported"):
        Verb("novelty", "nowhere:f", "math:pi", "math:e").load()
    assert GROUP == "gapbench.analyses"


def test_tiny_task_is_a_task_every_verb_takes(tmp_path):
    from gapbench.task import get_task

    data = get_task(tiny_task(tmp_path / "t")).load()
    expected = contract_data()
    assert list(data.corpus) == list(expected.corpus) and len(data.corpus) == 33
    assert list(data.queries) == [q for q in expected.queries if q in expected.qrels]  # judged queries only
    assert {q: dict(j) for q, j in data.qrels.items()} == expected.qrels


def test_one_broken_registration_leaves_the_others_usable(monkeypatch, capsys):
    """The command line loads what it can: a plugin that fails to import, or a name registered twice, is one
    warning line, and every other analysis and command still works."""
    import gapbench.cli as cli
    import gapbench.plugins as plugins

    good = Analysis("novelty", "How novel.")
    eps = [_EntryPoint("novelty", "pkg.plugin:ANALYSIS", good),
           _EntryPoint("novelty", "other.plugin:ANALYSIS", good),
           _EntryPoint("broken", "gone.plugin:ANALYSIS", ModuleNotFoundError("No module named 'gone'"))]
    try:
        with monkeypatch.context() as patched:
            patched.setattr(plugins, "_entry_points", lambda: eps)
            plugins.forget()
            found, problems = plugins.usable_analyses()
            assert list(found) == ["novelty"]
            assert problems == [
                "analysis 'novelty' is registered twice, as 'pkg.plugin:ANALYSIS' and 'other.plugin:ANALYSIS'; "
                "uninstall one of the distributions.",
                "entry point 'broken' = 'gone.plugin:ANALYSIS' of group 'gapbench.analyses' cannot be imported "
                "(ModuleNotFoundError: No module named 'gone'); reinstall the distribution that declares it, or "
                "uninstall it."]
            with pytest.raises(GapbenchError, match="registered twice"):
                plugins.analyses()  # from Python, the first problem is raised
    finally:
        plugins.forget()
    assert list(analyses()) == ["argus", "coverage", "gap", "obliq", "signals"]
    monkeypatch.setattr(cli, "PLUGIN_PROBLEMS", [problems[1]])
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("gapbench ") and out.err == f"gapbench: warning: {problems[1]}\n"
