"""The BRIGHT and RAR-b loaders on real published rows (tests/fixtures/*_real, see each PROVENANCE.md).

BRIGHT: the `examples` rows of biology, leetcode and pony as Anserini ships them, fingerprinted ir_datasets-style and
pinned against ir_datasets' own fingerprints of the hub data (counts, records 0, 9 and last); BRIGHT's documents are
not reachable, so the loader is given a documents file of the real ids with empty text and no retrieval is run.
RAR-b: ARC-Challenge in the full-retrieval layout with the authors' qrels and instruction, corpus and queries rebuilt
from their MCR file; the rebuilding rule is checked against every judgement of ARC-Challenge and of the authors' qrels
of four more tasks, and BM25 on ARC-Challenge is scored by gapbench, by raw pytrec_eval and by hand. OBLIQ-Bench has no public rows (tests/fixtures/obliq_real/PROVENANCE.md says where they were
looked for).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

import gapbench.tasks.bright as bright
import gapbench.tasks.rarb as rarb
from gapbench.adapters.bm25 import BM25
from gapbench.evaluation.evaluation import evaluate
from gapbench.runner import run
from gapbench.task import get_task

FIXTURES = Path(__file__).parent / "fixtures"
BRIGHT_REAL = FIXTURES / "bright_real"
RARB_REAL = FIXTURES / "rarb_real"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------------- BRIGHT

BRIGHT_FILES = {  # sha256 in PROVENANCE.md: the files are Anserini's, byte for byte
    "biology": "c4c262e8b6ff0ba54d64d08858894889c7cd1af8383db6376a0934bc7a1704e6",
    "leetcode": "5fd3cfd7bcd8730bde6557a5e74b1a38d856a7508ffd854986cde5f9e361ce76",
    "pony": "710b30332c194bb58815ac5a65c154ea50e6da8ecc7c8089efc97eb2a9d2afba",
}


def _examples(domain: str) -> list[dict]:
    with gzip.open(BRIGHT_REAL / "examples" / f"{domain}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def bright_dir(tmp_path_factory) -> Path:
    """The real examples plus, per domain, a documents file of every judged or excluded id with empty text (BRIGHT's
    documents are not reachable; the loader needs the config to exist)."""
    root = tmp_path_factory.mktemp("bright_real")
    (root / "examples").mkdir()
    (root / "documents").mkdir()
    for domain in BRIGHT_FILES:
        (root / "examples" / f"{domain}.jsonl.gz").write_bytes((BRIGHT_REAL / "examples" / f"{domain}.jsonl.gz")
                                                                .read_bytes())
        ids = dict.fromkeys(d for row in _examples(domain) for d in row["gold_ids"] + row["excluded_ids"] if d != "N/A")
        lines = "".join(json.dumps({"id": d, "content": ""}) + "\n" for d in ids)
        (root / "documents" / f"{domain}.jsonl").write_text(lines, encoding="utf-8")
    return root


@pytest.mark.parametrize("domain", sorted(BRIGHT_FILES))
def test_bright_real_files_are_the_published_ones(domain):
    assert _sha256(BRIGHT_REAL / "examples" / f"{domain}.jsonl.gz") == BRIGHT_FILES[domain]


# (queries, first id, last id, gold judgements, excluded ids, queries with exclusions): the counts of queries are
# the dataset card's (bright.N_QUERIES); ir_datasets counts 372, 2,219 and 33,747 qrels (leetcode's excluded ids
# written as -100 judgements: 262 + 33,485)
BRIGHT_FINGERPRINTS = {
    "biology": (103, "0", "102", 372, 0, 0),
    "leetcode": (142, "0", "141", 262, 33485, 142),
    "pony": (112, "0", "111", 2219, 0, 0),
}


@pytest.mark.parametrize("domain", sorted(BRIGHT_FINGERPRINTS))
def test_bright_loader_fingerprint_on_real_examples(bright_dir, domain):
    n_queries, first, last, n_gold, n_excluded, n_masked = BRIGHT_FINGERPRINTS[domain]
    data = get_task(f"bright/{domain}:data_dir={bright_dir}").load()
    qids = data.queries.ids()
    assert len(qids) == n_queries == bright.N_QUERIES[domain]
    assert (qids[0], qids[-1]) == (first, last)
    assert sum(len(j) for j in data.qrels.values()) == n_gold
    assert set(data.qrels) == set(qids) and all(g == 1 for j in data.qrels.values() for g in j.values())
    assert sum(len(ex) for ex in data.excluded.values()) == n_excluded and len(data.excluded) == n_masked
    # the sentinel never becomes an id, and no excluded id is gold (the loader raises if one is)
    assert all("N/A" not in ex and not ex & set(data.qrels[q]) for q, ex in data.excluded.items())


def test_bright_real_rows_match_ir_datasets_fingerprints(bright_dir):
    """Records 0, 9 and last of queries and qrels as ir_datasets pins them (test/integration/bright.py)."""
    bio = get_task(f"bright/biology:data_dir={bright_dir}").load()
    pairs = [(q, d) for q, judged in bio.qrels.items() for d in judged]
    assert pairs[0] == ("0", "insects_attracted_to_light/Proximate_and_ultimate_causation_0.txt")
    assert pairs[9] == ("1", "breathe_out_of_one_nostril/Nasal_cycle_2.txt")
    assert pairs[371] == ("102", "yeast_dissolve_in_sugar/Osmosis_0.txt")
    assert bio.queries["0"].text.startswith("Claim in article about why insects are attracted to light\nIn this art")
    assert bio.queries["9"].text.startswith('Are humans more adapted to "light mode" or "dark mode"?\n')
    assert bio.queries["102"].text.startswith("How does yeast dissolve in sugar?\nThere's this fascinating")
    assert bio.queries["102"].text.endswith("releasing enough water to dissolve the sugar?")

    leet = get_task(f"bright/leetcode:data_dir={bright_dir}").load()
    assert next(iter(leet.qrels["0"])) == "leetcode/leetcode_11.txt"
    assert "leetcode/leetcode_496.txt" in leet.excluded["0"]  # ir_datasets' qrel 9: ('0', ..., -100)
    assert "leetcode/leetcode_436.txt" in leet.excluded["141"]  # its last qrel: ('141', ..., -100)
    assert leet.queries["9"].text.startswith("Given an array of integers `citations` where `citations[i]` is")

    pony = get_task(f"bright/pony:data_dir={bright_dir}").load()
    pony_pairs = [(q, d) for q, judged in pony.qrels.items() for d in judged]
    assert pony_pairs[0] == ("0", "Pony/4_control-structures_13.txt")
    assert pony_pairs[9] == ("0", "Pony/4_control-structures_2.txt")
    assert pony_pairs[2218] == ("111", "Pony/1_variables_1.txt")
    assert pony.queries["0"].text == (
        "I will use the programming language pony.\nProblem:\nPlease write a program that determines whether a "
        "non-negative number is prime or not. Use lowercase to output to boolean.\n\nHere is the code template:\n"
        "fun isPrime(num: USize): bool =>\n..."
    )


def test_bright_real_long_setting_reads_gold_ids_long(bright_dir):
    (bright_dir / "long_documents").mkdir(exist_ok=True)
    ids = dict.fromkeys(d for row in _examples("pony") for d in row["gold_ids_long"])
    (bright_dir / "long_documents" / "pony.jsonl").write_text(
        "".join(json.dumps({"id": d, "content": ""}) + "\n" for d in ids), encoding="utf-8")
    data = get_task(f"bright/pony/long:data_dir={bright_dir}").load()
    assert len(data.queries) == 112 and sum(len(j) for j in data.qrels.values()) == 769
    assert list(data.qrels["0"]) == ["Pony/4_control-structures.txt", "Pony/5_methods.txt", "Pony/1_variables.txt",
                                     "Pony/2_primitives.txt", "Pony/2_ops.txt"]


# ---------------------------------------------------------------------------------------------------- RAR-b

ARC = RARB_REAL / "ARC-Challenge"
RARB_FILES = {
    "qrels/test.tsv": "9275b78e9810493961904f33a53f2ec9028cb57a01f6b7007a7a3aede73c50bf",  # the authors', verbatim
    "instruction.txt": "0941b1b93d80067f4ebe7da66f84e643402095f84eb51da5822ce4f59294ca4d",  # the authors', verbatim
    "corpus.jsonl.gz": "3119a79452a1a4a46d493d06427216dad27127c7e1920f3b1c0d59afa6a5471b",  # rebuilt by build_arc.py
    "queries.jsonl.gz": "e5ff2bbb32a398b58480ca8fae6eba3b546981dfa35fb501fb36eb4a8cc2108a",  # rebuilt by build_arc.py
}


@pytest.fixture(autouse=True)
def _no_rarb_env(monkeypatch):
    monkeypatch.delenv(rarb.ENV_VAR, raising=False)


@pytest.fixture(scope="module")
def arc():
    return get_task(f"rarb/ARC-Challenge:data_dir={RARB_REAL}").load()


@pytest.mark.parametrize("name", sorted(RARB_FILES))
def test_rarb_real_files(name):
    assert _sha256(ARC / name) == RARB_FILES[name]


def test_rarb_rebuild_is_reproducible():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_arc", RARB_REAL / "build_arc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus, queries = module.build()
    for name, records in (("corpus.jsonl.gz", corpus), ("queries.jsonl.gz", queries)):
        with gzip.open(ARC / name, "rt", encoding="utf-8") as fh:
            assert [json.loads(line) for line in fh] == records


def test_rarb_loader_fingerprint_on_the_real_qrels(arc):
    task = get_task(f"rarb/ARC-Challenge:data_dir={RARB_REAL}")
    docs, qids = arc.corpus.ids(), arc.queries.ids()
    assert len(docs) == 4408 and (docs[0], docs[-1]) == ("ARC-Challenge-d-0", "ARC-Challenge-d-4407")
    # every question of the test split is judged, as many as MTEB counts for the task
    assert len(qids) == len(arc.qrels) == task.n_queries == 1172
    assert (qids[0], qids[-1]) == ("ARC-Challenge-q-0", "ARC-Challenge-q-1171")
    assert dict(arc.qrels["ARC-Challenge-q-0"]) == {"ARC-Challenge-d-2": 1}
    assert dict(arc.qrels["ARC-Challenge-q-1171"]) == {"ARC-Challenge-d-4404": 1}
    assert all(len(j) == 1 and set(j.values()) == {1} for j in arc.qrels.values())
    assert arc.corpus["ARC-Challenge-d-2"].text == "Planetary days will become shorter."
    assert not arc.excluded


def test_rarb_real_instruction_is_read():
    data = get_task(f"rarb/ARC-Challenge:data_dir={RARB_REAL},instruction=true").load()
    assert {q.instruction for q in data.queries.values()} == {"Retrieve the answer to the question."}


def test_rarb_every_real_judgement_names_the_labelled_mcr_candidate(arc):
    """The rebuilding rule, checked on all 1,172 of the authors' judgements: each judged document's text is the
    candidate the MCR row's label picks, and its question is the row's question."""
    rows = rarb.read_mcr("ARC-Challenge")
    assert len(rows) == len(arc.qrels)
    for row in rows:
        qid = f"ARC-Challenge-q-{row.row}"
        (doc,) = arc.qrels[qid]
        assert arc.corpus[doc].text == row.candidates[row.label], qid
        assert arc.queries[qid].text == row.query


# the authors' qrels of four more tasks (verbatim, tests/fixtures/rarb_real/qrels): (MCR task, id prefix, questions,
# first judgement, last judgement, sha256)
RARB_QRELS = {
    "alphanli": ("alphanli", "alpha", 1532, ("alpha-q-0", "alpha-d-0"), ("alpha-q-1531", "alpha-d-3062"),
                 "43dd9728b8118006b809af13f523f4a39578bb71d650d89261a40c337f70c274"),
    "piqa": ("piqa", "piqa", 1838, ("piqa-q-0", "piqa-d-0"), ("piqa-q-1837", "piqa-d-3671"),
             "e7a0147a3764f1a0bd41d7fa99b7134d1d5f24daf18d98b3fb1b1add0f37df30"),
    "siqa": ("siqa", "siqa", 1954, ("siqa-q-0", "siqa-d-2"), ("siqa-q-1953", "siqa-d-4956"),
             "cddaea7c43e4eabeebbeb756f5c01f948300e6f06aa2efc5599bae3d1f9fbd0d"),
    "winogrande": ("winogrande", "wino", 1267, ("wino-q-0", "wino-d-1"), ("wino-q-1266", "wino-d-649"),
                   "1bfc2103878d0f146d27d88982743307dae31991a905b360c70961c1b6832472"),
}


@pytest.mark.parametrize("task", sorted(RARB_QRELS))
def test_rarb_real_qrels_of_other_tasks_follow_the_same_numbering(task):
    """The shipped MCR files and the authors' full-retrieval qrels describe the same test questions: numbering each
    MCR file's distinct candidates by first appearance names every judged document of the qrels."""
    from gapbench.formats import read_beir_qrels

    mcr_task, prefix, n, first, last, sha = RARB_QRELS[task]
    path = RARB_REAL / "qrels" / f"{task}.test.tsv"
    assert _sha256(path) == sha
    qrels = read_beir_qrels(path)
    pairs = [(q, d) for q, judged in qrels.items() for d in judged]
    assert len(qrels) == len(pairs) == n and (pairs[0], pairs[-1]) == (first, last)
    if task in rarb.FULL_COUNTS:
        assert n == rarb.FULL_COUNTS[task][1]  # MTEB's query count of the hub copy
    rows = rarb.read_mcr(mcr_task)
    number: dict[str, int] = {}
    for row in rows:
        for text in row.candidates:
            number.setdefault(text, len(number))
    assert len(rows) == n
    assert all(dict(qrels[f"{prefix}-q-{r.row}"]) == {f"{prefix}-d-{number[r.candidates[r.label]]}": 1} for r in rows)


# BM25 (gapbench defaults, k=100) on the rebuilt ARC-Challenge corpus: pinned, and recomputed by raw pytrec_eval
ARC_BM25 = {"nDCG@10": 0.052728, "RR@10": 0.037084, "R@100": 326 / 1172}  # 326 gold answers in a top 100
PTE = {"nDCG@10": "ndcg_cut_10", "R@100": "recall_100"}


def test_rarb_bm25_on_real_qrels_equals_pytrec_eval(arc):
    import pytrec_eval

    result = run(f"rarb/ARC-Challenge:data_dir={RARB_REAL}", BM25(), k=100, measures=list(ARC_BM25))
    assert result.n_queries == 1172 and result.n_missing == 0
    for name, value in ARC_BM25.items():
        assert result.means[name] == pytest.approx(value, abs=5e-7), name

    run_dict = {q: dict(ranking) for q, ranking in result.run.items()}
    qrels = {q: dict(j) for q, j in arc.qrels.items()}
    raw = pytrec_eval.RelevanceEvaluator(qrels, set(PTE.values())).evaluate(run_dict)
    for name, pte in PTE.items():
        per_query = result.per_query[name]
        assert all(per_query[q] == pytest.approx(raw[q][pte], abs=1e-12) for q in raw), name
        assert sum(raw[q][pte] for q in raw) / len(qrels) == pytest.approx(result.means[name], abs=1e-12)
    # RR@10 by hand: 1/rank of the one gold answer within the first ten, else 0
    rr = [next((1 / r for r, (d, _) in enumerate(result.run[q][:10], 1) if d in qrels[q]), 0.0) for q in qrels]
    assert sum(rr) / len(rr) == pytest.approx(result.means["RR@10"], abs=1e-12)
    # the same run scored by gapbench's evaluate directly
    again = evaluate(result.run, arc.qrels, list(ARC_BM25))
    assert again.means == result.means
