"""The two Corpus backends: a dict of Documents, and the Arrow file memory-mapped from the cache (corpus_store)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import gapbench.corpus_store as store
from gapbench.cli import main
from gapbench.corpus_store import CompactCorpus, hash_id, hash_ids, load_compact
from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError, UnknownIdError
from gapbench.corpus_store import read_beir_folder, read_jsonl_corpus
from gapbench.topk import tie_keys
from gapbench.types import Corpus, Document, Qrels, Run

FIXTURES = Path(__file__).parent / "fixtures" / "beir"
# ids whose sorted order differs between bytes, code points and case-folding: a larger tie key wins a score tie
ODD_IDS = ["b", "a", "é", "B", "日本", "Z9", "z", "\U0001f600x", "ａ", "e\u0301", "10", "9", "a-1"]


def _jsonl(path: Path, docs) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def _odd_corpus(tmp_path: Path) -> Path:
    docs = [{"_id": d, "title": f"title {i}" if i % 3 else "", "text": f"text of {d} ünï"}
            for i, d in enumerate(ODD_IDS)]
    return _jsonl(tmp_path / "corpus.jsonl", docs)


def _both(path, tmp_path) -> tuple[Corpus, CompactCorpus]:
    return read_jsonl_corpus(path, compact="never"), load_compact(path, root=tmp_path / "cache")


def test_dict_corpus_positions_ids_and_tie_keys():
    corpus = Corpus([Document("b", "x"), Document("a", "y"), Document("é", "z"), Document("B", "w")])
    assert corpus.ids_at([2, 0, 2]) == ["é", "b", "é"]
    assert [corpus.position(d) for d in ("b", "a", "é", "B")] == [0, 1, 2, 3]
    # sorted: "B" < "a" < "b" < "é" (code points 66, 97, 98, 233)
    assert corpus.tie_keys().tolist() == [2, 1, 3, 0]
    assert corpus.tie_keys().dtype == np.int64
    assert corpus.missing(["a", "c", "B", "d"]) == ["c", "d"]
    with pytest.raises(UnknownIdError, match="unknown document id 'c'"):
        corpus.position("c")


@pytest.mark.parametrize("name, rows, size, batches", [
    ("scifact", 1 << 16, 64 << 20, 1), ("arguana", 1 << 16, 64 << 20, 1), ("odd", 1 << 16, 64 << 20, 1),
    ("odd", 4, 64 << 20, 4), ("odd", 1 << 16, 1, 13), ("scifact", 4, 64 << 20, 2),
])
def test_both_backends_agree(name, rows, size, batches, tmp_path, monkeypatch):
    # small record batches: lookups, slices and batches of texts that cross batch boundaries
    monkeypatch.setattr(store, "BATCH_ROWS", rows)
    monkeypatch.setattr(store, "BATCH_BYTES", size)
    path = _odd_corpus(tmp_path) if name == "odd" else FIXTURES / name / "corpus.jsonl"
    plain, compact = _both(path, tmp_path)
    assert compact._id_column.num_chunks == batches
    assert isinstance(compact, Corpus) and type(plain) is Corpus
    assert compact.fingerprint == plain.fingerprint
    assert len(compact) == len(plain) and list(compact) == list(plain) == compact.ids() == compact.doc_ids()
    assert list(compact.values()) == list(plain.values()) and list(compact.items()) == list(plain.items())
    assert compact == plain
    ids = plain.ids()
    for i, did in enumerate(ids):
        assert compact[did] == plain[did] and did in compact
        assert compact.position(did) == plain.position(did) == i
    assert "nope" not in compact and 12 not in compact
    with pytest.raises(UnknownIdError, match=f"unknown document id 'nope' \\({len(ids)} documents known\\)"):
        compact["nope"]
    with pytest.raises(UnknownIdError, match="unknown document id 'nope'"):
        compact.position("nope")
    where = [len(ids) - 1, 0, 2, 2]
    assert compact.ids_at(where) == plain.ids_at(where) == [ids[i] for i in where]
    assert compact.ids_at(np.array(where)) == plain.ids_at(where)
    for use_title in (True, False):
        assert compact.texts_at(where, use_title=use_title) == plain.texts_at(where, use_title=use_title)
        for size in (1, 4, 8192):
            assert list(compact.iter_texts(use_title=use_title, batch_size=size)) == \
                list(plain.iter_texts(use_title=use_title, batch_size=size))
    assert compact.texts_at([0]) == [plain[ids[0]].full_text]
    # every position, shuffled and repeated, read batch by batch and put back in the order asked
    shuffled = np.random.default_rng(0).permutation(np.repeat(np.arange(len(ids)), 2))
    assert compact.ids_at(shuffled) == [ids[i] for i in shuffled]
    assert compact.texts_at(shuffled) == plain.texts_at(shuffled.tolist())
    assert compact.ids_at([]) == compact.texts_at([]) == []
    with pytest.raises(IndexError):
        compact.texts_at([len(ids)])
    assert compact.tie_keys().tolist() == plain.tie_keys().tolist() == tie_keys(ids).tolist()
    assert compact.positions([ids[1], "nope", ids[0]]).tolist() == [1, -1, 0]
    assert compact.missing(["nope", ids[0], "x"]) == plain.missing(["nope", ids[0], "x"]) == ["nope", "x"]
    again = pickle.loads(pickle.dumps(compact))
    assert again.fingerprint == plain.fingerprint and again.ids() == ids


def test_tie_keys_follow_code_point_order_for_non_ascii_ids(tmp_path):
    _, compact = _both(_odd_corpus(tmp_path), tmp_path)
    keys = compact.tie_keys()
    by_key = [ODD_IDS[i] for i in np.argsort(keys)]
    assert by_key == sorted(ODD_IDS)
    # hand-checked corners: "Z9" < "a" (90 < 97), "é" < "ａ" (U+00E9 < U+FF41) < the emoji (U+1F600)
    assert by_key.index("Z9") < by_key.index("a") and by_key[-3:] == ["日本", "ａ", "\U0001f600x"]


def test_hash_of_a_column_equals_the_hash_of_each_id():
    ids = ODD_IDS + ["x" * 1024, "d1", "d10", "d1" + "0" * 300]
    column = pa.array(ids)
    assert hash_ids(column).tolist() == [hash_id(d) for d in ids]
    assert hash_ids(column.slice(3, 5)).tolist() == [hash_id(d) for d in ids[3:8]]  # an array with an offset
    chunked = pa.chunked_array([column.slice(0, 4), column.slice(4)])
    assert hash_ids(chunked).tolist() == [hash_id(d) for d in ids]
    # FNV-1a 64 of "a", as published with the algorithm
    assert hash_id("a") == 0xAF63DC4C8601EC8C


def test_lookups_survive_ids_that_share_a_hash(tmp_path, monkeypatch):
    # four hash values for every id: almost every lookup must step past other ids with its hash
    monkeypatch.setattr(store, "hash_id", lambda d: len(d) % 4)
    monkeypatch.setattr(store, "hash_ids", lambda col: np.array([len(d) % 4 for d in col.to_pylist()], np.uint64))
    plain, compact = _both(_odd_corpus(tmp_path), tmp_path)
    ids = plain.ids()
    assert [compact.position(d) for d in ids] == list(range(len(ids)))
    assert compact.positions(ids[::-1] + ["zz", "q"]).tolist() == list(range(len(ids)))[::-1] + [-1, -1]
    assert "zz" not in compact
    docs = [{"_id": d, "text": "t"} for d in ("ab", "cd", "ef", "cd")]  # "ab" and "ef" share cd's hash too
    with pytest.raises(DuplicateIdError, match=r"line 4: duplicate document id 'cd' \(first seen on line 2\)"):
        load_compact(_jsonl(tmp_path / "dup.jsonl", docs), root=tmp_path / "cache")


def _error(path, mode, tmp_path) -> str:
    with pytest.raises(DataFormatError) as info:
        if mode == "never":
            read_jsonl_corpus(path, compact="never")
        else:
            load_compact(path, root=tmp_path / "cache")
    return str(info.value)


@pytest.mark.parametrize("line, found", [
    ('{"_id": "d1", "text": "again"}', "line 4: duplicate document id 'd1' (first seen on line 1)"),
    ('{"_id": 7, "text": "x"}', "line 4: field '_id' is the number 7; document ids are JSON strings"),
    ('{"_id": "a b", "text": "x"}', "line 4: document id 'a b' (field '_id') contains U+0020 (SPACE)"),
    ('{"_id": "d9"}', "line 4: missing field 'text'"),
    ('{"_id": "d9", "text": "x", "title": 3}', "line 4: field 'title' is the number 3"),
    ('{"_id": "d9", "text": "x"', "line 4: malformed JSON"),
    ('["d9"]', "line 4: expected a JSON object per line, found a list"),
])
def test_bad_lines_give_the_same_errors(line, found, tmp_path):
    good = [json.dumps({"_id": f"d{i}", "title": "", "text": f"text {i}"}) for i in (1, 2, 3)]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(good + [line, '{"_id": "d5", "text": "y"}']) + "\n", encoding="utf-8")
    plain = _error(path, "never", tmp_path)
    assert found in plain
    assert _error(path, "always", tmp_path) == plain
    assert not list((tmp_path / "cache").glob("*"))  # nothing converted, nothing left half-written


def test_a_duplicate_before_a_bad_line_is_the_error_reported(tmp_path):
    lines = ['{"_id": "d1", "text": "a"}', '{"_id": "d2", "text": "b"}', '{"_id": "d1", "text": "c"}', '{"_id": 5}']
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n")
    plain = _error(path, "never", tmp_path)
    assert "line 3: duplicate document id 'd1' (first seen on line 1)" in plain
    assert _error(path, "always", tmp_path) == plain


def test_empty_corpus_is_the_same_error(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n\n")
    assert "no documents found; the file is empty." in _error(path, "never", tmp_path)
    assert _error(path, "always", tmp_path) == _error(path, "never", tmp_path)


def test_second_load_maps_the_converted_file(tmp_path, monkeypatch):
    path = _odd_corpus(tmp_path)
    first = load_compact(path, root=tmp_path / "cache")
    monkeypatch.setattr(store, "_convert", lambda *a: pytest.fail("converted again"))
    again = load_compact(path, root=tmp_path / "cache")
    assert again.folder == first.folder and again.fingerprint == first.fingerprint


@pytest.mark.parametrize("damage", ["truncate", "garbage", "meta", "missing_keys"])
def test_a_torn_or_stale_copy_is_redone(damage, tmp_path):
    path = _odd_corpus(tmp_path)
    plain, first = _both(path, tmp_path)
    arrow = first.folder / "docs.arrow"
    if damage == "truncate":  # as a full disk or a copy cut short leaves it
        arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    elif damage == "garbage":
        arrow.write_bytes(b"\0" * arrow.stat().st_size)
    elif damage == "meta":  # written by an older format
        meta = json.loads((first.folder / "meta.json").read_text())
        (first.folder / "meta.json").write_text(json.dumps({**meta, "format": 0}))
    else:
        (first.folder / "tie_keys.npy").write_bytes(b"\x93NUMPY")
    del first
    again = load_compact(path, root=tmp_path / "cache")
    assert list(again.values()) == list(plain.values()) and again.fingerprint == plain.fingerprint
    assert again.tie_keys().tolist() == plain.tie_keys().tolist()


def test_an_edited_corpus_is_read_again_and_the_old_copy_dropped(tmp_path):
    path = _odd_corpus(tmp_path)
    first = load_compact(path, root=tmp_path / "cache")
    stat = path.stat()
    text = path.read_text(encoding="utf-8").replace("text of b", "TEXT of b")  # same size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime: the head digest tells them apart
    again = load_compact(path, root=tmp_path / "cache")
    assert again.folder != first.folder and not first.folder.exists()
    assert again["b"].text == "TEXT of b ünï"
    assert again.fingerprint == read_jsonl_corpus(path, compact="never").fingerprint != first.fingerprint
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [again.folder.name]


def test_an_interrupted_conversion_leaves_nothing_behind(tmp_path):
    path = _odd_corpus(tmp_path)

    def records():
        yield 1, "d1", "", "text"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        load_compact(path, records(), root=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
    assert load_compact(path, root=tmp_path / "cache").ids() == ODD_IDS


def test_a_killed_conversion_is_swept(tmp_path):
    path = _odd_corpus(tmp_path)
    _, name = store.source_key(path)
    dead = tmp_path / "cache" / f".{name}.tmp999999"  # what a process killed mid-conversion leaves (no such pid)
    dead.mkdir(parents=True)
    (dead / "docs.arrow").write_bytes(b"ARROW1 half")
    corpus = load_compact(path, root=tmp_path / "cache")
    assert corpus.ids() == ODD_IDS and not dead.exists()


def test_mode_from_the_environment(tmp_path, monkeypatch):
    path = FIXTURES / "scifact" / "corpus.jsonl"
    monkeypatch.setenv(store.ENV_VAR, "always")
    assert isinstance(read_jsonl_corpus(path), CompactCorpus)
    monkeypatch.setenv(store.ENV_VAR, "never")
    assert type(read_jsonl_corpus(path)) is Corpus
    monkeypatch.setenv(store.ENV_VAR, "auto")
    assert type(read_jsonl_corpus(path)) is Corpus  # a few kilobytes: below the auto threshold
    monkeypatch.setattr(store, "AUTO_MIN_BYTES", 1)
    assert isinstance(read_jsonl_corpus(path), CompactCorpus)
    monkeypatch.setenv(store.ENV_VAR, "sometimes")
    with pytest.raises(ConfigError, match="GAPBENCH_COMPACT_CORPUS='sometimes' is not one of auto, always, never"):
        read_jsonl_corpus(path)


def test_checks_against_a_compact_corpus(tmp_path):
    _, compact = _both(FIXTURES / "scifact" / "corpus.jsonl", tmp_path)
    ids = compact.ids()
    Qrels({"q1": {ids[0]: 1, ids[3]: 0}}).check_against(compact)
    Run({"q1": {ids[0]: 1.0, ids[1]: 2.0}}).check_against(compact)
    with pytest.raises(UnknownIdError, match="qrels of query 'q2' name document 'nope', which is not in the corpus"):
        Qrels({"q1": {ids[0]: 1}, "q2": {ids[1]: 1, "nope": 1}}).check_against(compact)
    with pytest.raises(UnknownIdError, match="run ranks document 'gone' for query 'q2'"):
        Run({"q1": {ids[0]: 1.0}, "q2": {"gone": 2.0, "nope": 1.0}}).check_against(compact)


@pytest.mark.parametrize("name", ["scifact", "arguana"])
def test_beir_folder_and_run_give_the_same_measures_with_both_backends(name, tmp_path, monkeypatch, capsys):
    folder = FIXTURES / name
    out = {}
    for mode in ("never", "always"):
        monkeypatch.setenv(store.ENV_VAR, mode)
        data = read_beir_folder(folder)
        assert isinstance(data.corpus, CompactCorpus) == (mode == "always")
        code = main(["run", str(folder), "-r", "bm25", "-m", "nDCG@10,R@100,RR@10", "--json",
                     "-o", str(tmp_path / mode)])
        assert code == 0
        out[mode] = json.loads(capsys.readouterr().out)
    assert out["always"]["measures"] == out["never"]["measures"]
    assert out["always"]["measures"]["nDCG@10"] > 0
    runs = [(tmp_path / m / "run.trec.gz").read_bytes() for m in ("never", "always")]
    assert runs[0] == runs[1]


def test_a_full_disk_is_one_error_with_the_ways_out(tmp_path, monkeypatch):
    def full(records, path, tmp):
        tmp.mkdir(parents=True)
        (tmp / "docs.arrow").write_bytes(b"ARROW1")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "_convert", full)
    with pytest.raises(ConfigError, match=r"cannot write the memory-mapped copy of .*corpus.jsonl into .*cache \(No "
                                          r"space left on device\); .*GAPBENCH_COMPACT_CORPUS=never"):
        load_compact(_odd_corpus(tmp_path), root=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
