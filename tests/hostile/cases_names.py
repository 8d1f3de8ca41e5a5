"""Task and retriever names, adapter options and measures, given to ``gapbench run`` and ``gapbench evaluate``.

Each bad name or value must be refused before any data is read or any backend runs, with one line that names the
option, the name or the measure and says what is accepted: non-finite, out-of-range and mistyped option values,
unknown or duplicated options, malformed fusion specs, names that are paths, files, suites, empty, or spelled with
look-alike characters, and measures that ir-measures or pytrec_eval would crash on or refuse. Valid specs and
measures next to them must run. Most cases run on a six-document BEIR folder written into the case's folder, so bm25
takes milliseconds; the task-name cases use the registered tasks, refused before anything loads.
"""

from __future__ import annotations

import json

from . import Case

_DOCS = {
    "d1": ("Apple orchards", "Apple trees grow in orchards and give apples in autumn."),
    "d2": ("Banana farming", "Banana plants need warm weather and a lot of water."),
    "d3": ("Cherry blossom", "Cherry trees blossom in spring; the fruit ripens in summer."),
    "d4": ("Date palms", "Date palms grow in deserts near oases and give sweet dates."),
    "d5": ("Elderberry", "Elderberry bushes give dark berries used for syrup."),
    "d6": ("Fig trees", "Fig trees grow in warm dry places and give soft sweet figs."),
}
_QUERIES = {"q1": "which trees give apples", "q2": "plants that need warm weather", "q3": "sweet fruit of the desert"}
_QRELS = {"q1": {"d1": 2, "d3": 1}, "q2": {"d2": 1, "d6": 1}, "q3": {"d4": 2}}


def _beir(docs=_DOCS, queries=_QUERIES, qrels=_QRELS, folder: str = "beir") -> dict[str, str]:
    corpus = "".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, (t, x) in docs.items())
    qs = "".join(json.dumps({"_id": q, "text": x}) + "\n" for q, x in queries.items())
    rels = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, j in qrels.items() for d, g in j.items())
    return {f"{folder}/corpus.jsonl": corpus, f"{folder}/queries.jsonl": qs, f"{folder}/qrels/test.tsv": rels}


BEIR = _beir()
# every text is stopwords or punctuation: no document has an indexable term
STOPWORD_BEIR = _beir({d: ("", "the of and " if i % 2 else "!!! ...") for i, d in enumerate(_DOCS)})
RUN = "".join(f"{q} Q0 {d} {i} {10 - i} sys\n" for q in _QRELS for i, d in enumerate(sorted(_DOCS), 1))
QRELS = "".join(f"{q} 0 {d} {g}\n" for q, j in _QRELS.items() for d, g in j.items())
EVAL_FILES = {"run.txt": RUN, "qrels.txt": QRELS}


def run(case_id: str, spec: str, names=(), *, measures: str | None = "nDCG@10", expect: int = 2,
        files=None, task: str = "{tmp}/beir", process: bool = False) -> Case:
    argv = ["run", task, "-r", spec] + (["-m", measures] if measures is not None else [])
    return Case(case_id, argv, files=BEIR if files is None else files, expect=expect, names=tuple(names), process=process)


def task(case_id: str, name: str, names=()) -> Case:
    return Case(case_id, ["run", name, "-r", "bm25"], names=tuple(names))


def measure(case_id: str, text: str, names=(), *, expect: int = 2, process: bool = False) -> Case:
    argv = ["evaluate", "--qrels", "{tmp}/qrels.txt", "--run", "{tmp}/run.txt", "-m", text]
    return Case(case_id, argv, files=EVAL_FILES, expect=expect, names=tuple(names), process=process)


CASES = [
    # ---- option values of the BM25 family: each names the option, the retriever and what it accepts
    run("bm25-k1-nan", "bm25:k1=nan", ["retriever bm25: k1 must be a finite number >= 0, got 'nan'"]),
    run("bm25-k1-inf", "bm25:k1=inf", ["retriever bm25: k1", "'inf'"]),
    run("bm25-k1-overflow", "bm25:k1=1e999", ["retriever bm25: k1", "'1e999'"]),
    run("bm25-k1-negative", "bm25:k1=-1", ["retriever bm25: k1", "greater than or equal to 0", "'-1'"]),
    run("bm25-b-above-1", "bm25:b=2", ["retriever bm25: b must be less than or equal to 1, got '2'"]),
    run("bm25-b-negative", "bm25:b=-0.1", ["retriever bm25: b", "'-0.1'"]),
    run("bm25-k1-empty", "bm25:k1=", ["retriever bm25: k1", "got ''"]),
    run("bm25-k1-underscore", "bm25:k1=1_0", ["retriever bm25: k1", "'1_0'"]),
    run("bm25-k1-twice", "bm25:k1=1,k1=2", ["'k1' is given twice"]),
    run("bm25-unknown-option", "bm25:kl=1", ["retriever bm25: kl is not a setting", "did you mean 'k1'?"]),
    run("bm25-batch-size", "bm25:batch_size=abc",
        ["retriever bm25: batch_size is not a setting", "accepted settings: k1, b"]),
    run("bm25-option-not-pair", "bm25:k1", ["option 'k1'", "is not key=value"]),
    run("bm25-method", "bm25:method=okapi", ["retriever bm25: method must be 'lucene', 'robertson'", "'okapi'"]),
    run("bm25-stopwords", "bm25:stopwords=klingon", ["retriever bm25: stopwords must be 'en', 'english'", "'klingon'"]),
    run("bm25-stemmer", "bm25:stemmer=klingon",
        ["retriever bm25: stemmer must be none or one of PyStemmer's", "porter", "'klingon'"]),
    run("lucene-keep-zero", "bm25-lucene:keep_zero=maybe", ["retriever bm25-lucene: keep_zero must be true or false"]),
    run("qs-variant", "bm25-qs:variant=pyserini", ["retriever bm25-qs: variant must be 'bright' or 'anserini'"]),
    # ---- dense: refused at the spec, before any model loads
    run("dense-batch-text", "dense:batch_size=abc",
        ["retriever dense: batch_size must be a whole number from 1 to 1,000,000, got 'abc'"]),
    run("dense-batch-fraction", "dense:batch_size=1.5", ["retriever dense: batch_size", "'1.5'"]),
    run("dense-batch-zero", "dense:batch_size=0", ["retriever dense: batch_size", "'0'"]),
    run("dense-device", "dense:device=quantum", ["retriever dense: device must be cpu, cuda", "'quantum'"]),
    run("dense-max-length", "dense:max_length=-5", ["retriever dense: max_length", "'-5'"]),
    run("dense-batch-huge", "dense:batch_size=99999999", ["retriever dense: batch_size must be at most 1,000,000"]),
    # ---- a seed is refused in the same words by a retriever and by every verb (gapbench run --seed -1)
    run("colbert-seed-negative", "colbert:seed=-1",
        ["retriever colbert: seed must be greater than or equal to 0, got '-1'"]),
    # ---- fusion specs
    run("rrf-no-members", "rrf:", ["rrf needs the retrievers to fuse"]),
    run("rrf-stray-plus", "rrf:bm25+", ["retriever number 2", "is empty"]),
    run("rrf-one-member", "rrf:bm25", ["fuses at least two retrievers, got 1"]),
    run("rrf-k-nan", "rrf:[k=nan]bm25+bm25", ["retriever rrf: k must be a finite number >= 0", "'nan'"]),
    run("rrf-nested-bracket", "rrf:[k=[1]]bm25+bm25", ["holds another bracket"]),
    run("rrf-unclosed-bracket", "rrf:[k=60bm25+bm25", ["option bracket", "is not closed"]),
    run("rrf-unbalanced-paren", "rrf:bm25+bm25)", ["unbalanced ')'"]),
    run("rrf-unknown-option", "rrf:[dpth=10]bm25+bm25",
        ["retriever rrf: dpth is not a setting", "did you mean 'depth'?"]),
    run("rrf-weight-inf", "rrf:[weights=1;inf]bm25+bm25", ["retriever rrf: weights must be finite numbers", "'1;inf'"]),
    run("rrf-depth-exponent", "rrf:[depth=1e3]bm25+bm25",
        ["retriever rrf: depth must be a whole number from 1 to 100,000, got '1e3'"]),
    run("rrf-member-option", "rrf:bm25+bm25:k1=nan", ["retriever bm25: k1", "'nan'"]),
    # ---- retriever names
    run("retriever-empty", "", ["empty retriever name"]),
    run("retriever-case", "BM25", ["unknown retriever 'BM25'", "the registered name is 'bm25'"]),
    run("retriever-fullwidth", "ｂｍ２５", ["unknown retriever", "U+FF42", "type 'bm25' in plain ASCII"]),
    run("retriever-cyrillic", "bм25", ["unknown retriever", "U+043C", "Did you mean 'bm25'"]),
    run("retriever-path", "../bm25", ["unknown retriever '../bm25'"]),
    run("retriever-newline", "bm25\nfake-row 1", ["control character '\\n'"]),
    run("retriever-no-name", ":k1=1", ["has no name before ':'"]),
    run("retriever-too-long", "bm25:stemmer=" + "x" * 5000, ["5013 characters long; at most 4096"]),
    # ---- task names: refused before any data is read or fetched
    task("task-empty", "", ["empty task name"]),
    task("task-parent-path", "../nowhere", ["no such folder '../nowhere' (nor a registered task)"]),
    Case("task-is-a-file", ["run", "{tmp}/notes.txt", "-r", "bm25"], files={"notes.txt": "not a task\n"},
         names=("{tmp}/notes.txt", "is a file")),
    task("task-tab", "impliret/multispeaker/wknow\t", ["control character '\\t'"]),
    task("task-null-byte", "impliret\x00/multispeaker", ["control character '\\x00'"]),
    task("task-name-too-long", "a/" * 3000, ["6000 characters long"]),
    measure("measure-too-long", "P(rel=" + "9" * 300 + ")@5", ["at most 200 characters"]),
    task("task-bool-option", "bright/biology:instructions=maybe",
         ["task 'bright/biology': instructions must be true or false, got 'maybe'"]),
    task("task-beir-bool", "beir/arguana:ignore_identical_ids=2", ["task 'beir/arguana': ignore_identical_ids must be true or false", "'2'"]),
    task("task-unknown-option", "impliret/multispeaker/wknow:sourse=hub", ["sourse is not a setting", "did you mean 'source'?"]),
    task("task-option-not-pair", "bright/biology:instructions", ["'instructions'", "is not key=value"]),
    task("task-misspelt", "impliret/multispeaker/wknwo", ["unknown task", "Did you mean 'impliret/multispeaker/wknow'"]),
    task("suite-with-options", "impliret:source=hub", ["suite 'impliret' takes no options"]),
    Case("suite-as-evaluate-task", ["evaluate", "--task", "impliret", "--run", "{tmp}/run.txt"], files=EVAL_FILES,
         names=("'impliret' is a suite of 6 tasks",)),
    # ---- measures: all refused before pytrec_eval or ir-measures sees them; nDCG@0 used to abort the interpreter
    measure("ndcg-at-0", "nDCG@0", ["measure 'nDCG@0'", "from 1 to 1,000,000,000", "accepted forms"], process=True),
    measure("ndcg-at-negative", "nDCG@-1", ["measure 'nDCG@-1'", "got '-1'"]),
    measure("p-at-fraction", "P@1.5", ["measure 'P@1.5'", "whole number"]),
    measure("r-at-word", "R@abc", ["measure 'R@abc'"]),
    measure("two-cutoffs", "nDCG@10@5", ["more than one '@'"]),
    measure("ap-rel-0", "AP(rel=0)", ["rel of AP must be a whole number >= 1, got '0'"]),
    measure("judged-at-0", "Judged@0", ["measure 'Judged@0'"]),
    measure("huge-cutoff", "nDCG@99999999999999999999", ["from 1 to 1,000,000,000"]),
    measure("unknown-parameter", "nDCG(foo=1)@10", ["nDCG has no parameter 'foo'", "dcg, gains, judged_only"]),
    measure("external-evaluator", "ERR@10", ["ERR@10 is computed only by gdeval"]),
    measure("missing-evaluator", "alpha_nDCG@10", ["needs an evaluator that is not installed", "pyndeval"]),
    measure("required-parameter", "SDCG@10", ["SDCG needs the parameter max_rel"]),
    measure("unsupported-parameter", "NumRel(rel=2)", ["no installed evaluator computes NumRel(rel=2)"]),
    measure("misspelt-name", "nDGC@10", ["unknown measure 'nDGC@10'", "Did you mean 'nDCG'"]),  # ndcg@10 is nDCG@10
    measure("python-expression", "__import__('os').system('true')", ["measure"]),
    measure("no-cutoff-allowed", "Bpref@5", ["Bpref takes no cut-off"]),
    measure("empty-list", "", ["no measures given"]),
    measure("listed-twice", "nDCG@10,NDCG@10", ["listed twice"]),
    # ---- valid inputs next to them
    run("valid-bm25-options", "bm25:k1=1.2,b=0.75", expect=0, measures="nDCG@10,R@100,AP"),
    run("valid-rrf", "rrf:bm25+bm25-lucene", expect=0),
    run("valid-rrf-options", "rrf:[k=20,depth=50,weights=1;2]bm25+(fuse-minmax:bm25-lucene+bm25-qs)", expect=0),
    run("valid-default-measures", "bm25-qs:variant=anserini", expect=0, measures=None),
    run("valid-stopword-corpus", "bm25", expect=0, files=STOPWORD_BEIR),
    measure("valid-parameters", "P(rel=2)@5,IPrec@0.5,nDCG(judged_only=true)@10,R@100", expect=0),
]
