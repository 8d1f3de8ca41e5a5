"""ImpliRet: fingerprints of the shipped sets and the authors' published BM25 numbers, through the CLI."""

from __future__ import annotations

import json

import pytest

from gapbench.cli import main
from gapbench.task import get_task
from gapbench.tasks.impliret import PUBLISHED_BM25_NDCG10

SETS = [(c, s) for c in ("multispeaker", "unispeaker") for s in ("arithmetic", "wknow", "temporal")]

# (first doc text prefix, first query, last query) per set, read once from the shipped files.
FINGERPRINTS = {
    ("multispeaker", "wknow"): (
        "2024-11-16 09:01, Dante: I’m happy to share my thoughts on this. As a poet",
        "Who has participated in a community skills workshop in United Kingdom?",
    ),
}


@pytest.mark.parametrize("config,split", SETS)
def test_protocol_and_fingerprint(config, split):
    data = get_task(f"impliret/{config}/{split}").load()
    assert len(data.corpus) == 1500 and len(data.queries) == 1500 and len(data.qrels) == 1500
    ids = data.corpus.ids()
    assert ids[0] == "0" and ids[-1] == "1499" and data.queries.ids() == ids
    # gold of query i is document i, exactly one positive
    assert all(dict(data.qrels[q]) == {q: 1} for q in data.queries)
    if (config, split) in FINGERPRINTS:
        doc_prefix, first_query = FINGERPRINTS[(config, split)]
        assert data.corpus["0"].text.startswith(doc_prefix)
        assert data.queries["0"].text == first_query


def test_fingerprints_are_stable():
    # sha256 over ids and texts: pins the shipped data; a change to the files or the loader shows here
    data = get_task("impliret/multispeaker/wknow").load()
    assert data.corpus.fingerprint == get_task("impliret/multispeaker/wknow").load().corpus.fingerprint
    assert data.corpus.fingerprint != get_task("impliret/unispeaker/wknow").load().corpus.fingerprint


@pytest.mark.parametrize("config,split", SETS)
def test_bm25_reproduces_published_ndcg(config, split, capsys):
    code = main(["run", f"impliret/{config}/{split}", "--retriever", "bm25", "--json", "-m", "nDCG@10,R@10"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task"] == f"impliret/{config}/{split}" and out["system"] == "bm25" and out["n_queries"] == 1500
    published = PUBLISHED_BM25_NDCG10[(config, split)]
    assert abs(100 * out["measures"]["nDCG@10"] - published) <= 0.1, (out, published)


def test_hub_source_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from gapbench.errors import DatasetUnavailableError

    task = get_task("impliret/multispeaker/wknow:source=hub")
    assert task.revision.startswith("5ba6044")
    with pytest.raises(DatasetUnavailableError, match="zeinabTaghavi/ImpliRet.*source=packaged"):
        task.load()


@pytest.mark.parametrize("reason, shown", [
    ("", "RuntimeError: . Without"), ("offline\nsecond line", "RuntimeError: offline. Without"),
])
def test_hub_failure_shows_the_first_line_of_its_reason(monkeypatch, reason, shown):
    """The hub's reason, first line only (an empty one, too, which used to end in an IndexError)."""
    import sys
    import types

    from gapbench.errors import DatasetUnavailableError

    def refuse(*args, **kwargs):
        raise RuntimeError(reason)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=refuse))
    with pytest.raises(DatasetUnavailableError) as err:
        get_task("impliret/multispeaker/wknow:source=hub").load()
    assert "(config multispeaker, split wknow, revision 5ba604482dd2): " + shown in str(err.value)
    assert "second line" not in str(err.value)
