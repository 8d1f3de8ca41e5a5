"""OBLIQ-Bench: fingerprints of the math and congress fixtures, gold and pooled judgements, per-query exclusions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import gapbench.tasks.obliq as obliq
from gapbench.errors import ConfigError, DataFormatError, DatasetUnavailableError
from gapbench.runner import run
from gapbench.task import Task, get_task
from gapbench.types import TaskData

FIXTURES = Path(__file__).parent / "fixtures" / "obliq"


@pytest.fixture(autouse=True)
def _no_env_copy(monkeypatch):
    monkeypatch.delenv(obliq.ENV_VAR, raising=False)


def test_math_fingerprint():
    data = get_task(f"obliq/math:data_dir={FIXTURES}").load()
    assert len(data.corpus) == 7 and len(data.queries) == 2 and len(data.qrels) == 2
    ids = data.corpus.ids()
    assert ids[0] == "putnam-1987-b1" and ids[-1] == "putnam-1980-a3"
    assert data.corpus["putnam-1987-b1"].text.startswith("Evaluate the integral from 2 to 4 of sqrt(ln(9-x))")
    assert data.corpus["putnam-1980-a3"].title == ""
    # monthly-10982 has no judgement and is dropped
    assert data.queries.ids() == ["putnam-1980-a3", "qual-berkeley-f07-p4"]
    assert data.queries["qual-berkeley-f07-p4"].text.startswith("Show that a group of order pq")
    assert data.qrels.to_dict() == {
        "putnam-1980-a3": {"putnam-1987-b1": 2, "putnam-2005-a5": 2},
        "qual-berkeley-f07-p4": {"qual-berkeley-s03-p2": 2},
    }
    # the empty exclusion list of qual-berkeley-f07-p4 adds nothing
    assert data.excluded == {"putnam-1980-a3": frozenset({"putnam-1980-a3"})}


def test_congress_fingerprint_and_hyphen_header():
    data = get_task(f"obliq/congress:data_dir={FIXTURES}").load()
    assert len(data.corpus) == 5 and len(data.queries) == 2
    assert data.corpus.ids()[0] == "CHRG-116hhrg40551-p0187" and data.corpus.ids()[-1] == "CHRG-113shrg88207-p0009"
    assert data.queries["congress-q0002"].text.startswith("Someone brings a picture of storm damage")
    assert data.qrels.to_dict() == {
        "congress-q0001": {"CHRG-116hhrg40551-p0187": 1},
        "congress-q0002": {"CHRG-110shrg45123-p0032": 1},
    }
    assert data.excluded == {}


def test_gold_and_pool_side_by_side():
    gold, pool = obliq.load_both("math", data_dir=str(FIXTURES))
    assert sum(len(d) for d in gold.qrels.values()) == 3
    assert pool is not None and set(pool) == set(gold.queries)
    assert pool.to_dict()["putnam-1980-a3"] == {"putnam-1987-b1": 2, "putnam-2005-a5": 2, "putnam-1999-b3": 2}
    assert dict(pool["qual-berkeley-f07-p4"]) == {"qual-berkeley-s03-p2": 2, "putnam-2011-a2": 2}
    # every gold judgement is also a pooled one
    assert all(pool[q][d] == r for q in gold.qrels for d, r in gold.qrels[q].items())
    task = get_task(f"obliq/math:data_dir={FIXTURES},qrels=pool")
    assert task.name == "obliq/math:qrels=pool" and task.split == "pool"
    assert task.load().qrels.to_dict() == pool.to_dict()
    congress, none = obliq.load_both("congress", data_dir=str(FIXTURES))
    assert none is None and len(congress.qrels) == 2


def test_pool_where_there_is_none():
    with pytest.raises(ConfigError, match="obliq/congress has no pooled judgements.*twitter, wildchat, math"):
        get_task("obliq/congress:qrels=pool")
    with pytest.raises(ConfigError, match="qrels=gold or qrels=pool"):
        get_task("obliq/math:qrels=silver")


def test_exclusions_masked_end_to_end():
    task = get_task(f"obliq/math:data_dir={FIXTURES}")
    result = run(task, "bm25", k=4, measures=["nDCG@10", "R@10"])
    ranking = [d for d, _ in result.run["putnam-1980-a3"]]
    assert "putnam-1980-a3" not in ranking and len(ranking) == 4
    assert all(len(r) == 4 for r in result.run.values())
    # the mask is what removes it: unmasked, the query's own copy is the best BM25 match
    data = task.load()
    bare = Task("obliq/math-unmasked", lambda: TaskData(data.corpus, data.queries, data.qrels))
    assert run(bare, "bm25", k=4).run["putnam-1980-a3"][0][0] == "putnam-1980-a3"


def test_metadata():
    task = get_task("obliq/wildchat")
    assert task.revision == obliq.HF_REVISION and task.source == "hf:dianetc/OBLIQ-Bench/descriptive/wildchat"
    assert task.n_queries == 40 and task.n_docs == 507729 and "Tchuindjo" in task.citation
    assert task.license.startswith("see the dataset card")
    assert get_task("obliq/writing").n_queries == 512
    assert obliq.repo_files("writing") == {
        "corpus": "analogues/writing/corpus/corpus.jsonl",
        "queries": "analogues/writing/queries+qrels/queries.jsonl",
        "gold": "analogues/writing/queries+qrels/qrels.tsv",
        "excluded": "analogues/writing/queries+qrels/per_query_excluded_ids.json",
    }


def test_hub_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    task = get_task("obliq/math")
    with pytest.raises(DatasetUnavailableError, match=r"dianetc/OBLIQ-Bench.*4ebee29f68ce.*GAPBENCH_DATA_OBLIQ=DIR"):
        task.load()
    with pytest.raises(DatasetUnavailableError, match="dianetc/OBLIQ-Bench"):
        obliq.load_both("twitter")


def test_env_copy_and_broken_files(monkeypatch, tmp_path):
    monkeypatch.setenv(obliq.ENV_VAR, str(FIXTURES))
    assert get_task("obliq/math").revision == "local"
    assert len(get_task("obliq/math").load().queries) == 2
    copy = tmp_path / "repo"
    shutil.copytree(FIXTURES, copy)
    excluded = copy / "analogues/math/queries+qrels/per_query_excluded_ids.json"
    excluded.write_text('{"putnam-1980-a3": "putnam-1980-a3"}')
    with pytest.raises(DataFormatError, match="per_query_excluded_ids.json.*expected a list of doc ids"):
        get_task(f"obliq/math:data_dir={copy}").load()
    excluded.unlink()
    with pytest.raises(DataFormatError, match="missing analogues/math/queries\\+qrels/per_query_excluded_ids.json"):
        get_task(f"obliq/math:data_dir={copy}").load()
    with pytest.raises(DataFormatError, match="missing descriptive/twitter/queries\\+qrels/qrels.tsv"):
        get_task(f"obliq/twitter:data_dir={copy}").load()


def test_tournament_defaults_as_published():
    """The authors' tournament per task: B=20, P=4, final 20 on twitter and wildchat; B=6, P=2, final 16 on math;
    B=4, P=2 with solutions. Writing and congress have no published setting and keep the reranker's own."""
    defaults = {name: get_task(f"obliq/{name}").reranker_defaults for name in obliq.SETS}
    assert defaults == {
        "twitter": {"tournament": {"batch_size": 20, "promote": 4, "max_final": 20}},
        "wildchat": {"tournament": {"batch_size": 20, "promote": 4, "max_final": 20}},
        "math": {"tournament": {"batch_size": 6, "promote": 2, "max_final": 16}},
        "writing": {},
        "congress": {},
    }
    soln = get_task("obliq/math:solutions=true,qrels=pool")
    assert soln.name == "obliq/math:qrels=pool,solutions=true" and soln.verifier_view is not None
    assert soln.reranker_defaults == {"tournament": {"batch_size": 4, "promote": 2, "max_final": 16}}
    assert get_task("obliq/math").verifier_view is None
