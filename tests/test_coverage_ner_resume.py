"""Coverage's spaCy NER keeps finished documents when interrupted (issue 27 part 6: every long stage keeps its work in
pieces sized by time), and a resumed run gives the entities an uninterrupted run gives."""

from __future__ import annotations

import importlib.util

import pytest

from gapbench.analyses.coverage.entities import spacy_entities
from gapbench.stopping import take_kept
from gapbench.task import get_task

# found, not imported, when the suite is collected (spaCy and the torch it loads are seconds of every pytest start)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("spacy") is None, reason="needs spaCy (gapbench[coverage])")


class _StopAt(dict):
    """The texts, raising KeyboardInterrupt when spaCy asks for the ``stop``-th one (as a Ctrl-C there would)."""

    def __init__(self, texts, stop):
        super().__init__(texts)
        self.asked, self.stop = 0, stop

    def __getitem__(self, key):
        self.asked += 1
        if self.asked == self.stop:
            raise KeyboardInterrupt
        return super().__getitem__(key)


@pytest.fixture()
def texts():
    """100 real texts with entities in them: the task's first queries, short enough that spaCy reads them in a moment
    (its passages take it a third of a second each); what is kept and resumed does not depend on the texts' length."""
    queries = get_task("impliret/unispeaker/wknow").load().queries
    return {q.query_id: q.text for q in list(queries.values())[:100]}


def test_an_interrupted_ner_keeps_its_finished_documents_and_resumes_to_the_same_entities(texts, tmp_path,
                                                                                          monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "0")  # save after every document
    whole = spacy_entities(texts, fingerprint="whole", cache=False)
    assert all(whole.values())  # each of these queries names a country, so no text's entity list is empty
    take_kept()
    # spaCy reads texts in batches of 64: the interrupt in the second batch comes after the first 64 are done
    with pytest.raises(KeyboardInterrupt):
        spacy_entities(_StopAt(texts, 80), fingerprint="piecewise")
    kept = take_kept()
    assert len(kept) == 1 and kept[0].startswith("kept spaCy NER of 64 of 100 texts in ")
    partial = list((tmp_path / "cache" / "coverage").glob("spacy-*.partial.json"))
    assert len(partial) == 1
    resumed = _StopAt(texts, 0)  # counts what the resumed run still reads
    assert spacy_entities(resumed, fingerprint="piecewise") == whole
    assert resumed.asked == 36  # only the 36 documents the interrupted run had not finished
    assert not partial[0].exists()  # the whole file replaces the pieces
    assert spacy_entities(texts, fingerprint="piecewise") == whole  # and is read back


def test_a_partial_file_of_other_texts_is_not_used(texts, tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("GAPBENCH_SAVE_EVERY", "0")
    with pytest.raises(KeyboardInterrupt):
        spacy_entities(_StopAt(texts, 80), fingerprint="same")
    take_kept()
    fewer = dict(list(texts.items())[:50])  # the 64 kept ids are not all among these: start again
    counted = _StopAt(fewer, 0)
    spacy_entities(counted, fingerprint="same")
    assert counted.asked == 50
