"""The one spec grammar (gapbench.specs) and its four readers: retriever/reranker/task specs, lists of retrievers,
fusion's option bracket and components, and measure lists. Every value below is written out by hand from the grammar in
the module's docstring."""

import doctest
import shutil
from pathlib import Path

import pytest

import gapbench.specs as specs
from gapbench.adapters.fusion import option_bracket
from gapbench.cli.common import split_specs
from gapbench.errors import ConfigError, DataFormatError
from gapbench.evaluation.evaluation import parse_measures, split_measures
from gapbench.retrieval import get_retriever, with_task_defaults
from gapbench.specs import closing_bracket, parse_spec, quote, split_list, split_options, split_pieces, unquote
from gapbench.task import get_task

SCIFACT = Path(__file__).parent / "fixtures" / "beir" / "scifact"


def test_the_module_examples_hold():
    assert doctest.testmod(specs).failed == 0


def test_a_path_holding_comma_key_equals_is_one_value_when_quoted():
    # the misparse of issue 25: unquoted, ",x=" starts a second option (kept: specs written before the quotes mean it)
    assert parse_spec("dense:model=/data/a,x=1/model") == ("dense", {"model": "/data/a", "x": "1/model"})
    assert parse_spec('dense:model="/data/a,x=1/model"') == ("dense", {"model": "/data/a,x=1/model"})
    assert parse_spec("dense:model='/data/a,x=1/model',batch_size=8") == (
        "dense", {"model": "/data/a,x=1/model", "batch_size": "8"})


def test_specs_accepted_before_the_quotes_read_as_before():
    assert parse_spec("bm25") == ("bm25", {})
    assert parse_spec(" bm25 : k1 = 0.9 , b=0.4 ") == ("bm25", {"k1": "0.9", "b": "0.4"})
    assert parse_spec("dense:query_prompt=query: a, b") == ("dense", {"query_prompt": "query: a, b"})
    # an apostrophe inside a value is text: a quote opens only at the start of a value
    assert parse_spec("dense:query_prompt=what's this, then") == ("dense", {"query_prompt": "what's this, then"})
    assert parse_spec("bright/biology:instructions=true") == ("bright/biology", {"instructions": "true"})
    assert parse_spec("x:url=http://[::1]:8000/v1") == ("x", {"url": "http://[::1]:8000/v1"})


def test_quoted_values_keep_spaces_and_resolve_only_their_own_escapes():
    assert parse_spec('dense:query_prompt="query: "') == ("dense", {"query_prompt": "query: "})
    assert parse_spec(r'x:p="say \"hi\"",q=1') == ("x", {"p": 'say "hi"', "q": "1"})
    assert parse_spec(r'x:path="C:\data\x\\"') == ("x", {"path": "C:\\data\\x\\"})
    assert split_options("a='',b=2") == [("a", ""), ("b", "2")]


@pytest.mark.parametrize(("spec", "message"), [
    ('dense:model="/data/a,x=1', """'dense:model="/data/a,x=1' opens a quote (") that is never closed; close it"""),
    ('dense:model="a"b', """the quoted value '"a"b' in 'dense:model="a"b' has text after its closing quote"""),
    ('dense:model="a",junk', "option 'junk' in 'dense:model=\"a\",junk' is not key=value"),
    ("bm25:k1", "option 'k1' in 'bm25:k1' is not key=value; write bm25:key=value,key=value."),
    ("bm25:k1=1,k1=2", "option 'k1' is given twice in 'bm25:k1=1,k1=2'; give each option once."),
    (":k1=1", "retriever spec ':k1=1' has no name before ':'"),
    ("bm25\n", "contains the control character '\\n' at position 4"),
])
def test_bad_specs_name_what_and_how_to_fix(spec, message):
    with pytest.raises(ConfigError) as info:
        parse_spec(spec)
    assert message in str(info.value)


def test_quote_writes_what_the_reader_reads_back():
    for value in ["bm25", "6", "a,b=c", 'say "hi"', "C:\\data\\", " lead", "'x'", ""]:
        assert parse_spec(f"x:v={quote(value)}") == ("x", {"v": value})
    assert quote(6) == "6" and quote("a,b=c") == '"a,b=c"'
    assert unquote('"a\\"b"') == 'a"b' and unquote("plain") == "plain"


def test_task_option_holding_a_path_with_comma_key_equals(tmp_path):
    root = tmp_path / "runs,split=train"
    shutil.copytree(SCIFACT, root / "scifact")
    quoted = get_task(f'beir/scifact:data_dir="{root}"').load()
    # the fixture's test split: 6 documents, queries 1, 3, 5 and 13 (tests/test_beir.py pins the same counts)
    assert len(quoted.corpus) == 6 and quoted.queries.ids() == ["1", "3", "5", "13"]
    # unquoted: data_dir=<tmp>/runs (no such folder) and split=train
    with pytest.raises(DataFormatError, match=f"{tmp_path / 'runs'}: data_dir for beir/scifact is not a directory"):
        get_task(f"beir/scifact:data_dir={root}").load()


def test_retriever_specs_and_task_defaults_take_quoted_values():
    r = get_retriever('bm25:stemmer="porter",k1=1.2')
    assert (r.stemmer_name, r.k1) == ("porter", 1.2)
    spec, applied = with_task_defaults('tournament:model="a,b=c"', {"tournament": {"promote": 2, "model": "m"}})
    assert (spec, applied) == ('tournament:promote=2,model="a,b=c"', {"promote": 2})
    spec, _ = with_task_defaults("tournament", {"tournament": {"model": "a,b=c"}})
    assert parse_spec(spec, "reranker") == ("tournament", {"model": "a,b=c"})


def test_retriever_lists_split_at_a_new_name_outside_quotes():
    assert split_specs("bm25,dense:model=x,batch_size=8") == ["bm25", "dense:model=x,batch_size=8"]
    # unquoted, the registered name after the comma starts a new retriever; quoted it is part of the path
    assert split_specs("bm25,dense:model=/m/a,bm25,batch_size=8") == [
        "bm25", "dense:model=/m/a", "bm25,batch_size=8"]
    assert split_specs('bm25,dense:model="/m/a,bm25",batch_size=8') == [
        "bm25", 'dense:model="/m/a,bm25",batch_size=8']


def test_fusion_components_and_option_bracket():
    assert split_pieces("a:x=1+(b+c)+[d+e]f", "+", brackets="[]()", strict=True) == ["a:x=1", "(b+c)", "[d+e]f"]
    assert split_pieces('bm25+x:p="1+1"', "+", brackets="[]()", strict=True) == ["bm25", 'x:p="1+1"']
    assert split_pieces("a++b", "+") == ["a", "", "b"]
    assert option_bracket("agent", '[llm_model="m],x=1",hops=2]bm25', ["llm_model", "hops"], usage="u") == (
        {"llm_model": "m],x=1", "hops": "2"}, "bm25")
    assert option_bracket("rrf", "[k=60,depth=10]bm25+dense", ["k", "depth"], usage="u", example="k=60") == (
        {"k": "60", "depth": "10"}, "bm25+dense")
    assert closing_bracket("[a(b)]c") == 5 and closing_bracket("[a") == -1
    with pytest.raises(ConfigError, match=r"unbalanced '\)' at position 4 of 'bm25\)\+dense'"):
        split_pieces("bm25)+dense", "+", brackets="[]()", strict=True)
    with pytest.raises(ConfigError, match="unclosed bracket or parenthesis in 'bm25\\+\\(dense'"):
        split_pieces("bm25+(dense", "+", brackets="[]()", strict=True)
    fused = get_retriever('rrf:[k=10]bm25:stemmer="porter"+bm25-lucene')
    assert [r.stemmer_name for r in fused.retrievers[:1]] == ["porter"]


def test_measure_lists_split_at_commas_and_spaces_outside_brackets():
    assert split_measures("nDCG@10, P(rel=2)@5 AP,,SetF(rel=2, beta=0.5)") == [
        "nDCG@10", "P(rel=2)@5", "AP", "SetF(rel=2, beta=0.5)"]
    assert split_list("a\tb\nc", ", \t\n") == ["a", "b", "c"]
    assert [str(m) for m in parse_measures("nDCG@10 R@100")] == ["nDCG@10", "R@100"]
