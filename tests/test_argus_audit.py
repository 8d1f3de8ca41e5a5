"""ARGUS audit (RPS): vendored data fingerprints, the authors' Contriever ranks, hand-computed ranks, the chance
control with a random encoder, seeding, span pooling, and the CLI end to end on the shipped slice with MiniLM."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fx_warm_homes import copy_home

from gapbench.analyses.argus.audit import retrievability as aa
from gapbench.errors import ConfigError, DataFormatError


@pytest.fixture(scope="module")
def shipped():
    return aa.load_shipped()


@pytest.fixture(scope="module")
def cli():
    from gapbench.cli import main
    return main


# ---------------------------------------------------------------- vendored data
def test_vendored_fingerprint(shipped):
    assert len(shipped.entities) == 620
    assert len(shipped.targets) == 103
    assert shipped.n_pairs == 695
    assert shipped.dropped == {"relations_unknown_entity": 0, "targets_without_relations": 0}
    first = next(iter(shipped.entities.values()))
    assert first.qid == "Q100" and first.paragraph.startswith("Boston is the capital")
    assert shipped.targets[0] == "Q6535666"
    assert shipped.entities["Q6535666"].label == "Levington Lagoon"
    assert shipped.related["Q6535666"] == ("Q7634595", "Q422211", "Q179049", "Q145")
    # 25 paragraphs appear only as neutrals and 15 related tags have no English label: no label for 31 entities
    assert sum(e.label is None for e in shipped.entities.values()) == 31
    # neighbour sets are undirected: the UK (Q145) is linked back to Levington Lagoon
    assert "Q6535666" in shipped.neighbours["Q145"]
    assert len(aa.load_shipped(relations="undirected").targets) == 595


# ---------------------------------------------------------------- the authors' Contriever ranks
def test_contriever_ranks_both_rules():
    ranks = aa.shipped_contriever_ranks()
    assert len(ranks) == 103
    paper = {q: aa.rps_from_ranks(v["ranks"], 50, "paper") for q, v in ranks.items()}
    authors = {q: aa.rps_from_ranks(v["ranks"], 50, "authors") for q, v in ranks.items()}
    differ = {q for q in ranks if paper[q] != authors[q]}
    # the rules differ exactly where some rank equals k
    assert differ == {q for q, v in ranks.items() if 50 in v["ranks"]}
    assert differ == {"Q342808", "Q6654343", "Q42917074"}
    for q in differ:  # and by exactly (#ranks equal to k) / |T_x|
        r = ranks[q]["ranks"]
        assert paper[q] - authors[q] == pytest.approx(r.count(50) / len(r))
    # hand-checked values
    assert paper["Q6535666"] == authors["Q6535666"] == 0.75        # Levington Lagoon [1, 6, 21, 268]
    assert paper["Q985853"] == 0.25                                  # [98, 377, 368, 386, 442, 447, 5, 17]
    assert paper["Q342808"] == pytest.approx(6 / 24) and authors["Q342808"] == pytest.approx(5 / 24)  # Guillermo Amor
    assert paper["Q6654343"] == pytest.approx(6 / 9) and authors["Q6654343"] == pytest.approx(5 / 9)
    assert paper["Q42917074"] == 0.75 and authors["Q42917074"] == 0.5
    assert np.mean(list(paper.values())) == pytest.approx(0.41211126, abs=1e-7)
    assert np.mean(list(authors.values())) == pytest.approx(0.40820080, abs=1e-7)
    # the authors' pools were capped by the slice too: 580-619 candidates, never the nominal 800
    sizes = [s for v in ranks.values() for s in v["sample_sizes"]]
    assert min(sizes) == 580 and max(sizes) == 619
    with pytest.raises(ConfigError):
        aa.rps_from_ranks([1], 50, "strict")


# ---------------------------------------------------------------- hand-computed ranks
class FixedEncoder:
    """Fixed 2-D vectors per paragraph: a tiny audit whose ranks can be worked out by hand."""

    name = "fixed"
    pooling = "none"
    fingerprint = "fixed-test-encoder"

    def __init__(self, vectors):
        self.vectors = vectors

    def encode_entities(self, entities):
        emb = np.array([self.vectors[e.paragraph] for e in entities], dtype=np.float32)
        return emb / np.linalg.norm(emb, axis=1, keepdims=True), {"label_found": 0, "label_prepended": 0, "no_label": 0}


def _tiny():
    ang = {"x": 10, "t": 0, "u": 90, "a": 5, "b": 20, "c": 30, "d": 60}
    vec = {k: [math.cos(math.radians(v)), math.sin(math.radians(v))] for k, v in ang.items()}
    ents = {k: aa.Entity(k, k, k) for k in ang}
    # x -> t and x -> u are the audited relations; "a" is linked to t, so it is never a neutral for t
    data = aa.build_data(ents, [("x", "t"), ("x", "u"), ("a", "t")], source="tiny")
    return data, FixedEncoder(vec)


def test_hand_computed_ranks():
    data, enc = _tiny()
    assert set(data.related) == {"x", "a"}
    res = aa.audit(data, enc, k=1, n=800)
    # query t (0 deg): x at 10 deg; neutrals for t are u, b, c, d (a, t and x excluded): none closer -> rank 1 of 5
    # query u (90 deg): x at 10 deg (80 deg away); neutrals t, a, b, c, d: d (30 away), c (60), b (70) beat x -> rank 4
    assert res.ranks["x"] == [1, 4]
    assert res.n_candidates["x"] == [5, 6]
    # target a for query t: a at 5 deg; neutrals u, b, c, d (x is linked to t): rank 1
    assert res.ranks["a"] == [1]
    assert res.rps() == {"x": 0.5, "a": 1.0}
    assert res.chance == pytest.approx(((1 / 5 + 1 / 6) / 2 + 1 / 5) / 2)
    # the warning and the sweep give the same chance level (RPS averages per target, so chance does too; pooling the
    # three pairs would give (1/5 + 1/6 + 1/5) / 3 = 0.189)
    assert any("chance level 0.192 here" in w for w in res.warnings), res.warnings
    from gapbench.analyses.argus.audit import sweep as sw
    cell = sw.sweep(data, [enc], ns=[800], ks=[1]).retrievers[0].cells[0]
    assert cell.chance == pytest.approx(res.chance) and cell.mean_rps == pytest.approx(0.75)
    # with k=4, query u is a hit too
    assert aa.audit(data, enc, k=4, n=800).rps()["x"] == 1.0
    # N=3: two neutrals sampled per pair, seeded
    small = aa.audit(data, enc, k=1, n=3, seed=5)
    assert all(n == 3 for ns in small.n_candidates.values() for n in ns)


# ---------------------------------------------------------------- chance control and seeding
def _binomial_se(result) -> float:
    """Standard error of mean RPS if every hit were an independent Bernoulli(min(k, N)/N) draw."""
    var = 0.0
    for ns in result.n_candidates.values():
        var += sum((min(result.k, n) / n) * (1 - min(result.k, n) / n) for n in ns) / len(ns) ** 2
    return math.sqrt(var) / len(result.n_candidates)


@pytest.mark.parametrize("relations,n", [("directed", 800), ("undirected", 200)])
def test_random_encoder_gives_chance(relations, n):
    data = aa.load_shipped(relations=relations)
    res = aa.audit(data, "random:dim=64,seed=3", k=50, n=n)
    d = res.model_dump(mode="json")
    se = _binomial_se(res)
    assert abs(d["mean_rps"] - d["chance"]) < 4 * se, (d["mean_rps"], d["chance"], se)
    if n == 200:
        assert d["chance"] == pytest.approx(50 / 200)
        assert d["n_effective"] == {"min": 200, "median": 200.0, "mean": 200.0, "max": 200}
    else:  # capped by the 620 paragraphs
        assert d["n_effective"]["max"] == 619 and d["chance"] == pytest.approx(0.0812077, abs=1e-6)
        assert any("capped" in w for w in d["warnings"])
    assert any("chance" in w for w in d["warnings"])


def test_same_seed_same_result(shipped):
    a = aa.audit(shipped, "random", k=50, n=300, seed=7)
    b = aa.audit(shipped, "random", k=50, n=300, seed=7)
    c = aa.audit(shipped, "random", k=50, n=300, seed=8)
    assert a.ranks == b.ranks and a.model_dump(mode="json") == b.model_dump(mode="json")
    assert a.ranks != c.ranks  # the neutral sample depends on the seed
    # sampling is keyed by (seed, x, t): reordering the targets changes nothing
    rev = aa.AuditData(shipped.entities, dict(reversed(list(shipped.related.items()))), shipped.neighbours, "rev")
    assert aa.audit(rev, "random", k=50, n=300, seed=7).ranks == a.ranks


# ---------------------------------------------------------------- user export
def test_user_jsonl_and_errors(tmp_path):
    ents = tmp_path / "e.jsonl"
    rels = tmp_path / "r.jsonl"
    ents.write_text("\n".join(json.dumps({"qid": q, "label": q.lower(), "paragraph": f"text {q}"}) for q in "ABCDEF"))
    rels.write_text('{"source": "A", "target": "B"}\n{"qid": "C", "related": ["D", "Z"]}\n'
                    '{"qid": "E", "related_tags": [{"qid": "F"}]}\n')
    data = aa.load_jsonl(ents, rels)
    assert data.related == {"A": ("B",), "C": ("D",), "E": ("F",)}
    assert data.dropped["relations_unknown_entity"] == 1
    res = aa.audit(data, "random", k=1, n=10)
    assert res.n_candidates["A"] == [5]  # all of C, D, E, F are neutrals for B, plus A
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"qid": "A", "paragraph": "x"}\n{"qid": "B"}\n')
    with pytest.raises(DataFormatError, match=r"bad.jsonl, line 2"):
        aa.read_entities(bad)
    badr = tmp_path / "badr.jsonl"
    badr.write_text('{"from": "A", "to": "B"}\n')
    with pytest.raises(DataFormatError, match="accepted lines"):
        aa.read_relations(badr)
    with pytest.raises(ConfigError):
        aa.audit(data, "random", k=0)


# ---------------------------------------------------------------- span pooling
def test_find_mention():
    assert aa.find_mention("The  Suffolk Wildlife\nTrust is", "suffolk wildlife trust") == (5, 27)
    assert aa.find_mention("nothing here", "Boston") is None
    assert aa.find_mention("x", None) is None


@pytest.mark.slow
@pytest.mark.model
def test_span_pooling_matches_token_mean():
    import torch
    enc = aa.get_encoder("dense", "span")
    assert isinstance(enc, aa.SpanEncoder)
    model = enc.dense._load()
    text = "Levington Lagoon is a nature reserve near Levington in Suffolk."
    span = aa.find_mention(text, "nature reserve")
    got = enc.encode_spans([text], [span])[0]
    # independent computation: run the transformer and average the wordpieces of "nature reserve" (tokens 6-8:
    # [CLS] lev ##ing ##ton lagoon is a nature reserve ...)
    tok = model.tokenizer(text, return_tensors="pt")
    words = model.tokenizer.convert_ids_to_tokens(tok["input_ids"][0])
    idx = [i for i, w in enumerate(words) if w in ("nature", "reserve")]
    with torch.no_grad():
        hidden = model[0].auto_model(**tok).last_hidden_state[0]
    ref = hidden[idx].mean(0).numpy()
    ref = ref / np.linalg.norm(ref)
    assert len(idx) == 2
    assert np.allclose(got, ref, atol=1e-4)
    # a label missing from the paragraph is prepended, as the paper grounds entities
    texts, spans, stats = enc.ground([aa.Entity("Q1", "Zillis", "A church in Switzerland.")])
    assert texts == ["Zillis\nA church in Switzerland."] and spans == [(0, 6)] and stats["label_prepended"] == 1


# ---------------------------------------------------------------- end to end on the shipped slice
@pytest.fixture(scope="module")
def dense_audit(tmp_path_factory, argus_slice_dense_home):
    from gapbench.cli import main
    # MiniLM's span vectors of the slice, encoded once in the session by the command's own call (embed_entities;
    # tests/fx_docs.py), found in the cache as by a user's second audit; test_span_pooling_matches_token_mean checks
    # the span pooling itself against the transformer's token vectors
    copy_home(argus_slice_dense_home)
    out = tmp_path_factory.mktemp("argus-audit")
    assert main(["argus", "audit", "-r", "dense", "--out", str(out)]) == 0
    return out


@pytest.mark.slow
@pytest.mark.model
def test_cli_audit_shipped_slice_dense(dense_audit, shipped):
    d = json.loads((dense_audit / "argus_audit.json").read_text())
    assert d["kind"] == "argus_audit" and d["version"] == 1 and d["task"] == "argus/shipped-slice"
    assert d["encoder"]["pooling"] == "span" and d["encoder"]["dim"] == 384
    assert (d["k"], d["n_requested"], d["n_targets"], d["n_pairs"]) == (50, 800, 103, 695)
    assert d["n_effective"]["max"] == 619 and d["chance"] == pytest.approx(0.0812077, abs=1e-6)
    assert sum(d["grounding"].values()) == 620
    assert d["grounding"]["no_label"] == 31
    rps = np.array([e["rps"] for e in d["entities"]])
    assert d["mean_rps"] == pytest.approx(rps.mean())
    assert d["frac_rps_gt_0_5"] == pytest.approx((rps > 0.5).mean())
    # MiniLM retrieves related entities far above chance (binomial SE of the mean is about 0.016 here)
    assert d["mean_rps"] > d["chance"] + 0.2
    # per-entity rows agree with their ranks under rank <= k
    for e in d["entities"]:
        assert e["rps"] == pytest.approx(sum(r <= 50 for r in e["ranks"]) / len(e["ranks"]))
        assert len(e["ranks"]) == len(shipped.related[e["qid"]])
    assert sum(d["terciles"]["counts"].values()) == 103 and sum(d["bands"].values()) == 103
    png = (dense_audit / "argus_lda.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "mean RPS" in (dense_audit / "argus_audit.md").read_text()
    z = np.load(dense_audit / "argus_embeddings.npz")
    assert z["embeddings"].shape == (620, 384) and str(z["fingerprint"]) == d["encoder"]["fingerprint"]


def test_cli_audit_bad_input(cli, tmp_path, capsys):
    assert cli(["argus", "audit", "--entities", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path)]) == 2
    assert "give both --entities and --relations" in capsys.readouterr().err


# ---------------------------------------------------------------- the contract: options, views, report
def test_each_relation_view_is_read_from_the_same_edges(shipped):
    """with_relations gives what loading the files in that mode gives: the same targets in the same order."""
    undirected = aa.load_shipped(relations="undirected")
    view = shipped.with_relations("undirected")
    assert list(view.related) == list(undirected.related) and view.related == undirected.related
    assert view.neighbours == undirected.neighbours and view.dropped == undirected.dropped
    assert view.with_relations("directed").related == shipped.related
    by_hand = aa.AuditData(shipped.entities, shipped.related, shipped.neighbours, "no edges")
    assert by_hand.with_relations("directed") is by_hand
    with pytest.raises(ConfigError, match="records no edges, so its undirected view cannot be read"):
        by_hand.with_relations("undirected")


def test_the_options_name_the_settings_they_refuse():
    from gapbench import ArgusAuditOptions
    from gapbench.analyses.argus.argus_options import ArgusSweepOptions
    from gapbench.errors import OptionsError

    with pytest.raises(OptionsError) as err:
        ArgusAuditOptions(k=0, n=1, pooling="mean")
    assert [f for f, _ in err.value.problems] == ["pooling", "k", "n"]
    assert "k must be greater than or equal to 1, got 0" in str(err.value)
    assert ArgusSweepOptions(ns=(800, 100, 100), ks=(50, 1)).ns == (100, 800)  # sorted, each once
    with pytest.raises(OptionsError, match=r"ks must be integers of at least 1, got \[0, 5\]"):
        ArgusSweepOptions(ks=(0, 5))


def test_the_report_is_the_file(tmp_path, shipped):
    from gapbench.schemas import ArgusAudit, load_file

    res = aa.audit(shipped, "random", k=50, n=300, seed=7)
    assert isinstance(res, ArgusAudit) and res.k == 50 and res.n_targets == 103
    aa.write_audit(res, tmp_path, plot=False)
    back = load_file(tmp_path / "argus_audit.json")
    assert back.model_dump() == res.model_dump()  # the file is the report; the embeddings stay in memory
    assert back.embeddings is None and back.qids == [] and res.embeddings.shape == (620, res.encoder.dim)
    assert res.qids == list(shipped.entities) and res.data is shipped
    # the in-memory views read the report: ranks per target, and RPS from them (rank <= k)
    assert res.ranks == {e.qid: e.ranks for e in res.entities}
    assert res.rps() == {q: aa.rps_from_ranks(r, 50) for q, r in res.ranks.items()}
    assert res.mean_rps == pytest.approx(np.mean(list(res.rps().values())))
    with pytest.raises(ConfigError, match="holds no embeddings"):
        back.target_embeddings()


@pytest.mark.parametrize("args, message", [
    (["audit", "--k", "0"], "--k must be greater than or equal to 1, got 0."),
    (["audit", "--pooling", "mean"], "--pooling must be 'auto', 'span' or 'sentence', got 'mean'."),
    (["probe", "--split", "70,30"], "--split must be three positive train,validation,test shares such as 70,15,15, "
                                    "got '70,30'."),
    (["probe", "--families", "ridge,forest", "--grids", "full"],
     "--families must be 'ridge', 'xgboost' or 'mlp', got 'forest'; --grids must be 'reduced' or 'paper', got 'full'."),
    (["sweep", "--n", "100,x"], "--n must be a comma list of integers such as 100,200,400,800, got '100,x'."),
    (["sweep", "--n", "1"], "--n must be integers of at least 2, got [1]."),
])
def test_the_commands_name_the_flag_of_a_refused_setting(cli, tmp_path, capsys, args, message):
    assert cli(["argus", *args, "-r", "random", "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == f"gapbench: error: {message}"
    assert not (tmp_path / "out").exists()  # refused before any work
