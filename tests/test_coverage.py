"""Semantic coverage (gapbench.analyses.coverage): every metric on hand-made strata with hand-computed answers, the clustering
criterion on separable vectors, the spaCy and LLM pipelines end to end on a hand-made BEIR folder, and query
generation for missing strata against the real local OpenAI-compatible test server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from gapbench import cli
from gapbench.cli.coverage import register
from gapbench.analyses.coverage.clusters import DEFAULT_K_CANDIDATES, build_strata, cluster_entities, query_clusters
from gapbench.analyses.coverage.coverage_options import CoverageOptions
from gapbench.analyses.coverage.coverage_run import coverage
from gapbench.analyses.coverage.entities import normalise_entity, parse_entity_lines
from gapbench.analyses.coverage.metrics import bootstrap_win_rates, coverage_metrics, macro_average, system_summary
from gapbench.analyses.coverage.synthetic import copies_title, parse_generated_query, parse_judgement
from gapbench.errors import ConfigError, GapbenchError
from gapbench.evaluation.stats import resample_blocks
from llm_server import LLMServer

FIXTURE = Path(__file__).parent / "fixtures" / "coverage" / "beir_small"


@pytest.fixture(scope="module", autouse=True)
def _registered():
    register(cli.app)
    register(cli.app)  # twice: no duplicate command
    assert sum(1 for c in cli.app.registered_commands if c.name == "coverage") == 1


# ------------------------------------------------------------------------------------------ hand-made strata
# clusters: 0 = {a, b}, 1 = {b, c}, 2 = {d, e, f}; g has no entity. Queries: q1 -> a, q2 -> c, q3 -> b, q4 -> a.
DOC_ENTS = {"a": ["x"], "b": ["x", "y"], "c": ["y"], "d": ["z"], "e": ["z", "z"], "f": ["z"], "g": []}
ASSIGN = {"x": 0, "y": 1, "z": 2}
QRELS = {"q1": {"a": 1}, "q2": {"c": 2, "d": 0}, "q3": {"b": 1}, "q4": {"a": 1}, "q5": {"g": 0}}


def _strata():
    return build_strata(DOC_ENTS, ASSIGN, 3)


def test_strata_membership_and_mass():
    s = _strata()
    assert [sorted(d) for d in s.cluster_docs] == [["a", "b"], ["b", "c"], ["d", "e", "f"]]
    assert s.doc_clusters["b"] == {0, 1} and s.doc_clusters["g"] == frozenset()
    assert [s.mass(c) for c in range(3)] == [2, 2, 3]
    assert s.cluster_entities[2] == {"z": 3}  # document frequency, not mentions
    assert s.label(2) == "z"


def test_query_clusters_follow_relevant_documents_only():
    qc = query_clusters(QRELS, _strata())
    # q5 has no positive judgement: not evaluated; q2's grade-0 document d does not count
    assert qc == {"q1": {0}, "q2": {1}, "q3": {0, 1}, "q4": {0}}
    qc2 = query_clusters(QRELS, _strata(), extra={"q1": [2]})
    assert qc2["q1"] == {0, 2}


def test_coverage_metrics_by_hand():
    m = coverage_metrics(_strata(), query_clusters(QRELS, _strata()), min_queries=3)
    assert m["n_clusters"] == 3 and m["n_touched"] == 2
    assert m["msc"] == pytest.approx(2 / 3)
    # documents in touched clusters {a, b, c} over documents in any cluster {a..f}: 3 / 6
    assert m["mass_weighted"] == pytest.approx(0.5)
    assert m["n_docs_assigned"] == 6 and m["n_docs_unassigned"] == 1
    assert m["queries_per_cluster"] == [3, 2, 0]
    assert m["density"] == {"min": 0, "median": 2.0, "mean": pytest.approx(5 / 3), "min_queries": 3, "below_min": 2}


def test_macro_vs_mean_by_hand():
    qc = query_clusters(QRELS, _strata())
    values = {"q1": 1.0, "q2": 0.0, "q3": 0.5, "q4": 1.0}
    # mean = 2.5 / 4; cluster 0 = (1 + 0.5 + 1) / 3, cluster 1 = (0 + 0.5) / 2; macro = (5/6 + 1/4) / 2
    assert macro_average(values, qc, 3) == pytest.approx((5 / 6 + 1 / 4) / 2)
    summ = system_summary(values, qc, 3)
    assert summ["mean"] == pytest.approx(0.625)
    assert summ["macro"] == pytest.approx(13 / 24)
    assert summ["per_cluster"][0]["n"] == 3 and summ["per_cluster"][0]["median"] == 1.0
    assert summ["per_cluster"][1] == {"n": 2, "mean": 0.25, "median": 0.25, "q1": 0.125, "q3": 0.375,
                                      "min": 0.0, "max": 0.5}
    assert 2 not in summ["per_cluster"]


def test_bootstrap_dominant_system_wins_every_resample():
    qc = query_clusters(QRELS, _strata())
    a = {"q1": 0.9, "q2": 0.1, "q3": 0.5, "q4": 0.4}
    b = {q: v - 0.05 for q, v in a.items()}
    out = bootstrap_win_rates({"a": a, "b": b}, qc, 3, n_resamples=500, seed=1)
    assert out["win_rate"] == {"mean": {"a": 1.0, "b": 0.0}, "macro": {"a": 1.0, "b": 0.0}}
    assert out["rank_stability"] == {"mean": 1.0, "macro": 1.0}
    assert out["mean_macro_agreement"] == 1.0
    # identical systems tie in every resample: each wins half
    tie = bootstrap_win_rates({"a": a, "b": dict(a)}, qc, 3, n_resamples=50, seed=1)
    assert tie["win_rate"]["mean"] == {"a": 0.5, "b": 0.5}


def _naive_bootstrap(per_query, qc, k, n_resamples, seed):
    """Reference: one resample at a time, through macro_average, on the draws of gapbench's one bootstrap draw
    (resample_blocks from default_rng(seed))."""
    names = list(per_query)
    qids = list(qc)
    draws = [row for _, idx in resample_blocks(len(qids), n_resamples, np.random.default_rng(seed)) for row in idx]
    assert len(draws) == n_resamples
    wins = {"mean": dict.fromkeys(names, 0.0), "macro": dict.fromkeys(names, 0.0)}
    for idx in draws:
        sample = [qids[i] for i in idx]
        # a resampled query drawn twice counts twice: give copies distinct ids
        qc_b = {f"{q}#{j}": qc[q] for j, q in enumerate(sample)}
        for stat in ("mean", "macro"):
            vals = {}
            for s in names:
                v = {f"{q}#{j}": per_query[s][q] for j, q in enumerate(sample)}
                vals[s] = round(np.mean(list(v.values())) if stat == "mean" else macro_average(v, qc_b, k), 12)
            best = max(vals.values())
            top = [s for s in names if vals[s] == best]
            for s in top:
                wins[stat][s] += 1 / len(top)
    return {stat: {s: w / n_resamples for s, w in row.items()} for stat, row in wins.items()}


@pytest.mark.parametrize("n_queries", [30, 31])  # an odd count too: the draw is one block, not one row at a time
def test_bootstrap_matches_reference_and_is_reproducible(n_queries):
    qc = {f"q{i}": {i % 4} | ({(i + 1) % 4} if i % 3 == 0 else set()) for i in range(n_queries)}
    rng = np.random.default_rng(7)
    a = {q: float(rng.random()) for q in qc}
    b = {q: float(rng.random()) for q in qc}
    c = {q: float(rng.random()) for q in qc}
    per = {"a": a, "b": b, "c": c}
    out = bootstrap_win_rates(per, qc, 4, n_resamples=200, seed=3)
    ref = _naive_bootstrap(per, qc, 4, 200, 3)
    for stat in ("mean", "macro"):
        assert out["win_rate"][stat] == pytest.approx(ref[stat], abs=1e-12)
        assert sum(out["win_rate"][stat].values()) == pytest.approx(1.0)
    again = bootstrap_win_rates(per, qc, 4, n_resamples=200, seed=3)
    assert again == out
    other = bootstrap_win_rates(per, qc, 4, n_resamples=200, seed=4)
    assert other["win_rate"] != out["win_rate"]
    assert 0.0 < out["win_rate"]["mean"]["a"] < 1.0  # a real contest, not a degenerate one
    with pytest.raises(ConfigError):
        bootstrap_win_rates(per, qc, 4, n_resamples=0)


# ------------------------------------------------------------------------------------------ parts
@pytest.mark.parametrize("raw,norm", [
    ("  The   Louvre's ", "louvre"), ("the United  Nations", "united nations"), ("Apple\u2019s", "apple"),
    ("an Apple", "apple"), ("Charles'", "charles"), ('"IBM"', "ibm"), ("Theatre Royal", "theatre royal"),
    ("A", ""), ("2024", ""), ("Ａｍａｚｏｎ", "amazon"), ("St. Michael", "st. michael"),
])
def test_normalise_entity(raw, norm):
    assert normalise_entity(raw) == norm


def test_title_copy_filter():
    title = "Bach cantatas for church services"
    assert copies_title("which bach cantatas for church were sung", title)
    assert copies_title("BACH CANTATAS FOR CHURCH", title)
    assert not copies_title("bach cantatas written in leipzig", title)  # 3-gram only
    assert not copies_title("anything at all", "Short title")  # a title under 4 words cannot be copied


def test_answer_parsers():
    assert parse_generated_query('Query: "who wrote the magic flute"\nsecond line') == "who wrote the magic flute"
    assert parse_generated_query("\n\n1. where is   leipzig\n") == "where is leipzig"
    assert parse_judgement("0, 2", 3) == [0, 2]
    assert parse_judgement("Relevant: 2, 0, 7", 3) == [0, 2]
    assert parse_judgement("NONE", 3) == []
    ents = parse_entity_lines('{"name": "Louvre", "type": "org", "description": "museum"}\nnoise\n{"bad": 1}\n'
                              '{"name": "Paris", "type": "location"},')
    assert [e["name"] for e in ents] == ["Louvre", "Paris"] and ents[1]["description"] == ""


def test_silhouette_picks_the_separable_k_and_is_seeded():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:3] * 5
    X = np.vstack([centres[i] + 0.05 * rng.standard_normal((10, 8)) for i in range(3)])
    forms = [f"e{i:02d}" for i in range(30)]
    cl = cluster_entities(forms, X, k_candidates=(2, 3, 4, 5), seed=0)
    assert cl.k == 3 and cl.criterion == "silhouette"
    assert max(cl.silhouette, key=cl.silhouette.get) == 3
    groups = [{cl.assignment[f] for f in forms[i * 10:(i + 1) * 10]} for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len({next(iter(g)) for g in groups}) == 3
    assert cl.assignment["e00"] == 0  # ids renumbered by sorted form, independent of KMeans' labels
    assert cluster_entities(forms, X, k_candidates=(2, 3, 4, 5), seed=0).assignment == cl.assignment
    given = cluster_entities(forms, X, k=2, seed=0)
    assert given.k == 2 and given.criterion == "given" and given.silhouette == {}
    with pytest.raises(ConfigError):
        cluster_entities(forms, X, k=31)
    with pytest.raises(GapbenchError):
        cluster_entities(["only"], X[:1])


# ------------------------------------------------------------------------------------------ end to end (spaCy)
@pytest.mark.model
def test_cli_spacy_end_to_end_on_hand_made_beir_folder(tmp_path):
    out = tmp_path / "cov"
    rc = cli.main(["coverage", str(FIXTURE), "--retrievers", "bm25,dense", "--clusters", "3", "--out", str(out),
                   "--resamples", "200", "--min-queries", "3"])
    assert rc == 0
    data = json.loads((out / "coverage.json").read_text())
    assert data["kind"] == "coverage" and data["version"] == 1 and data["task"].endswith("beir_small")
    assert data["entities"]["n_docs_with_entities"] == 15
    cov = data["coverage"]
    # the three topics are the three clusters; the queries touch cities and companies only
    assert cov["n_clusters"] == 3 and cov["n_touched"] == 2
    assert cov["msc"] == pytest.approx(2 / 3) and cov["mass_weighted"] == pytest.approx(10 / 15)
    assert cov["density"] == {"min": 0, "median": 3.0, "mean": 2.0, "min_queries": 3, "below_min": 1}
    masses = sorted(c["mass"] for c in data["clusters"])
    assert masses == [5, 5, 5]
    [missing] = data["missing"]
    assert {d["doc_id"] for d in missing["sample_docs"]} <= {"m1", "m2", "m3", "m4", "m5"}
    assert len(missing["sample_docs"]) == 3
    assert "mozart" in {e for c in data["clusters"] if not c["touched"] for e in c["top_entities"]}
    assert set(data["systems"]) == {"bm25", "dense"}
    for s in data["systems"].values():
        assert s["n_queries"] == 6 and 0.0 <= s["macro"] <= 1.0
    assert set(data["bootstrap"]["win_rate"]["mean"]) == {"bm25", "dense"}
    assert all(q["synthetic"] is False for q in data["queries"]) and len(data["queries"]) == 6
    for name in ("coverage.md", "coverage_boxplot_bm25.png", "coverage_boxplot_dense.png", "coverage_density.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "coverage.png").exists() is False
    assert "MSC" in (out / "coverage.md").read_text()
    # the NER results were cached on disk, keyed by the corpus
    from gapbench.cache import cache_dir

    assert any(p.name.startswith("spacy-") for p in cache_dir("coverage").iterdir())


def test_cli_errors_are_one_line(capsys):
    assert cli.main(["coverage", str(FIXTURE), "--entities", "magic"]) == 2
    assert "--entities must be 'spacy' or 'llm', got 'magic'." in capsys.readouterr().err
    assert cli.main(["coverage", str(FIXTURE), "--k-range", "5,x"]) == 2
    assert "--k-range '5,x' is not a list of integers" in capsys.readouterr().err


def test_options_name_the_setting():
    # the library names the field, never a flag
    with pytest.raises(ConfigError, match=r"^CoverageOptions: entities must be 'spacy' or 'llm', got 'magic'\.$"):
        CoverageOptions(entities="magic")
    with pytest.raises(ConfigError, match=r"k_candidates must be integers of 2 or more .*got \[1, 5\]"):
        CoverageOptions(k_candidates=[1, 5])
    with pytest.raises(ConfigError, match=r"n_resamples must be greater than or equal to 1, got 0; "
                                          r"max_chars must be greater than or equal to 0, got -1"):
        CoverageOptions(n_resamples=0, max_chars=-1)
    assert CoverageOptions(max_chars=None) == CoverageOptions(max_chars=0)  # None: whole documents, as 0
    with pytest.raises(ConfigError, match="retrievers is empty"):
        coverage(str(FIXTURE), [])


# ------------------------------------------------------------------------------------------ LLM path
class CoverageServer(LLMServer):
    """Answers the coverage templates deterministically.

    entities: the document's first word (the fixture's titles start with the topic entity);
    generate: 'what did <title's first word> do', but the title itself when it names cantatas (a copy to reject);
    judge: the candidates whose text contains the query's capitalised name or a word of ``also``; NONE for Beethoven
    (a judge rejection).
    """

    def __init__(self, *args, also: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.also = also
        self.judge_prompts: list[str] = []

    def answer(self, prompt: str) -> tuple[str, str]:
        if prompt.startswith("Extract the key entities"):
            doc = prompt.split("Document:\n", 1)[1]
            return json.dumps({"name": doc.split()[0], "type": "other", "description": "topic"}), "entities"
        if prompt.startswith("Generate a search query"):
            title = re.search(r"^Document title: (.*)$", prompt, re.M).group(1)
            if "cantatas" in title:
                return title, "generate"
            return f"Query: what did {title.split()[0]} do", "generate"
        if prompt.startswith("Decide which of the numbered documents"):
            self.judge_prompts.append(prompt)
            query = re.search(r"^Search query: (.*)$", prompt, re.M).group(1)
            name = re.search(r"[A-Z]\w+", query).group(0)
            if name == "Beethoven":
                return "NONE", "judge"
            docs = re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M)
            rel = [i for i, text in docs if any(w.lower() in text.lower() for w in (name, *self.also))]
            return ", ".join(rel) or "NONE", "judge"
        return super().answer(prompt)


def test_llm_entities_and_generation_for_missing_strata(tmp_path):
    with CoverageServer() as srv:
        args = ["coverage", str(FIXTURE), "--retrievers", "bm25,dense", "--entities", "llm", "--clusters", "3",
                "--generate", "3", "--llm-base-url", srv.base_url, "--llm-model", "cov-test", "--resamples", "100",
                "--out", str(tmp_path / "a")]
        assert cli.main(args) == 0
        calls = srv.counts["chat"]
        assert calls == 15 + 3 + 2  # one extraction per document, 3 generations, 2 judgements (one copy rejected)
        data = json.loads((tmp_path / "a" / "coverage.json").read_text())
        assert data["entities"]["method"] == "llm" and data["entities"]["n_unique"] == 15
        assert data["coverage"]["msc"] == pytest.approx(2 / 3)
        [missing] = data["missing"]
        assert [d["doc_id"] for d in missing["sample_docs"]] == ["m1", "m2", "m3"]
        c = missing["cluster_id"]
        syn = data["synthetic"]
        assert (syn["requested"], syn["generated"], syn["rejected_copy"], syn["rejected_judge"], syn["accepted"]) == (
            3, 3, 1, 1, 1)
        rows = {r["grounded_in"]: r for r in syn["queries"]}
        assert rows["m1"]["status"] == "accepted" and rows["m1"]["text"] == "what did Mozart do"
        assert rows["m1"]["relevant"] == ["m1"] and rows["m1"]["query_id"] == f"syn-{c}-0"
        assert rows["m2"]["status"] == "rejected_judge" and rows["m3"]["status"] == "rejected_copy"
        assert all(r["synthetic"] is True for r in syn["queries"])
        marked = {q["query_id"]: q for q in data["queries"]}
        assert marked[f"syn-{c}-0"] == {"query_id": f"syn-{c}-0", "clusters": [c], "synthetic": True}
        assert f"syn-{c}-1" not in marked  # rejected queries never join the query set
        aug = data["augmented"]
        assert aug["coverage"]["msc"] == 1.0 and aug["coverage"]["mass_weighted"] == 1.0
        assert aug["coverage"]["n_queries"] == 7 and aug["systems"]["bm25"]["n_queries"] == 7
        assert "synthetic" in (tmp_path / "a" / "coverage.md").read_text()
        # a re-run is answered from the LLM cache
        assert cli.main(args[:-1] + [str(tmp_path / "b")]) == 0
        assert srv.counts["chat"] == calls
        assert json.loads((tmp_path / "b" / "coverage.json").read_text())["synthetic"] == syn


class Fixed:
    """A retriever with one hand-made ranking for every query."""

    def __init__(self, name: str, order: list[str]):
        self.name, self.order = name, order

    def index(self, corpus) -> None:
        pass

    def search(self, queries, k):
        return {q: {d: float(len(self.order) - i) for i, d in enumerate(self.order[:k])} for q in queries}


def test_synthetic_queries_are_judged_over_every_systems_pooled_top_k():
    # top 2: first {m1, c1}, second {m2, t1}; the pool is {m1 (the grounding), c1, m2, t1}. The judge finds Mozart's
    # and the symphony documents relevant, m1 and m2: m2 only the second system retrieves.
    systems = [Fixed("first", ["m1", "c1", "c2", "m2"]), Fixed("second", ["m2", "t1", "m1"])]
    with CoverageServer(also=("symphonies",)) as srv:
        common = dict(entities="llm", clusters=3, generate=1, judge_depth=2, n_resamples=20,
                      llm_base_url=srv.base_url, llm_model="cov-pool")  # a model of its own: no answer cached
        rep = coverage(str(FIXTURE), systems, CoverageOptions(**common))
        assert srv.counts["chat"] == 15 + 1 + 1  # extractions, one generation, one judge prompt of 4 documents
        syn = rep.model_dump(mode="json")["synthetic"]
        [row] = syn["queries"]
        assert (row["text"], row["status"], row["pool_size"]) == ("what did Mozart do", "accepted", 4)
        assert row["relevant"] == ["m1", "m2"]
        assert syn["judging"] == {
            "depth": 2, "batch": 20, "queries": 1, "prompts": 1, "judged": 4, "judged_relevant": 2,
            "pool_size": {"min": 4, "mean": 4.0, "max": 4},
            "systems": {"first": {"judged": 2, "relevant": 1, "unique": 1, "unique_relevant": 0},
                        "second": {"judged": 2, "relevant": 1, "unique": 2, "unique_relevant": 1}}}
        judged = [re.findall(r"^\[\d+\] (\w+)", p, re.M) for p in srv.judge_prompts]
        assert [sorted(j) for j in judged] == [["Beethoven", "Microsoft", "Mozart", "Paris"]]
        # both systems retrieve both relevant documents: first at ranks 1 and 4, second at 1 and 3 (nDCG@10 by hand);
        # judged over the first system's list alone, m2 would be unjudged and the second would score 1 / log2(4)
        c = row["cluster_id"]
        ideal = 1 + 1 / np.log2(3)
        aug = rep.augmented.systems
        assert aug["first"].per_cluster[str(c)].mean == pytest.approx((1 + 1 / np.log2(5)) / ideal)  # 0.8772
        assert aug["second"].per_cluster[str(c)].mean == pytest.approx((1 + 1 / np.log2(4)) / ideal)  # 0.9197
        assert rep.config.judge_depth == 2 and rep.config.judge_batch == 20
        # prompts of at most 3 documents: the same pool in two prompts, the same judgement; the generation is cached
        batched = coverage(str(FIXTURE), systems, CoverageOptions(**common, judge_batch=3))
        assert srv.counts["chat"] == 17 + 2
        assert batched.synthetic.judging.prompts == 2
        assert batched.synthetic.queries[0].relevant == ["m1", "m2"]
        # depth 1: first {m1}, second {m2}; the pool is {m1, m2}
        shallow = coverage(str(FIXTURE), systems, CoverageOptions(**{**common, "judge_depth": 1}))
        assert shallow.synthetic.queries[0].pool_size == 2
        assert shallow.synthetic.judging.systems["second"].model_dump() == {"judged": 1, "relevant": 1, "unique": 1,
                                                                             "unique_relevant": 1}
    md = str(rep)
    assert "Judged over the pooled top 2 of every system plus the grounding document: 4 documents" in md


def test_pool_helpers_by_hand():
    from gapbench.analyses.coverage.synthetic import judging_pool, pool_counts

    assert judging_pool("g", [["a", "b", "c"], ["b", "d"], []], 2) == ["g", "a", "b", "d"]
    counts = pool_counts("g", {"x": ["a", "b"], "y": ["b", "d"], "z": ["g"]}, ["b", "d", "g"])
    assert counts == {"x": {"judged": 2, "relevant": 1, "unique": 1, "unique_relevant": 0},
                      "y": {"judged": 2, "relevant": 2, "unique": 1, "unique_relevant": 1},
                      "z": {"judged": 1, "relevant": 1, "unique": 0, "unique_relevant": 0}}


def test_judge_depth_and_batch_must_be_positive(capsys):
    assert cli.main(["coverage", str(FIXTURE), "--judge-depth", "0"]) == 2
    err = capsys.readouterr().err
    assert "--judge-depth must be greater than or equal to 1, got 0." in err and len(err.strip().splitlines()) == 1
    assert cli.main(["coverage", str(FIXTURE), "--judge-batch", "0"]) == 2
    assert "--judge-batch must be greater than or equal to 1, got 0." in capsys.readouterr().err


def test_generate_needs_an_llm():
    from gapbench.analyses.coverage.synthetic import generate_queries

    with pytest.raises(ConfigError, match="generate needs an LLM: give llm_base_url and llm_model"):
        generate_queries([], None, None, None, [], 1, 10, 20, 0, "")


def test_module_examples():
    import doctest
    import importlib

    for name in ("entities", "clusters", "strata", "metrics", "synthetic", "coverage_options", "coverage_report",
                 "coverage_run"):
        mod = importlib.import_module(f"gapbench.analyses.coverage.{name}")
        assert doctest.testmod(mod).failed == 0, name


def test_query_entities_add_clusters(tmp_path):
    base = coverage(str(FIXTURE), ["bm25"], CoverageOptions(clusters=3, n_resamples=20))
    more = coverage(str(FIXTURE), "bm25", CoverageOptions(clusters=3, n_resamples=20, query_entities=True))
    assert more.config.query_entities is True
    for q, cs in base.qclusters.items():
        assert cs <= more.qclusters[q]  # a query keeps the clusters of its relevant documents
    # spaCy finds 'french' (q1) and 'france' (q3), forms no document has: the nearest centroid is the cities cluster,
    # which those queries' relevant documents already give them
    cities = base.qclusters["q1"]
    assert len(cities) == 1 and base.qclusters["q2"] == base.qclusters["q3"] == cities
    assert more.qclusters == base.qclusters
    assert more.coverage.n_queries == 6


def _hand_report(**extra):
    from gapbench.analyses.coverage.coverage_report import CoverageReport

    regime = {"query_strata": "qrels", "label": "qrels", "entity_source": "spacy", "generated_queries": False}
    stats = {"n": 3, "mean": 0.25, "median": 0.0, "q1": 0.0, "q3": 0.375, "min": 0.0, "max": 0.75}
    fields = dict(
        kind="coverage", version=1, task="toy", measure="nDCG@10",
        config={"entities": "spacy", "embedder": "dense", "clusters": 2, "k_candidates": [5], "seed": 0,
                "n_resamples": 10, "min_queries": 2, "query_entities": False, "max_chars": 1000,
                "retrievers": ["bm25", "dense"], "generate": 0, "judge_depth": 10, "judge_batch": 20,
                "query_strata": "qrels", "entity_candidates": 20, "query_types": ["short-specific"]},
        clustering={"k": 2, "criterion": "given", "silhouette": {}},
        entities={"method": "spacy", "n_unique": 4, "n_docs_with_entities": 3, "n_docs": 5, "model": "m",
                  "n_mentions": 6},
        clusters=[{"cluster_id": 0, "label": "a|b / c", "top_entities": ["a|b", "c"], "n_entities": 2, "mass": 2,
                   "n_queries": 3, "touched": True},
                  {"cluster_id": 1, "label": "d", "top_entities": ["d"], "n_entities": 1, "mass": 1, "n_queries": 0,
                   "touched": False}],
        coverage={"n_clusters": 2, "n_touched": 1, "msc": 0.5, "mass_weighted": 2 / 3, "n_docs_assigned": 3,
                  "n_docs_unassigned": 2, "n_queries": 3, "n_queries_unassigned": 0,
                  "density": {"min": 0, "median": 1.5, "mean": 1.5, "min_queries": 2, "below_min": 1},
                  "regime": regime, "query_judging": None},
        systems={"bm25": {"mean": 0.5, "macro": 0.25, "n_queries": 3, "per_cluster": {"0": stats}},
                 "dense": {"mean": 0.125, "macro": float("nan"), "n_queries": 3, "per_cluster": {}}},
        bootstrap={"n_resamples": 10, "seed": 0, "n_queries": 3,
                   "win_rate": {"mean": {"bm25": 0.9, "dense": 0.1}, "macro": {"bm25": 1.0, "dense": 0.0}},
                   "rank_stability": {"mean": 0.8, "macro": 1.0}, "mean_macro_agreement": 0.9, "regime": regime},
        queries=[{"query_id": q, "clusters": [0], "synthetic": False} for q in ("q1", "q2", "q3")],
        missing=[{"cluster_id": 1, "label": "d", "mass": 1, "sample_docs": [{"doc_id": "d1", "title": "D",
                                                                            "snippet": "d one"}]}],
        synthetic=None, augmented=None,
        timings={"entities_s": 0.1, "embed_s": 0.1, "cluster_s": 0.1, "retrieval_s": 0.1, "metrics_s": 0.1})
    return CoverageReport.model_validate({**fields, **extra})


def test_report_is_the_schema_model_and_round_trips(tmp_path):
    # one class: what gapbench.coverage returns is the model of coverage.json and of its JSON Schema
    from gapbench import schemas
    from gapbench.analyses.coverage.coverage_report import CoverageReport, save_coverage

    assert CoverageReport is schemas.CoverageReport is schemas.SCHEMAS["coverage"]
    rep = _hand_report()
    assert rep.qclusters == {"q1": {0}, "q2": {0}, "q3": {0}}
    save_coverage(rep, tmp_path)
    data = json.loads((tmp_path / "coverage.json").read_text())
    assert list(data) == ["kind", "task", "version", "measure", "config", "entities", "clustering", "clusters",
                          "coverage", "systems", "bootstrap", "queries", "missing", "synthetic", "augmented",
                          "timings"]
    assert data["systems"]["bm25"]["per_cluster"]["0"]["q3"] == 0.375
    back = schemas.load_file(tmp_path / "coverage.json")
    assert str(back) == str(rep) == (tmp_path / "coverage.md").read_text()
    # a file gapbench 0.1 wrote (no regimes, query strata or query types) loads and renders
    old = schemas.load_file(Path(__file__).parent / "fixtures" / "outputs_v0_1" / "coverage.json")
    assert old.coverage.regime is None and old.config.query_strata is None and old.coverage.msc == pytest.approx(2 / 3)
    assert "a gapbench 0.1 file, which records no regime" in str(old)
    with pytest.raises(Exception, match="n_touched"):
        CoverageReport.model_validate({**data, "coverage": {**data["coverage"], "n_touched": "1"}})


def test_markdown_tables_by_hand():
    # a pipe in a label is escaped (the hand-built tables of old split the cell); every column left-aligned ("---");
    # the regime line says how the queries of every number below were stratified (issue 14 item 5)
    assert str(_hand_report()) == "\n".join([
        "# Semantic coverage: toy",
        "",
        "Entities: spacy (4 distinct forms, 3/5 documents with entities). Clusters: k = 2 (given).",
        "",
        "Regime of the coverage, systems and bootstrap numbers: queries stratified by qrels (--query-strata qrels), "
        "entities from spacy, original queries only.",
        "",
        "| clusters | touched | MSC | mass-weighted | queries | density min / median / mean | clusters < 2 queries |",
        "|---|---|---|---|---|---|---|",
        "| 2 | 1 | 0.5000 | 0.6667 | 3 | 0 / 1.5 / 1.5 | 1 |",
        "",
        "| system | mean nDCG@10 | macro nDCG@10 | win rate (mean) | win rate (macro) |",
        "|---|---|---|---|---|",
        "| bm25 | 0.5000 | 0.2500 | 0.900 | 1.000 |",
        "| dense | 0.1250 | nan | 0.100 | 0.000 |",
        "",
        "Bootstrap: 10 resamples of queries (seed 0); rank stability mean 0.800, macro 1.000; mean and macro pick the "
        "same winner in 0.900 of resamples.",
        "",
        "## Clusters",
        "",
        "| id | label | mass | queries | bm25 | dense |",
        "|---|---|---|---|---|---|",
        "| 0 | a\\|b / c | 2 | 3 | 0.2500 | - |",
        "| 1 | d | 1 | 0 | - | - |",
        "",
        "## Missing strata",
        "",
        "- cluster 1 (d), mass 1: sample documents d1",
        "",
    ])


def test_cli_builds_one_options_object(monkeypatch, capsys):
    import gapbench.analyses.coverage.coverage_run as mod

    seen = []

    def fake(task, retrievers, options):
        seen.append((task, retrievers, options))
        return _hand_report()

    monkeypatch.setattr(mod, "run_coverage_with", fake)
    assert cli.main(["coverage", "toy", "-r", "bm25, dense", "--k-range", "3 4", "--max-chars", "0", "--clusters", "2",
                     "--generate", "1", "--judge-depth", "5", "--llm-model", "m", "--json"]) == 0
    assert seen == [("toy", ["bm25", "dense"], mod.CoverageOptions(
        clusters=2, k_candidates=[3, 4], max_chars=None, generate=1, judge_depth=5, llm_model="m"))]
    assert json.loads(capsys.readouterr().out)["task"] == "toy"
    assert cli.main(["coverage", "toy"]) == 0  # the CLI defaults are CoverageOptions' own (k candidates as a list)
    assert seen[-1][2] == mod.CoverageOptions(k_candidates=list(DEFAULT_K_CANDIDATES))
