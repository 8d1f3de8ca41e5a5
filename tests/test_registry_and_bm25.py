"""Registry behaviour, option parsing, and BM25 checked against hand-computed Lucene BM25 scores."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gapbench.adapters.bm25 import BM25, BM25Lucene
from gapbench.errors import ConfigError, DuplicateNameError, OptionsError, UnknownNameError
from gapbench.specs import parse_spec
from gapbench.registry import Registry
from gapbench.retrieval import get_retriever, search_with
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query

FIXTURES_BEIR = Path(__file__).parent / "fixtures" / "beir"


def test_registry_lazy_duplicate_and_suggestions():
    reg: Registry = Registry("widget")
    reg.register("math-sqrt", "math:sqrt")
    assert reg.get("math-sqrt")(16.0) == 4.0  # the lazy "module:attr" entry resolves on first use
    with pytest.raises(DuplicateNameError, match="already registered"):
        reg.register("math-sqrt", "math:floor")

    @reg.register("square")
    def square(x):
        return x * x

    assert reg.get("square")(3) == 9
    with pytest.raises(UnknownNameError) as err:
        reg.get("sqare")
    assert "Did you mean 'square'" in str(err.value) and "math-sqrt" in str(err.value)


def test_unknown_task_and_retriever_suggest_near_matches():
    with pytest.raises(UnknownNameError, match="Did you mean 'impliret/multispeaker/wknow'"):
        get_task("impliret/multispeaker/wknwo")
    with pytest.raises(UnknownNameError, match="Did you mean 'bm25'"):
        get_retriever("bm52")


def test_parse_spec_and_typed_options():
    assert parse_spec("dense:model=a/b,batch_size=8") == ("dense", {"model": "a/b", "batch_size": "8"})
    assert parse_spec("dense:query_prompt=query: a, b") == ("dense", {"query_prompt": "query: a, b"})
    r = get_retriever("bm25:k1=1.2,b=0.5,stemmer=porter")
    assert (r.k1, r.b, r.stemmer_name) == (1.2, 0.5, "porter")
    with pytest.raises(ConfigError, match="accepted settings: k1, b"):
        get_retriever("bm25:k9=1")
    with pytest.raises(OptionsError, match="retriever bm25: k1 must be a finite number >= 0, got 'high'"):
        get_retriever("bm25:k1=high")
    with pytest.raises(ConfigError, match="not key=value"):
        parse_spec("bm25:k1")


CORPUS = Corpus([
    Document("d1", "apple banana apple"),
    Document("d2", "banana cherry"),
    Document("d3", "cherry cherry cherry date"),
])


def lucene_bm25(tf, dl, avgdl, df, n, k1, b):
    # Lucene >= 8 (and bm25s method="lucene"): idf = ln(1 + (N - df + 0.5) / (df + 0.5)), and the (k1 + 1)
    # numerator factor is dropped (a constant that does not change the ranking).
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_bm25_scores_match_hand_computed_lucene_formula():
    r = BM25(k1=1.2, b=0.75)
    r.index(CORPUS)
    run = r.search(Queries([Query("q", "apple cherry")]), 3)
    avgdl = (3 + 2 + 4) / 3
    expected = {
        "d1": lucene_bm25(2, 3, avgdl, 1, 3, 1.2, 0.75),
        "d2": lucene_bm25(1, 2, avgdl, 2, 3, 1.2, 0.75),
        "d3": lucene_bm25(3, 4, avgdl, 2, 3, 1.2, 0.75),
    }
    got = dict(run["q"])
    assert got.keys() == expected.keys()
    for d in expected:
        assert got[d] == pytest.approx(expected[d], rel=1e-5)
    assert [d for d, _ in run["q"]] == sorted(expected, key=lambda d: -expected[d])


def test_bm25_ties_exclusions_and_k():
    corpus = Corpus([Document(f"d{i}", "same words here") for i in range(6)])
    r = BM25()
    r.index(corpus)
    queries = Queries([Query("q", "words")])
    run = r.search(queries, 4)
    # all six score the same: doc_id descending decides
    assert [d for d, _ in run["q"]] == ["d5", "d4", "d3", "d2"]
    run = r.search(queries, 4, exclude={"q": frozenset({"d5", "d3"})})
    assert [d for d, _ in run["q"]] == ["d4", "d2", "d1", "d0"]


def test_bm25_lucene_stems_and_drops_zero_scores():
    corpus = Corpus([Document("a", "running runners run", "Sports"), Document("b", "quiet library books")])
    r = BM25Lucene()
    r.index(corpus)
    run = r.search(Queries([Query("q", "the runs")]), 10)
    assert [d for d, _ in run["q"]] == ["a"]  # "runs" stems to "run"; "the" is a stopword; b has no match


def test_user_retriever_without_exclude_still_gets_k_results():
    class Plain:
        name = "plain"

        def index(self, corpus):
            self.ids = list(corpus)

        def search(self, queries, k):
            return {q: {d: float(-i) for i, d in enumerate(self.ids[:k])} for q in queries}

    corpus = Corpus([Document(f"d{i}", "x") for i in range(10)])
    p = Plain()
    p.index(corpus)
    run = search_with(p, Queries([Query("q", "x")]), 3, {"q": frozenset({"d0", "d1"})})
    assert [d for d, _ in run["q"]] == ["d2", "d3", "d4"]


# ---------------------------------------------------------------- option checks


@pytest.mark.parametrize(
    "spec, message",
    [
        ("bm25:k1=nan", "retriever bm25: k1 must be a finite number >= 0, got 'nan'."),
        ("bm25:k1=inf", "retriever bm25: k1 must be a finite number >= 0, got 'inf'."),
        ("bm25:k1=-inf", "retriever bm25: k1 must be a finite number >= 0, got '-inf'."),
        ("bm25:k1=1e999", "retriever bm25: k1 must be a finite number >= 0, got '1e999'."),
        ("bm25:k1=-1", "retriever bm25: k1 must be greater than or equal to 0, got '-1'."),
        ("bm25:k1=", "retriever bm25: k1 must be a finite number >= 0, got ''."),
        ("bm25:k1=1_0", "retriever bm25: k1 must be a finite number >= 0, got '1_0'."),
        ("bm25:b=2", "retriever bm25: b must be less than or equal to 1, got '2'."),
        ("bm25:b=-0.1", "retriever bm25: b must be greater than or equal to 0, got '-0.1'."),
        ("bm25-lucene:b=1.5", "retriever bm25-lucene: b must be less than or equal to 1, got '1.5'."),
        ("bm25-qs:k1=nan", "retriever bm25-qs: k1 must be a finite number >= 0, got 'nan'."),
        ("bm25:method=okapi",
         "retriever bm25: method must be 'lucene', 'robertson', 'atire', 'bm25l' or 'bm25+', got 'okapi'."),
        ("bm25:use_title=maybe", "retriever bm25: use_title must be true or false, got 'maybe'."),
        ("bm25:keep_zero=2", "retriever bm25: keep_zero must be true or false, got '2'."),
        ("bm25-qs:variant=lucene", "retriever bm25-qs: variant must be 'bright' or 'anserini', got 'lucene'."),
        ("bm25:k1=1,k1=2", "option 'k1' is given twice in 'bm25:k1=1,k1=2'; give each option once."),
        ("bm25:kl=1", "retriever bm25: kl is not a setting (did you mean 'k1'?); accepted settings: k1, b, method, "
                      "stopwords, stemmer, use_title, keep_zero."),
        ("dense:batch_size=abc", "retriever dense: batch_size must be a whole number from 1 to 1,000,000, got 'abc'."),
        ("dense:batch_size=1.5", "retriever dense: batch_size must be a whole number from 1 to 1,000,000, got '1.5'."),
        ("dense:batch_size=0", "retriever dense: batch_size must be greater than or equal to 1, got '0'."),
        ("dense:batch_size=3_2", "retriever dense: batch_size must be a whole number from 1 to 1,000,000, got '3_2'."),
        ("dense:chunk_size=-1", "retriever dense: chunk_size must be greater than or equal to 1, got '-1'."),
        ("dense:device=quantum", "retriever dense: device must be cpu, cuda, cuda:N, mps or xpu, got 'quantum'."),
        ("dense:device=cuda:x", "retriever dense: device must be cpu, cuda, cuda:N, mps or xpu, got 'cuda:x'."),
        ("dense:cache=perhaps", "retriever dense: cache must be true or false, got 'perhaps'."),
    ],
)
def test_bad_option_values_name_option_owner_and_accepted_values(spec, message):
    with pytest.raises(ConfigError) as err:
        get_retriever(spec)
    assert str(err.value) == message


def test_options_are_checked_on_python_calls_too():
    from gapbench.adapters.bm25_qs import BM25QS
    from gapbench.adapters.dense import Dense

    with pytest.raises(OptionsError, match=r"^retriever bm25: k1 must be a finite number, got nan\.$"):
        BM25(k1=float("nan"))
    with pytest.raises(OptionsError, match=r"^retriever bm25-lucene: k1 must be a valid number, got '1'\.$"):
        BM25Lucene(k1="1")  # a string from Python is not coerced: the type is part of the contract
    with pytest.raises(OptionsError, match=r"^retriever bm25-qs: b must be a valid number, got True\.$"):
        BM25QS(b=True)
    with pytest.raises(OptionsError, match=r"^retriever dense: batch_size must be a valid integer, got 2\.5\.$"):
        Dense(batch_size=2.5)
    # accepted values keep their types; "none" and an empty value both switch stopwords and stemming off
    r = get_retriever("bm25:k1=2,b=0,stopwords=none,stemmer=")
    assert (r.k1, r.b, r.stopwords, r.stemmer_name) == (2.0, 0.0, None, None)
    assert BM25(k1=0, b=1).config()["k1"] == 0.0
    d = get_retriever("dense:batch_size=+8,max_length=none,device=cuda:1")  # no model is loaded by a spec
    assert (d.batch_size, d.max_length, d.device, d.model_loads) == (8, None, "cuda:1", 0)


def test_dense_device_missing_on_this_machine_fails_before_the_model_loads():
    import torch

    from gapbench.adapters.dense import Dense
    from gapbench.errors import GapbenchError

    d = Dense(device=f"cuda:{torch.cuda.device_count()}", cache=False)  # one past the last GPU, or cuda:0 on CPU
    with pytest.raises(GapbenchError, match=r"^dense: device 'cuda:\d+' is not available on this machine"):
        d.embed(["text"])
    assert d.model_loads == 0


@pytest.mark.parametrize(
    "spec, message",
    [
        ("", "empty retriever name; for example bm25 or dense:model=NAME."),
        ("  ", "empty retriever name; for example bm25 or dense:model=NAME."),
        (":k1=1", "retriever spec ':k1=1' has no name before ':'; write NAME or NAME:key=value,key=value."),
        ("bm25\nrow", "retriever spec 'bm25\\nrow' contains the control character '\\n' at position 4; write it on "
                      "one line without tabs or control characters."),
        ("dense:query_prompt=a\tb", "retriever spec 'dense:query_prompt=a\\tb' contains the control character "
                                    "'\\t' at position 20; write it on one line without tabs or control characters."),
        (None, "retriever spec 'bm25:stemmer=xxxxxxxxxxxxxxxxxxxxxxxxxxx'... is 5013 characters long; at most 4096 "
               "are accepted."),
    ],
)
def test_malformed_retriever_specs(spec, message):
    if spec is None:
        spec = "bm25:stemmer=" + "x" * 5000
    with pytest.raises(ConfigError) as err:
        get_retriever(spec)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "name, parts",
    [
        ("BM25", ["unknown retriever 'BM25'.", "Names are case-sensitive: the registered name is 'bm25'."]),
        ("ｂｍ２５", ["'ｂ' (U+FF42), 'ｍ' (U+FF4D), '２' (U+FF12)", "type 'bm25' in plain ASCII."]),
        ("bм25", ["Did you mean 'bm25'", "('м' (U+043C)); type it in plain ASCII."]),
        ("bm25\u200b", ["'\\u200b' (U+200B)"]),
        ("../bm25", ["unknown retriever '../bm25'."]),
    ],
)
def test_look_alike_names_are_explained(name, parts):
    with pytest.raises(UnknownNameError) as err:
        get_retriever(name)
    for part in parts:
        assert part in str(err.value)


def test_task_names_and_options(tmp_path, monkeypatch):
    # a folder of its own, so that ".." holds only it: the nearest-folder hint reads the parent's folders, and
    # pytest's temporary root holds other tests' folders, which differ from run to run (it failed under -n 2)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    tmp_path = tmp_path / "cwd"
    (tmp_path / "notes.txt").write_text("x")
    cases = {
        "": "empty task name; name a task (list them with `gapbench tasks`) or a BEIR folder.",
        "notes.txt": "task 'notes.txt' is a file, not a task: give a registered task name (see `gapbench tasks`) or a "
                     "BEIR folder holding corpus.jsonl, queries.jsonl and qrels/.",
        "../nowhere": "no such folder '../nowhere' (nor a registered task). The nearest existing folder is ..; none "
                      "of its folders is named like 'nowhere'.",
        "a\x00b": "task name 'a\\x00b' contains the control character '\\x00' at position 1; write it on one line "
                  "without tabs or control characters.",
        "bright/biology:instructions=maybe": "task 'bright/biology': instructions must be true or false, got "
                                             "'maybe'.",
        "beir/arguana:ignore_identical_ids=2": "task 'beir/arguana': ignore_identical_ids must be true or false, "
                                               "got '2'.",
        "impliret/multispeaker/wknow:sourse=hub": "task 'impliret/multispeaker/wknow': sourse is not a setting (did "
                                                  "you mean 'source'?); accepted settings: source, revision.",
        "impliret:source=hub": "suite 'impliret' takes no options (got source); options belong to single tasks, for "
                               "example impliret/multispeaker/arithmetic:OPTION=VALUE.",
        "impliret": "'impliret' is a suite of 6 tasks, not a single task; run it with `gapbench run impliret -r "
                    "RETRIEVER`, or name one of its tasks, for example 'impliret/multispeaker/arithmetic'.",
    }
    for name, message in cases.items():
        with pytest.raises(ConfigError) as err:
            get_task(name)
        assert str(err.value) == message, name
    with pytest.raises(UnknownNameError, match="Did you mean 'impliret/multispeaker/wknow'"):
        get_task("Impliret/multispeaker/wknow")
    with pytest.raises(ConfigError, match="is a file, not a task"):
        get_task(tmp_path / "notes.txt")  # a path object is read as the path it names
    # a registered name wins over a file of the same name in the working directory
    (tmp_path / "impliret").mkdir()
    (tmp_path / "impliret" / "multispeaker").mkdir()
    (tmp_path / "impliret" / "multispeaker" / "wknow").write_text("x")
    assert get_task("impliret/multispeaker/wknow").name == "impliret/multispeaker/wknow"


# ---------------------------------------------------------------- queries and corpora without terms


def test_query_without_terms_gets_an_empty_ranking_and_is_counted():
    r = BM25(k1=1.2, b=0.75)
    r.index(CORPUS)
    queries = Queries([Query("stop", "the of and"), Query("q", "apple cherry"), Query("oov", "zebra"),
                       Query("punct", "?!")])
    run = r.search(queries, 3)
    assert run["stop"] == () and run["punct"] == ()
    assert r.empty_queries == ("stop", "punct")
    # a query with terms that match nothing scores 0 everywhere; keep_zero ranks those documents by the tie rule
    assert run["oov"] == (("d3", 0.0), ("d2", 0.0), ("d1", 0.0))
    avgdl = (3 + 2 + 4) / 3  # the other query is scored exactly as before
    assert dict(run["q"])["d1"] == pytest.approx(lucene_bm25(2, 3, avgdl, 1, 3, 1.2, 0.75), rel=1e-5)
    assert len(run["q"]) == 3
    lucene = BM25Lucene()
    lucene.index(CORPUS)
    assert dict(lucene.search(queries, 3).items())["oov"] == ()  # keep_zero off: nothing matched, nothing ranked
    assert lucene.empty_queries == ("stop", "punct")


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("bm25", [("d1", 0.0), ("d0", 0.0)]),
        ("bm25-lucene", []),
        ("bm25-qs", [("d1", 0.0), ("d0", 0.0)]),
        ("rrf:bm25+bm25-qs", [("d1", 2 / 61), ("d0", 2 / 62)]),
        ("fuse-dbsf:bm25+bm25-lucene", [("d1", 0.5), ("d0", 0.5)]),  # equal scores normalise to 0.5; absent: 0
    ],
)
@pytest.mark.parametrize("texts", [["", "  "], ["the and of", "!!! ... ?"]], ids=["empty", "stopwords"])
def test_corpus_without_any_term_indexes_and_scores_zero(spec, expected, texts):
    # bm25s cannot index such a corpus; gapbench indexes it, every document scores 0 for every query, and each
    # adapter's keep_zero rule decides whether zero-score documents are ranked (bm25-lucene: no, as in Lucene)
    r = get_retriever(spec)
    r.index(Corpus([Document(f"d{i}", t) for i, t in enumerate(texts)]))
    run = r.search(Queries([Query("q1", "apple pie"), Query("q2", "the")]), 5)
    assert [d for d, _ in run["q1"]] == [d for d, _ in expected]
    assert [s for _, s in run["q1"]] == pytest.approx([s for _, s in expected])
    assert run["q2"] == ()  # no term to search for
    if not spec.startswith(("rrf", "fuse")):
        assert r.empty_queries == ("q2",)


def test_corpus_without_terms_evaluates_with_every_query_counted():
    from gapbench.runner import run
    from gapbench.task import Task
    from gapbench.types import Qrels, TaskData

    data = TaskData(Corpus([Document("d1", "the"), Document("d2", "")]),
                    Queries([Query("q1", "apple"), Query("q2", "pie")]), Qrels({"q1": {"d1": 1}, "q2": {"d2": 1}}))
    task = Task("no-terms", lambda: data)
    lucene = run(task, "bm25-lucene", measures=["nDCG@10", "R@100"])
    assert lucene.means == {"nDCG@10": 0.0, "R@100": 0.0}
    assert (lucene.n_queries, lucene.n_missing) == (2, 2)  # empty rankings: reported as judged queries absent
    # bm25 ranks both zero-score documents, d2 before d1 (doc_id descending): q2's gold first, q1's second
    plain = run(task, "bm25", measures=["nDCG@10"])
    assert plain.per_query["nDCG@10"] == pytest.approx({"q1": 1 / math.log2(3), "q2": 1.0})
    assert plain.n_missing == 0


@pytest.mark.model
def test_dense_encodes_empty_texts():
    from gapbench.adapters.dense import Dense

    d = Dense(cache=False)
    d.index(Corpus([Document("d0", ""), Document("d1", "")]))
    run = d.search(Queries([Query("q", "apple")]), 5)
    (first, s1), (second, s2) = run["q"]
    assert (first, second) == ("d1", "d0") and s1 == s2  # identical empty documents tie; doc_id descending
    assert -1.0 <= s1 <= 1.0


def test_bm25_from_a_memory_mapped_corpus_equals_the_dict_corpus(tmp_path, monkeypatch):
    """The index streams from Corpus.iter_texts, exclusions go through Corpus.position and ids through ids_at: a
    memory-mapped (Arrow) corpus gives the runs the dict corpus gives, scores included."""
    import json

    from gapbench.adapters import _lucene_bm25 as lucene
    from gapbench.cache import cache_dir, clear
    from gapbench.corpus_store import load_compact

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    data = get_task("impliret/multispeaker/wknow").load()
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n"
                            for d in data.corpus.values()), encoding="utf-8")
    mapped = load_compact(path, root=tmp_path / "corpora")
    assert mapped.fingerprint == data.corpus.fingerprint
    queries = Queries(list(data.queries.values())[:200])
    exclude = {q: frozenset({d, "not-a-doc"}) for q, d in zip(queries, data.corpus)}
    # bm25s keeps its index under the cache kind 'bm25' (finished when gapbench.index.json is written); bm25-lucene
    # keeps its own under 'bm25-lucene' (finished when _lucene_bm25.DONE is written).
    index_of = {"bm25": ("bm25", "gapbench.index.json"), "bm25-lucene": ("bm25-lucene", lucene.DONE)}
    for spec in ("bm25", "bm25-lucene", "bm25:method=bm25+,use_title=false"):
        kind, done = index_of[spec.split(":")[0]]
        expected = get_retriever(spec)
        expected.index(data.corpus)
        want = expected.search(queries, 10, exclude).to_dict()
        clear(kind)  # the mapped corpus builds its own index rather than finding the dict corpus' one
        r = get_retriever(spec)
        r.index(mapped)
        assert r.search(queries, 10, exclude).to_dict() == want
        assert len(list(cache_dir(kind).rglob(done))) == 1  # built again, from the mapped corpus


def test_bm25_rerun_from_the_cache_gives_the_same_run():
    data = get_task(f"beir/scifact:data_dir={FIXTURES_BEIR}").load()
    runs = []
    for _ in range(2):
        r = get_retriever("bm25-lucene")
        r.index(data.corpus)
        runs.append(r.search(data.queries, 10).to_dict())
    assert runs[0] == runs[1] and any(runs[0].values())
