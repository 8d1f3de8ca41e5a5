"""gapbench obliq build: an OBLIQ-style task built end to end against a scripted local server whose answers come from
attributes planted in the documents (tests/obliq_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gapbench.analyses.obliq_build.build import build_obliq
from gapbench.analyses.obliq_build.context import CHECKPOINTS
from gapbench.analyses.obliq_build.obliq_options import ObliqBuildOptions
from gapbench.errors import ConfigError, ObliqBuildError
from gapbench.llm.client import LLMClient, LLMError
from obliq_server import Attribute, ObliqServer, World

LENS = "the complaint or compliment a customer message expresses without naming it outright"

DOCS = {
    # attribute "late": an order that came far too late; a3 and a5 the annotator misses (planted missed positives)
    "a1": "Ordered a lamp on the first of the month and it showed up on the twenty-ninth.",
    "a2": "Three weeks of tracking updates saying in transit, then the box finally appeared yesterday.",
    "a3": "My birthday present turned up a fortnight after the party was over.",
    "a4": "The courier kept postponing; the sofa came eleven days after the promised date.",
    "a5": "By the time the winter coat reached my door it was already spring.",
    "a6": "Paid for express shipping, received the parcel a month later.",
    # attribute "staff": thanks for one employee; every one names Ziggy (the planted discriminative word)
    "b1": "Ziggy at the front desk sorted out my room mix-up in minutes, what a star.",
    "b2": "Big thanks to Ziggy, who stayed late to help me fix my account.",
    "b3": "Ziggy remembered my order from last week and had it ready before I asked.",
    "b4": "Whoever hired Ziggy deserves a raise too; patient, kind and quick.",
    "b5": "Ziggy walked me through the whole setup over the phone without rushing.",
    # attribute "billing": money taken wrongly, in two phrasings the annotator alternates
    "c1": "Two identical charges for one pair of shoes on my card statement.",
    "c2": "The receipt says 40 but the bank took 400.",
    "c3": "I cancelled in March and the subscription fee kept coming out in April and May.",
    "c4": "The quote was 250 and the bill that arrived said 310 with no explanation.",
    "c5": "Refund approved weeks ago, yet the money never came back to my account.",
    # attribute "vegan": one document only, below min_cluster
    "d1": "Does the kitchen offer anything without meat, eggs or dairy?",
    # distractors: no attribute
    "x1": "The store opens at nine on weekdays and ten on Sundays.",
    "x2": "Please send me the catalogue for the autumn collection.",
    "x3": "What sizes does the blue jacket come in?",
    "x4": "Is parking available near the downtown branch?",
    "x5": "I would like to update the email address on my profile.",
    "x6": "Can I pick up my order in person instead?",
}
TRUTH = {d: {"a": "late", "b": "staff", "c": "billing", "d": "vegan"}.get(d[0]) for d in DOCS}
MISSED = {"a3", "a5"}
ATTRIBUTES = {
    "late": Attribute(["frustration that an order arrived far later than promised"],
                      "annoyance at a shipment arriving much later than promised",
                      ["customers tired of waiting on things they had already paid for"]),
    "staff": Attribute(["gratitude toward a helpful employee"],
                       "thanks for one employee's personal help",
                       ["messages thanking Ziggy", "praise for one worker who went beyond the call of duty"]),
    "billing": Attribute(["charged the wrong amount by mistake", "a refund or cancellation that the bank ignored"],
                         "money taken wrongly by a billing mistake",
                         ["...", "people who found they had paid what they should not have"]),  # a copied placeholder first
    "vegan": Attribute(["asks about plant based food"], "questions about plant based food",
                       ["diners avoiding animal products"]),
}
GOLD = {"late": {"a1", "a2", "a4", "a6"}, "staff": {f"b{i}" for i in range(1, 6)},
        "billing": {f"c{i}" for i in range(1, 6)}}


def world() -> World:
    said = {d: (None if d in MISSED else k) for d, k in TRUTH.items()}
    return World(dict(DOCS), dict(TRUTH), said, ATTRIBUTES)


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()), encoding="utf-8")
    return path


def options(out: Path, **over) -> ObliqBuildOptions:
    base = dict(lens=LENS, out=out, batch_size=4, judge_batch=6, min_cluster=2, max_cluster=10,
                pool_retrievers=("bm25", "dense"), pool_depth=30, regenerate=2)
    return ObliqBuildOptions(**{**base, **over})


def client(srv, cache: Path) -> LLMClient:
    return LLMClient(base_url=srv.base_url, model="judge", cache=cache, max_retries=0, concurrency=4)


def qrels(path: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in path.read_text().splitlines()[1:]:
        q, d, g = line.split("\t")
        assert g == "2"
        out.setdefault(q, set()).add(d)
    return out


def by_attribute(folder: Path, split: str) -> dict[str, set[str]]:
    """The judged documents per planted attribute (found from each query's text)."""
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (folder / "queries.jsonl").open()}
    w = world()
    return {w.key_of_query(texts[q]): docs for q, docs in qrels(folder / "qrels" / f"{split}.tsv").items()}


def test_build_end_to_end_recovers_the_planted_clusters(corpus, tmp_path):
    out = tmp_path / "task"
    with ObliqServer(world(), drop_ids={"b3"}, invent_id=True, repeat_id=True) as srv:
        report = build_obliq(str(corpus), options(out, llm_client=client(srv, tmp_path / "llm.sqlite")))
        calls = srv.counts["chat"]
        sent = list(srv.received)
        query_prompts = list(srv.query_prompts)
    # the gold judgements are the planted clusters (the annotator's misses are not in them), the vegan one dropped
    assert by_attribute(out, "test") == GOLD
    # the pool stage adds exactly the planted missed positives, and nothing else
    pooled = by_attribute(out, "pooled")
    assert {k: pooled[k] - GOLD[k] for k in GOLD} == {"late": MISSED, "staff": set(), "billing": set()}
    c = report.counts
    # the planted leaky query ("messages thanking Ziggy") is caught and written again, once
    assert c["queries"]["leaky queries caught"] == 1 and c["queries"]["answers without a usable query"] == 1
    assert c["queries"]["queries written again"] == 2  # the leaky one and the placeholder one, each once
    staff = [p for p in query_prompts if "thanks for one employee" in p]
    assert len(staff) == 2 and "ziggy" in staff[0].split("Words to avoid:")[1].splitlines()[0]
    assert "This is try 2" in staff[1] and "ziggy" in staff[1].split("This is try 2")[1]
    # ids: b3 left out of its batch answer is asked again alone; the invented id is counted and ignored
    assert c["annotate"]["documents asked again alone"] == 1 and c["annotate"]["invented ids"] == 1
    assert c["annotate"]["repeated ids"] == 1  # the first answer kept: the clusters above are the planted ones
    assert c["annotate"]["documents with a value"] == len(DOCS) - len(MISSED) - 6
    assert [(d.stage, d.what) for d in report.dropped if d.stage == "collapse"] == [
        ("collapse", "asks about plant based food")]
    assert report.n_queries == 3 and report.n_gold == 14 and report.n_pooled == 16
    assert {q: (p.added) for q, p in report.per_query_pool.items()} == {
        q: len(MISSED) if docs == GOLD["late"] else 0 for q, docs in qrels(out / "qrels" / "test.tsv").items()}
    # answers asked for as JSON schema (structured output), the ids of an annotation answer limited to those shown
    assert all(r["response_format"]["type"] == "json_schema" for r in sent)
    first = sent[0]["response_format"]["json_schema"]
    assert first["name"] == "obliq_annotations"
    assert first["schema"]["properties"]["annotations"]["items"]["properties"]["id"]["enum"] == ["D1", "D2", "D3", "D4"]
    card = json.loads((out / "card.json").read_text())
    assert card["lens"] == LENS and set(card["prompts"]) >= {"annotate", "query", "judge", "pool_judge"}
    assert [s["stage"] for s in card["stages"]] == ["annotate", "collapse", "queries", "rejudge", "pool"]
    # a re-run makes no call at all
    with ObliqServer(world()) as srv:
        again = build_obliq(str(corpus), options(out, llm_client=client(srv, tmp_path / "llm.sqlite")))
        assert srv.counts["chat"] == 0
    assert again.n_gold == report.n_gold and again.n_pooled == report.n_pooled
    assert calls == report.llm_usage["calls"] == sum(c.get("calls", 0) for c in report.counts.values())


def test_a_build_killed_mid_stage_resumes_without_repeating_a_call(corpus, tmp_path):
    with ObliqServer(world()) as srv:  # the whole build, on a cache of its own: how many calls it takes
        build_obliq(str(corpus), options(tmp_path / "full", llm_client=client(srv, tmp_path / "full.sqlite")))
        total = srv.counts["ok"]
    cache = tmp_path / "llm.sqlite"
    with ObliqServer(world(), fail_after=9) as srv:  # dies during the collapse stage's calls
        with pytest.raises(LLMError):
            build_obliq(str(corpus), options(tmp_path / "task", llm_client=client(srv, cache)))
        answered = srv.counts["ok"]
    assert 0 < answered <= 9
    with ObliqServer(world()) as srv:
        report = build_obliq(str(corpus), options(tmp_path / "task", llm_client=client(srv, cache)))
        assert srv.counts["ok"] == total - answered  # only the calls not answered before
    assert by_attribute(tmp_path / "task", "test") == GOLD


def test_checkpoints_keep_their_form_and_a_build_run_again_reads_them(corpus, tmp_path):
    """The files a build leaves as it has always written them: the collapse checkpoint holds each cluster as its four
    fields, card.json each stage's counts listed by name. A build run again over the folder reads the checkpoints
    (it asks nothing, not even the LLM cache), leaves them byte for byte, and cards the same counts, drops and pools."""
    out = tmp_path / "task"
    with ObliqServer(world()) as srv:
        first = build_obliq(str(corpus), options(out, pool_retrievers=("bm25",),
                                                 llm_client=client(srv, tmp_path / "llm.sqlite")))
    saved = {p.name: p.read_bytes() for p in sorted((out / CHECKPOINTS).iterdir())}
    assert list(saved) == ["annotate.json", "collapse.json", "pool.json", "queries.json", "rejudge.json"]
    clusters = json.loads(saved["collapse.json"])["result"]
    # the planted clusters, largest first (ties by description), named by the consolidating answer; the annotator's
    # two phrasings of billing (clustered apart, in the order of the sorted values) joined by the merge
    assert clusters == [
        {"cluster_id": "c001", "description": ATTRIBUTES["billing"].description, "doc_ids": sorted(GOLD["billing"]),
         "values": sorted(ATTRIBUTES["billing"].values)},
        {"cluster_id": "c002", "description": ATTRIBUTES["staff"].description, "doc_ids": sorted(GOLD["staff"]),
         "values": ATTRIBUTES["staff"].values},
        {"cluster_id": "c003", "description": ATTRIBUTES["late"].description, "doc_ids": sorted(GOLD["late"]),
         "values": ATTRIBUTES["late"].values},
    ]
    card = json.loads((out / "card.json").read_text())
    assert list(card["counts"]) == ["annotate", "collapse", "queries", "rejudge", "pool"]  # in the order run
    assert all(list(c) == sorted(c) for c in card["counts"].values())
    assert card["counts"]["collapse"]["clusters kept"] == 3 and card["counts"]["rejudge"]["documents graded 2"] == 14
    with ObliqServer(world()) as srv:
        again = build_obliq(str(corpus), options(out, pool_retrievers=("bm25",),
                                                 llm_client=client(srv, tmp_path / "llm.sqlite")))
        assert srv.counts["chat"] == 0
    assert again.llm_usage is not None and again.llm_usage["requests"] == 0
    assert {p.name: p.read_bytes() for p in sorted((out / CHECKPOINTS).iterdir())} == saved
    run_bound = {"date", "seconds", "model", "llm_usage"}  # the clock, the server's port and this run's calls
    assert again.model_dump(exclude=run_bound) == first.model_dump(exclude=run_bound)
    assert json.loads((out / "card.json").read_text())["counts"] == card["counts"]


def test_gapbench_run_takes_the_built_folder(corpus, tmp_path, capsys):
    from gapbench.cli import main

    out = tmp_path / "task"
    with ObliqServer(world()) as srv:
        build_obliq(str(corpus), options(out, pool_retrievers=("bm25",), llm_client=client(srv, tmp_path / "c")))
        assert main(["run", str(out), "-r", "bm25", "--json"]) == 0
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert "nDCG@10" in json.dumps(result)
        # the retrieval-verification gap on its gold and on its pooled judgements (the folder option split=pooled)
        for spec, name in ((str(out), "g"), (f"{out}:split=pooled", "p")):
            assert main(["gap", spec, "--retrievers", "bm25", "--llm-base-url", srv.base_url, "--llm-model", "judge",
                         "--pool-sizes", "", "-o", str(tmp_path / name), "--json"]) == 0
        gaps = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()[-2:]]
    assert [g["n_queries"] for g in gaps] == [3, 3] and gaps[0]["task"] != gaps[1]["task"]
    # on the gold task, the pooled judgements are reported beside the gold ones, as for obliq/* tasks
    assert list(gaps[0]["other_qrels"]) == ["P"] and not gaps[1]["other_qrels"]


def test_unparseable_annotations_are_counted_and_stop_the_build_at_stage_2(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_LLM_WATCH_WINDOW", "0")  # the watch off: the stage's own accounting decides
    with ObliqServer(world(), garble={"annotate"}) as srv:
        with pytest.raises(ObliqBuildError, match=r"lost at stage 2 \(annotate\)") as err:
            build_obliq(str(corpus), options(tmp_path / "t", llm_client=client(srv, tmp_path / "c")))
    assert err.value.stage == "annotate"
    assert f"{len(DOCS)} no usable answer for the document" in str(err.value)


def test_every_cluster_filtered_out_exits_2_naming_stage_3(corpus, tmp_path, capsys):
    from gapbench.cli import main

    with ObliqServer(world()) as srv:
        code = main(["obliq", "build", str(corpus), "--lens", LENS, "--out", str(tmp_path / "t"), "--min-cluster",
                     "9", "--llm-base-url", srv.base_url, "--llm-model", "judge"])
    err = capsys.readouterr().err
    assert code == 2
    assert "every cluster was lost at stage 3 (collapse)" in err and "fewer than 9 documents (min_cluster)" in err


def test_a_refused_setting_names_the_flag_on_the_command_line(corpus, tmp_path, capsys):
    from gapbench.cli import main

    code = main(["obliq", "build", str(corpus), "--lens", LENS, "--out", str(tmp_path / "t"), "--pool-depth", "0",
                 "--leak-df", "1.5"])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "t").exists()
    # every refused setting, in the order ObliqBuildOptions declares them
    assert err == ("gapbench: error: --leak-df must be a share in (0, 1], got 1.5; --pool-depth must be greater than "
                   "or equal to 1, got 0.\n")


def test_bad_input_is_refused_before_any_call(corpus, tmp_path):
    with pytest.raises(ConfigError, match="ObliqBuildOptions: lens is empty; describe the latent attribute"):
        ObliqBuildOptions(lens="  ", out=tmp_path / "t")
    with pytest.raises(ConfigError, match="ObliqBuildOptions: pool_depth must be greater than or equal to 1, got 0"):
        ObliqBuildOptions(lens=LENS, out=tmp_path / "t", pool_depth=0)
    with pytest.raises(ConfigError, match="min_cluster 5 is above max_cluster 2"):
        ObliqBuildOptions(lens=LENS, out=tmp_path / "t", min_cluster=5, max_cluster=2)
    from gapbench.analyses.obliq_build.obliq_options import read_lens

    with pytest.raises(ConfigError, match="lens file 'no-such-lens.txt' does not exist"):
        read_lens("no-such-lens.txt")
    (tmp_path / "lens.txt").write_text("  \n")
    with pytest.raises(ConfigError, match="lens file .*lens.txt is empty"):
        read_lens(str(tmp_path / "lens.txt"))
    (tmp_path / "lens.txt").write_text(LENS + "\n")
    assert read_lens(str(tmp_path / "lens.txt")) == LENS and read_lens("a lens.txt in words") == \
        "a lens.txt in words"
    blank = tmp_path / "blank.jsonl"
    blank.write_text('{"_id": "1", "text": " "}\n{"_id": "2", "text": ""}\n')
    with pytest.raises(ObliqBuildError, match="none has text"):
        build_obliq(str(blank), ObliqBuildOptions(lens=LENS, out=tmp_path / "t", dry_run=True))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not an earlier build"):
        build_obliq(str(corpus), ObliqBuildOptions(lens=LENS, out=taken, llm_base_url="http://127.0.0.1:9/v1",
                                                   llm_model="m"))


def test_dry_run_estimates_without_a_call(corpus, tmp_path, capsys):
    from gapbench.cli import main
    from gapbench.llm.speed import Speed

    with ObliqServer(world()) as srv:
        assert main(["obliq", "build", str(corpus), "--lens", LENS, "--out", str(tmp_path / "t"), "--dry-run",
                     "--batch-size", "4", "--llm-base-url", srv.base_url, "--llm-model", "judge"]) == 0
        assert srv.counts["chat"] == 4 and srv.kinds == []  # the four probe calls that time the model; no build call
    text = capsys.readouterr().out
    assert "cost estimate for 23 documents" in text
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("annotate"))
    assert row[1] == "6"  # 23 documents, 4 a call
    time_line = text.strip().splitlines()[-1]
    assert time_line.startswith("time: about ") and "tokens/s, measured on judge at http://127.0.0.1:" in time_line
    assert not (tmp_path / "t").exists()
    # the range by hand: 1,000 tokens in at 100/s (10 s), 400 out at 20/s: a quarter (5 s) to all of them (20 s)
    speed = Speed(100.0, 20.0, "m", "e")
    assert speed.seconds(1000, 400) == (15.0, 30.0) and speed.text(1000, 400).startswith("about 15-30 s at 100")
    assert Speed(100.0, 20.0, "m", "e").text(100_000, 40_000).startswith("about 25-50 min")


def test_labels_as_documents_writes_exclusions_that_run_applies(corpus, tmp_path):
    from gapbench.cli import main
    from gapbench.formats import read_trec_run
    from gapbench.retrieval import get_retriever
    from gapbench.task import get_task

    labels = tmp_path / "labels.tsv"
    labels.write_text("".join(f"{d}\t{k}\n" for d, k in TRUTH.items() if k))
    out = tmp_path / "task"
    report = build_obliq(str(corpus), options(out, labels=labels, labels_as="documents", label_queries=2))
    excluded = json.loads((out / "per_query_excluded_ids.json").read_text())
    gold = qrels(out / "qrels" / "test.tsv")
    assert report.n_queries == 6 and len(excluded) == 6  # two per label of at least min_cluster documents
    for q, (doc,) in excluded.items():
        assert q.endswith("-" + doc) and doc not in gold[q]
        assert gold[q] == {d for d, k in TRUTH.items() if k == TRUTH[doc]} - {doc}
    assert report.llm_usage is None and report.model is None  # relevance is the label: no LLM, not even started
    # the query is its own document's text, so BM25 ranks that document first unless the exclusion masks it
    data = get_task(str(out)).load()
    assert {q: set(ids) for q, ids in data.excluded.items()} == {q: set(ids) for q, ids in excluded.items()}
    bm25 = get_retriever("bm25")
    bm25.index(data.corpus)
    unmasked = bm25.search(data.queries, 3)
    assert all(unmasked[q][0][0] == excluded[q][0] for q in excluded)
    assert main(["run", str(out), "-r", "bm25", "-o", str(tmp_path / "r")]) == 0
    run = read_trec_run(next((tmp_path / "r").rglob("run.trec.gz")))
    assert all(excluded[q][0] not in dict(run[q]) for q in excluded) and all(len(run[q]) > 0 for q in excluded)


def test_recollection_mode_one_target_per_query_openings_varied(tmp_path):
    long_docs = {f"p{i}": f"passage {i} " + " ".join(f"word{i}x{j}" for j in range(30)) for i in range(6)}
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in long_docs.items()))
    rec = {d: [f"a recollection of a vague moment number {d[1]}"] for d in long_docs}
    rec["p1"] = ["the passage with word1x5 in it", "a recollection of a vague moment number 1"]  # leaky, then clean
    with ObliqServer(World(long_docs, {}, {}, {}, recollections=rec)) as srv:
        report = build_obliq(str(path), options(tmp_path / "t", mode="recollection", targets=6,
                                                pool_retrievers=("bm25",), llm_client=client(srv, tmp_path / "c")))
        kinds = list(srv.kinds)
    gold = qrels(tmp_path / "t" / "qrels" / "test.tsv")
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (tmp_path / "t" / "queries.jsonl").open()}
    # one target per query, the one the recollection was written for
    assert {texts[q]: docs for q, docs in gold.items()} == {rec[d][-1]: {d} for d in long_docs}
    assert report.counts["recollect"]["leaky queries caught"] == 1 and kinds.count("recollect") == 7
    openings = [json.loads(line)["opening"] for line in (tmp_path / "t" / "clusters.jsonl").open()]
    assert len(set(openings)) == 6  # six targets, six different openings


def readme_commands() -> list[list[str]]:
    """The shell commands of docs/tasks/obliq-build.md's block marked 'run by tests: obliq-build'
    (tests/docs_blocks.py's marker), continuation lines joined."""
    import shlex

    from docs_blocks import block

    code = block("docs/tasks/obliq-build.md", "obliq-build").code
    return [shlex.split(line) for line in code.replace("\\\n", " ").splitlines() if line.strip()]


def test_readme_worked_example_runs(tmp_path, monkeypatch, capsys):
    from gapbench.cli import main

    (tmp_path / "tickets.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()))
    monkeypatch.chdir(tmp_path)
    commands = readme_commands()
    assert [c[:3] for c in commands] == [["gapbench", "obliq", "build"]] * 2 + [["gapbench", "run", "tickets-obliq"],
                                                                               ["gapbench", "run",
                                                                                "tickets-obliq:split=pooled"]]
    with ObliqServer(world()) as srv:
        for args in commands:
            args = [srv.base_url if a == "http://127.0.0.1:8000/v1" else "judge" if a == "MODEL" else a
                    for a in args[1:]]
            assert main(args) == 0, args
    out = capsys.readouterr()
    assert "cost estimate for 23 documents" in out.out and "cost estimate" in out.err
    assert "time: about " in out.out  # the dry run's range, timed on the endpoint
    assert by_attribute(tmp_path / "tickets-obliq", "test") == GOLD


def test_a_server_without_structured_output_is_read_strictly_and_repairs_counted(corpus, tmp_path):
    # the server refuses response_format (as some do); the client sends the requests again without it, and
    # the annotations, wrapped in code fences with prose around them, are found there and counted as repaired
    with ObliqServer(world(), reject_params={"response_format": None}, fence={"annotate"}) as srv:
        report = build_obliq(str(corpus), options(tmp_path / "t", pool_retrievers=("bm25",),
                                                  llm_client=client(srv, tmp_path / "c")))
        sent = list(srv.received)
        kinds = list(srv.kinds)
        refused = srv.counts["refused:response_format"]
    # every request that carried response_format was refused (those sent before the client learnt it), every other
    # request went without it and was answered
    assert refused >= 1 and sum("response_format" in r for r in sent) == refused and len(sent) == len(kinds) + refused
    assert report.counts["annotate"]["answers repaired"] == kinds.count("annotate") == 6
    assert "answers repaired" not in report.counts["queries"]
    assert by_attribute(tmp_path / "t", "test") == GOLD


def test_prompts_folder_overrides_a_template_and_bad_ones_are_named(corpus, tmp_path):
    from gapbench.analyses.obliq_build.llmio import PROMPTS_DIR

    mine = tmp_path / "prompts"
    mine.mkdir()
    (mine / "query.txt").write_text((PROMPTS_DIR / "query.txt").read_text().replace("You write one search query",
                                                                                  "You write one search query, please"))
    with ObliqServer(world()) as srv:
        report = build_obliq(str(corpus), options(tmp_path / "t", prompts=mine, pool_retrievers=(),
                                                  llm_client=client(srv, tmp_path / "c")))
        shown = list(srv.query_prompts)
    assert shown and all(p.startswith("You write one search query, please") for p in shown)
    assert report.prompts["query"]["source"] == str(mine / "query.txt")
    assert report.prompts["annotate"]["source"] == "packaged"
    import hashlib

    for name, text in (("annotate", (PROMPTS_DIR / "annotate.txt").read_bytes()),
                       ("query", (mine / "query.txt").read_bytes())):
        assert report.prompts[name]["sha256"] == hashlib.sha256(text).hexdigest()
    (mine / "judge.txt").write_text("Judge {documents} for {querry}")
    with pytest.raises(ConfigError, match=r"judge.txt uses the fields documents, querry; the judge template takes"):
        build_obliq(str(corpus), options(tmp_path / "t2", prompts=mine, dry_run=True))


def test_grammar_schema_makes_every_id_come_back_once_in_order():
    """For llama-cpp-python (json_object with a schema), the ids are a tuple its grammar enforces."""
    from llama_cpp import llama_grammar  # the local-llm extra (in dev): the grammar the embedded server builds
    from gapbench.analyses.obliq_build.llmio import id_schema, response_format

    schema = id_schema("annotations", "value", {"type": ["string", "null"]}, ["D1", "D2", "D3"], "json_object")
    fmt = response_format("obliq_annotations", schema, "json_object")
    assert fmt == {"type": "json_object", "schema": schema}
    grammar = llama_grammar.json_schema_to_gbnf(json.dumps(fmt["schema"]))
    assert 'annotations ::= "[" space annotations-tuple-0 "," space annotations-tuple-1 "," space ' \
           'annotations-tuple-2 "]" space' in grammar
    assert [line.split("::= ")[1] for line in grammar.splitlines() if line.startswith("annotations-tuple-")
            and line.split(" ::=")[0].endswith("-id")] == ['"\\"D1\\""', '"\\"D2\\""', '"\\"D3\\""']


def test_the_input_files_example_in_the_docs_builds(tmp_path, capsys):
    """docs/tasks/obliq-build.md's example corpus file is read as the page says: ids, the title before the text."""
    import re

    from gapbench.cli import main

    page = (Path(__file__).resolve().parents[1] / "docs" / "tasks" / "obliq-build.md").read_text(encoding="utf-8")
    example = re.search(r"## The input file.*?```json\n(.*?)```", page, re.S).group(1)
    (tmp_path / "tickets.jsonl").write_text(example, encoding="utf-8")
    with ObliqServer(world()) as srv:
        assert main(["obliq", "build", str(tmp_path / "tickets.jsonl"), "--lens", LENS, "--out", str(tmp_path / "t"),
                     "--dry-run", "--llm-base-url", srv.base_url, "--llm-model", "judge", "--json"]) == 0
    card = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert card["corpus"]["documents"] == 3 and card["estimate"]["stages"]["annotate"]["calls"] == 1
    # "Order 4411. Paid for ..." (title, ". ", text) is the first document's 79 characters: tokens as characters / 4
    texts = ["Order 4411. Paid for express shipping, received the parcel a month later.",
             "Big thanks to Ziggy, who stayed late to help me fix my account.",
             "The receipt says 40 but the bank took 400."]
    assert card["estimate"]["mean_document_tokens"] == round(sum(len(t) - 2 for t in texts[:1]) / 12
                                                             + sum(len(t) for t in texts[1:]) / 12, 1)
    assert card["estimate"]["time"]["prompt_tps"] > 0


@pytest.mark.parametrize("text, expected", [
    ('{"query": "late parcels"}', ({"query": "late parcels"}, "clean")),
    ('{"query": "late\nparcels"}', ({"query": "late\nparcels"}, "repaired")),  # a raw newline inside the string
    ('Sure!\n```json\n{"query": "late parcels"}\n```\nDone.', ({"query": "late parcels"}, "repaired")),
    ('My answer: {"query": "late parcels"} (hope it helps)', ({"query": "late parcels"}, "repaired")),
    ('{"answer": "late parcels"}', (None, "unparseable")),  # the key asked for is missing
    ("I cannot help with that.", (None, "unparseable")),
])
def test_answers_are_read_strictly_and_repairs_named(text, expected):
    from gapbench.analyses.obliq_build.llmio import parse_object

    assert parse_object(text, "query") == expected


def test_a_folders_exclusions_file_is_checked(tmp_path):
    from gapbench.errors import DataFormatError
    from gapbench.task import get_task

    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "one"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    (tmp_path / "per_query_excluded_ids.json").write_text('{"q1": ["d1"], "q9": ["d2"]}')
    assert get_task(str(tmp_path)).load().excluded == {"q1": frozenset({"d1"})}  # q9 is no query of the folder
    (tmp_path / "per_query_excluded_ids.json").write_text('{"q1": ["d7"]}')
    with pytest.raises(DataFormatError, match=r"per_query_excluded_ids.json: query 'q1' excludes document 'd7', "
                                              r"absent from the corpus"):
        get_task(str(tmp_path)).load()
    (tmp_path / "per_query_excluded_ids.json").write_text('{"q1": ["d1"],\n "q2" []}')
    with pytest.raises(DataFormatError, match=r"per_query_excluded_ids.json, line 2: malformed JSON"):
        get_task(str(tmp_path)).load()
    (tmp_path / "per_query_excluded_ids.json").write_text('{"q1": ["d1"], "q1": []}')
    with pytest.raises(DataFormatError, match=r"key 'q1' appears twice"):
        get_task(str(tmp_path)).load()


@pytest.mark.parametrize("most", [8000, 2])  # agglomerative (average linkage), and the leader pass beyond the limit
def test_threshold_clusters_join_values_under_the_distance(monkeypatch, most):
    from gapbench.analyses.obliq_build import collapse

    monkeypatch.setattr(collapse, "AGGLOMERATIVE_MAX", most)
    # cosine distances: rows 0-1 0.0101 (0.99/sqrt(0.99^2+0.14^2) = 0.9901), rows 0-2 and 1-2 about 1, rows 2-3 0.02
    vectors = [[1.0, 0.0, 0.0], [0.99, 0.14, 0.0], [0.0, 0.0, 1.0], [0.0, 0.2, 0.98]]
    assert collapse.threshold_clusters(vectors, 0.05) == [[0, 1], [2, 3]]
    assert collapse.threshold_clusters(vectors, 0.005) == [[0], [1], [2], [3]]
    assert collapse.threshold_clusters([[3.0, 4.0]], 0.1) == [[0]]


def test_leak_vocabulary_by_hand():
    from gapbench.analyses.obliq_build.leaks import Vocabulary, bm25_share, word_leaks

    texts = {"a": "Ziggy fixed the router", "b": "Ziggy was kind", "c": "the router failed again",
             "d": "kind words for the staff", "e": "nothing here"}
    vocab = Vocabulary(texts)
    # in a and b: 'ziggy' in both (df 2, all inside), 'fixed', 'router', 'kind' in one of the two (share 0.5)
    assert vocab.discriminative(["a", "b"], leak_df=0.2, leak_share=1.0) == ["ziggy"]
    # share 0.5 admits words in one of the two; 'router' (also in c) and 'kind' (also in d) are over df 1 = 0.2 x 5
    assert vocab.discriminative(["a", "b"], leak_df=0.2, leak_share=0.5) == ["ziggy", "fixed"]
    assert word_leaks("Posts thanking ZIGGY for fixing things", ["ziggy", "fixed"]) == ["ziggy"]
    assert bm25_share([("a", 2.0), ("c", 1.0), ("b", 0.5)], ["a", "b"]) == 0.5  # b is third, past the top 2
    assert bm25_share([("a", 2.0), ("b", 0.0)], ["a", "b"]) == 0.5  # a zero score finds nothing


def test_corpus_from_a_registered_task_and_the_document_selection(tmp_path, capsys):
    from gapbench.cli import main

    fixtures = Path(__file__).parent / "fixtures" / "beir"
    with ObliqServer(world()) as srv:  # the dry run's probe times it
        lens = ["--lens", LENS, "--out", str(tmp_path / "t"), "--dry-run", "--llm-base-url", srv.base_url,
                "--llm-model", "judge"]
        assert main(["obliq", "build", f"beir/scifact:data_dir={fixtures}", *lens]) == 0  # through get_task
        assert main(["obliq", "build", str(fixtures / "scifact"), "--max-docs", "4", *lens]) == 0
        assert main(["obliq", "build", str(fixtures / "scifact"), "--sample", "2", "--seed", "3", *lens,
                     "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    heads = [line.split(" (")[0] for line in out if line.startswith("cost estimate for")]
    assert heads == ["cost estimate for 6 documents", "cost estimate for 4 documents"]
    card = json.loads(out[-1])
    assert card["dry_run"] and card["corpus"]["documents"] == 2 and card["corpus"]["source_documents"] == 6
    assert card["files"] == [] and not (tmp_path / "t").exists()


@pytest.mark.slow
def test_ctrl_c_mid_annotation_then_a_rerun_repeats_no_call(corpus, tmp_path, monkeypatch):
    """The command line, interrupted by SIGINT during stage 2 and run again: every answer that reached the cache
    before the interruption is not asked again, and the build completes. The interrupted command is a process of its
    own (the signal is the point); the whole build it is compared with and the re-run are the same command in-process
    (each process would import torch again for the collapse stage's embeddings)."""
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from gapbench.cli import main

    def args(srv, out: Path) -> list[str]:
        return ["obliq", "build", str(corpus), "--lens", LENS, "--out", str(out), "--batch-size", "2",
                "--min-cluster", "2", "--pool-retrievers", "bm25", "--llm-base-url", srv.base_url, "--llm-model",
                "judge"]

    def command(srv, out: Path) -> list[str]:
        return [sys.executable, "-m", "gapbench", *args(srv, out)]

    def in_process(srv, out: Path, home: Path) -> None:
        with monkeypatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(home))
            assert main(args(srv, out)) == 0

    def env(home: Path) -> dict:
        return {**os.environ, "GAPBENCH_HOME": str(home), "HF_HUB_OFFLINE": "1", "GAPBENCH_PROGRESS": "off"}

    def in_cache(home: Path) -> int:
        path = home / "cache" / "llm" / "responses.sqlite"
        if not path.exists():
            return 0
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
                return db.execute("select count(*) from responses").fetchone()[0]
        except sqlite3.OperationalError:  # the table is not made yet, or the writer holds the lock
            return 0

    with ObliqServer(world()) as srv:  # the whole build in a home of its own: how many calls it takes
        in_process(srv, tmp_path / "full", tmp_path / "h1")
        total = srv.counts["ok"]
    with ObliqServer(world(), slots=1, latency=0.2) as srv:
        proc = subprocess.Popen(command(srv, tmp_path / "t"), env=env(tmp_path / "h2"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        guard = time.monotonic() + 300  # only so that a broken build cannot hang the test
        # interrupt once three answers are in the cache: the server's count alone races the client's write under load
        while in_cache(tmp_path / "h2") < 3:
            assert proc.poll() is None and time.monotonic() < guard, proc.stderr.read().decode()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted by SIGINT" in err.decode()
    cached = in_cache(tmp_path / "h2")
    assert 3 <= cached < 12  # stage 2 was cut: 23 documents make 12 annotation calls of 2
    with ObliqServer(world()) as srv:
        in_process(srv, tmp_path / "t", tmp_path / "h2")
        assert srv.counts["ok"] == total - cached
    assert by_attribute(tmp_path / "t", "test") == by_attribute(tmp_path / "full", "test")


def test_python_api_exports_the_build(corpus, tmp_path):
    import gapbench

    assert gapbench.build_obliq is build_obliq and gapbench.ObliqBuildOptions is ObliqBuildOptions
    with ObliqServer(world()) as srv:  # the dry run times the model on its endpoint
        report = gapbench.build_obliq(str(corpus), gapbench.ObliqBuildOptions(
            lens=LENS, out=tmp_path / "t", dry_run=True, llm_base_url=srv.base_url, llm_model="judge"))
    assert report.estimate["time"]["high_s"] >= report.estimate["time"]["low_s"] > 0
    from gapbench.schemas import ObliqBuildReport

    assert isinstance(report, ObliqBuildReport) and report.estimate["stages"]["annotate"]["calls"] == 3
