"""The fast path of BM25 indexing gives bm25s' own results: the batch analyser numbers every word as bm25s'
``Tokenizer.streaming_tokenize`` does text by text (same ids, same vocabulary, same tokenizer state)."""

from __future__ import annotations

import sys

import bm25s
import numpy as np
import pytest
import Stemmer
from bm25s.tokenization import Tokenizer

from gapbench.adapters._bm25_index import BOUNDARY_WORD, SEPARATOR, Analyser, _ascii_words
from gapbench.task import get_task

# ASCII and not: stopwords, one-letter words, underscores, digits, empty texts, texts without a word, a capital that
# lower-cases to two characters (İ), Greek final sigma, German sharp s, and the separator's own letters in any case
ODD = ["Héllo wörld ÄB ab", "", "the and of", "X", "İstanbul ßtraße ΣΑΣ ΑΣ", "QQ qq Qq qQ", "a_b __ 12 x1 _",
       "Running runs ran THE The", "!!", "  ", "\nQQ\n", "naïve café", "ab\ncd\tef"]


@pytest.fixture(scope="module")
def texts():
    corpus = get_task("impliret/multispeaker/wknow").load().corpus
    return [d.full_text for d in corpus.values()]


def per_text(tokenizer, batch):
    return list(tokenizer.streaming_tokenize(batch, update_vocab=True, allow_empty=False))


def as_arrays(token_lists):
    ids = np.array([t for doc in token_lists for t in doc], dtype=np.int64)
    docs = np.repeat(np.arange(len(token_lists)), [len(doc) for doc in token_lists])
    return ids, docs


@pytest.mark.parametrize("stopwords, stemmer", [("en", None), (None, None), ("en", "porter")])
def test_the_batch_analyser_numbers_words_as_bm25s_tokenizer(texts, stopwords, stemmer):
    def make():
        return Tokenizer(stopwords=stopwords, stemmer=Stemmer.Stemmer(stemmer) if stemmer else None)

    ours, theirs = make(), make()
    analyser = Analyser(ours)
    # ASCII batches (the Arrow path), batches with one non-ASCII text (the findall path), and an empty batch
    batches = [texts[:400], ODD + texts[400:700], texts[700:1100], [], texts[1100:] + ODD, ODD[::-1], ["", ""]]
    assert any(not "".join(b).isascii() for b in batches) and any(b and "".join(b).isascii() for b in batches)
    for batch in batches:
        ids, docs = analyser.analyse(batch)
        want_ids, want_docs = as_arrays(per_text(theirs, batch))
        assert np.array_equal(ids, want_ids) and np.array_equal(docs, want_docs)
    assert ours.get_vocab_dict() == theirs.get_vocab_dict() and ours.word_to_id == theirs.word_to_id
    assert ours.word_to_stem == theirs.word_to_stem and ours.stem_to_sid == theirs.stem_to_sid
    assert ours.lower is True and ours.splitter == theirs.splitter  # the tokenizer is left as it was


def test_the_hand_counted_words_of_an_odd_batch():
    analyser = Analyser(Tokenizer(stopwords="en"))
    ids, docs = analyser.analyse(["QQ a_b the Qq", "", "x y", "AB ab Ab"])
    # qq (0), a_b (1), qq (0), [the: stopword], ab (2) three times; texts 1 and 2 have no word of two letters
    assert ids.tolist() == [0, 1, 0, 2, 2, 2] and docs.tolist() == [0, 0, 0, 3, 3, 3]


def test_ascii_words_are_the_patterns_matches():
    text = SEPARATOR.join(["ab c de_f 7 88", "", "x", "__ yy"])
    codes, distinct = _ascii_words(text)
    found = bm25s.tokenization.Tokenizer().splitter(text)
    assert [distinct[c] for c in codes] == found == ["ab", "de_f", "88", BOUNDARY_WORD, BOUNDARY_WORD,
                                                     BOUNDARY_WORD, "__", "yy"]
    assert _ascii_words("") == (pytest.approx(np.empty(0)), [])


@pytest.mark.skipif(sys.maxunicode != 0x10FFFF, reason="a narrow build has no astral code points")
def test_no_character_lower_cases_to_the_separators_letter():
    # the separator's word can never be a word of a lower-cased text, so each of its matches is a text boundary
    assert BOUNDARY_WORD == "QQ"
    assert not [c for c in range(sys.maxunicode + 1) if "Q" in chr(c).lower()]
