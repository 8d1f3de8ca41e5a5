"""The two Corpus backends: dict of Documents and the memory-mapped Arrow file (gapbench.corpus_store)."""

from __future__ import annotations

import numpy as np
import pytest

from gapbench.errors import UnknownIdError
from gapbench.topk import tie_keys
from gapbench.types import Corpus, Document


def test_dict_corpus_positions_ids_and_tie_keys():
    corpus = Corpus([Document("b", "x"), Document("a", "y"), Document("é", "z"), Document("B", "w")])
    assert corpus.ids_at([2, 0, 2]) == ["é", "b", "é"]
    assert [corpus.position(d) for d in ("b", "a", "é", "B")] == [0, 1, 2, 3]
    # sorted: "B" < "a" < "b" < "é" (code points 66, 97, 98, 233)
    assert corpus.tie_keys().tolist() == [2, 1, 3, 0]
    assert corpus.tie_keys().dtype == np.int64
    with pytest.raises(UnknownIdError, match="unknown document id 'c'"):
        corpus.position("c")
