"""MuSiQue task: the published JSONL format, the shipped real dev slice (fingerprint), named errors, and signals."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.formats import write_beir_folder
from gapbench.task import get_task
from gapbench.tasks import musique
from gapbench.tasks.musique import build, paragraph_id


def _para(idx, title, text, supporting=False):
    return {"idx": idx, "title": title, "paragraph_text": text, "is_supporting": supporting}


def _record(qid, question, paragraphs, answerable=True):
    return {"id": qid, "paragraphs": paragraphs, "question": question, "question_decomposition": [],
            "answer": "x", "answer_aliases": [], "answerable": answerable}


def _write(path, records, raw_lines=()):
    lines = [json.dumps(r) for r in records] + list(raw_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# Two questions share the "Green" paragraph (a distractor of q2, supporting for q1); q3 is unanswerable.
RECORDS = [
    _record("2hop__1_2", "Who is the spouse of the Green performer?", [
        _para(0, "Green", "Green is an album.", True), _para(1, "Miquette Giraudy", "She married Hillage.", True),
        _para(2, "Blue", "Blue is a colour.")]),
    _record("2hop__3_4", "Where was the Blue author born?", [
        _para(0, "Green", "Green is an album."), _para(1, "Blue", "Blue is a colour.", True),
        _para(2, "Blue", "Blue is a novel.", True)]),
    _record("2hop__5_6", "Unanswerable?", [_para(0, "Red", "Red.", True)], answerable=False),
]


def test_paragraph_ids_are_hashes_of_title_and_text():
    # sha256("Green\nGreen is an album.")[:16], computed once by hand with hashlib
    assert paragraph_id("Green", "Green is an album.") == "28197acf72595933"
    assert paragraph_id("Blue", "Blue is a colour.") != paragraph_id("Blue", "Blue is a novel.")


def test_published_format_parsed_and_deduplicated(tmp_path):
    data = musique.load_file(_write(tmp_path / "dev.jsonl", RECORDS))
    # 6 answerable paragraphs, one repeated (Green) and one repeated (Blue is a colour): 4 distinct
    assert len(data.corpus) == 4 and list(data.queries) == ["2hop__1_2", "2hop__3_4"]
    green = paragraph_id("Green", "Green is an album.")
    assert data.corpus[green].title == "Green" and data.corpus[green].text == "Green is an album."
    assert dict(data.qrels["2hop__1_2"]) == {green: 1, paragraph_id("Miquette Giraudy", "She married Hillage."): 1}
    assert dict(data.qrels["2hop__3_4"]) == {paragraph_id("Blue", "Blue is a colour."): 1,
                                             paragraph_id("Blue", "Blue is a novel."): 1}
    assert data.queries["2hop__3_4"].text == "Where was the Blue author born?"


def test_gzipped_file_and_path_option(tmp_path, monkeypatch):
    raw = tmp_path / "dev.jsonl.gz"
    raw.write_bytes(gzip.compress(("\n".join(json.dumps(r) for r in RECORDS) + "\n").encode()))
    task = get_task(f"musique:path={raw}")
    assert task.source == f"local file {raw}" and len(task.load().queries) == 2
    monkeypatch.setenv("GAPBENCH_DATA_MUSIQUE", str(raw))
    assert len(get_task("musique").load().corpus) == 4


@pytest.mark.parametrize("line, message", [
    ('{"id": "q", "paragraphs": [', "line 2: malformed JSON"),
    ('{"id": "q", "question": "?"}', r"lacks field\(s\) paragraphs"),
    ('{"id": "q", "question": "?", "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "x"}]}',
     r"paragraph 0 lacks field\(s\) is_supporting"),
    ('{"id": "q", "question": "?", "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "x", '
     '"is_supporting": false}], "answerable": true}', "marks no paragraph is_supporting"),
    ('{"id": "q", "question": "?", "paragraphs": {}}', "'paragraphs' is not a list"),
])
def test_malformed_records_are_named_errors(tmp_path, line, message):
    path = _write(tmp_path / "bad.jsonl", RECORDS[:1], [line])
    with pytest.raises(DataFormatError, match=message) as exc:
        musique.load_file(path)
    assert exc.value.line == 2 and str(path) in str(exc.value)


def test_duplicate_ids_missing_file_and_bad_source(tmp_path):
    with pytest.raises(DuplicateIdError, match="first seen on line 1"):
        musique.load_file(_write(tmp_path / "dup.jsonl", [RECORDS[0], RECORDS[0]]))
    with pytest.raises(DataFormatError, match="no MuSiQue file here"):
        get_task(f"musique:path={tmp_path / 'absent.jsonl'}").load()
    with pytest.raises(ConfigError, match="source=packaged"):
        get_task("musique:source=zip")


def test_hub_source_goes_through_the_hub_reader(monkeypatch):
    calls = []

    def fake(dataset, config, split, revision, *, feature, fix):
        calls.append((dataset, config, split, revision))
        return [dict(r) for r in RECORDS]

    monkeypatch.setattr(musique, "load_dataset", fake)
    data = get_task("musique:source=hub,revision=abc").load()
    assert calls == [("dgslibisey/MuSiQue", None, "validation", "abc")]
    assert len(data.queries) == 2 and data.qrels.source == "hf:dgslibisey/MuSiQue@abc"


# ------------------------------------------------------------------ the shipped slice (real MuSiQue dev records)

@pytest.fixture(scope="module")
def slice_data():
    return get_task("musique").load()


def test_shipped_slice_fingerprint(slice_data):
    data = slice_data
    # counts checked by hand on the file: 100 questions x 20 paragraphs = 2,000, 1,769 distinct; 236 supporting
    assert (len(data.queries), len(data.corpus), sum(len(g) for g in data.qrels.values())) == (100, 1769, 236)
    qids = list(data.queries)
    assert (qids[0], qids[9], qids[-1]) == ("2hop__574419_270105", "2hop__77775_162341", "2hop__385392_756039")
    assert data.queries[qids[0]].text == "What is the seat of the county where Van Hook Township is located?"
    assert data.queries[qids[9]].text == "What recognition did the actor of Truman Capote from Capote receive?"
    gold = data.qrels["2hop__574419_270105"]
    assert sorted(data.corpus[d].title for d in gold) == [
        "Mountrail County Courthouse", "Van Hook Township, Mountrail County, North Dakota"]
    assert paragraph_id("Van Hook Township, Mountrail County, North Dakota", data.corpus["75cb61d8dc37cf26"].text) \
        == "75cb61d8dc37cf26"
    # one supporting paragraph per hop: 2hop questions have 2 gold paragraphs, 3hop 3, 4hop 4
    hops = {q: int(q[0]) for q in qids}
    assert all(len(data.qrels[q]) == hops[q] for q in qids)
    assert sorted(hops.values()).count(2) == 75


def test_supporting_paragraphs_are_the_qrels(slice_data):
    with gzip.open(musique.packaged_file(), "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh]
    for r in records:
        expected = {paragraph_id(p["title"], p["paragraph_text"]) for p in r["paragraphs"] if p["is_supporting"]}
        assert set(slice_data.qrels[r["id"]]) == expected
        assert all(slice_data.qrels[r["id"]][d] == 1 for d in expected)


def test_signals_on_musique_and_its_beir_copy(slice_data, tmp_path):
    """`gapbench signals musique` end to end with BM25 (no model), and the same slice written as a BEIR folder gives
    the same per-query signals."""
    import gapbench
    from gapbench.analyses.signals.signals_options import SignalsOptions

    options = SignalsOptions(n_bootstrap=20, term_extractor=lambda texts: [t.lower().split() for t in texts])
    d = gapbench.signals("musique", ["bm25"], options).model_dump(mode="json", exclude_unset=True)
    assert d["task"] == "musique" and d["n_queries"] == 100 and 0 < d["n_weak"] < 100
    assert d["signals"]["max_score"]["available"] and not d["signals"]["dense_agreement"]["available"]
    folder = tmp_path / "musique_beir"
    write_beir_folder(slice_data, folder)
    b = gapbench.signals(str(folder), ["bm25"], options).model_dump(mode="json", exclude_unset=True)
    assert (b["n_queries"], b["n_weak"]) == (d["n_queries"], d["n_weak"])
    for name in ("max_score", "evidence_coverage"):
        assert b["signals"][name]["auc"] == pytest.approx(d["signals"][name]["auc"])
        assert np.isclose(b["signals"][name]["mean_weak"], d["signals"][name]["mean_weak"])
