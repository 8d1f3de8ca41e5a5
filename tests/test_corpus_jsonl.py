"""corpus.jsonl read through orjson for the compact corpus: the same records as the strict reader, the same compact
files byte for byte, and, for anything the fast reader does not vouch for, the strict reader's records or error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import gapbench.corpus_store as store
from gapbench.corpus_jsonl import NotPlain, plain_records
from gapbench.corpus_store import load_compact, read_jsonl_corpus
from gapbench.errors import GapbenchError
from gapbench.formats import corpus_records

FIXTURES = Path(__file__).parent / "fixtures" / "beir"
COMPACT_FILES = ("docs.arrow", "hashes.npy", "order.npy", "tie_keys.npy", "meta.json")

# lines the fast reader takes as they are: escapes, a surrogate pair, non-ASCII, CRLF, a null or absent title, the
# other id and text fields, nested metadata, blank lines, a key given twice (the last value counts, as in json)
PLAIN_LINES = [
    '{"_id": "d1", "title": "T\\u00e9", "text": "tab\\tand \\"quotes\\" \\ud83d\\ude00 \\\\ back"}',
    '{"_id": "d2", "title": null, "text": "über 日本"}',
    '{"doc_id": "d3", "contents": "doc_id and contents"}',
    "",
    '  {"id": "d4", "content": "spaces around", "metadata": {"url": "x", "n": [1, 2.5, null, true]}}  ',
    '{"_id": "d5", "text": "first", "text": "second", "title": ""}\r',
    "   ",
    '{"docid": "d6", "text": "", "extra": 12345678901234567890}',
    '{"_id": "ａ", "text": "fullwidth id", "title": "e\\u0301"}',
]


def _write(path: Path, lines: list[str], *, bom: bool = False, final_newline: bool = True) -> Path:
    text = "\n".join(lines) + ("\n" if final_newline else "")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def _compact_bytes(path: Path, root: Path, records=None) -> dict[str, bytes]:
    corpus = load_compact(path, records, root=root)
    return {name: (corpus.folder / name).read_bytes() for name in COMPACT_FILES}


@pytest.mark.parametrize("bom, final_newline", [(False, True), (True, False)])
def test_plain_lines_read_as_the_strict_reader_reads_them(bom, final_newline, tmp_path):
    path = _write(tmp_path / "corpus.jsonl", PLAIN_LINES, bom=bom, final_newline=final_newline)
    fast = list(plain_records(path))
    assert fast == list(corpus_records(path))
    # by hand: line numbers count the blank lines; the second "text" wins; a null title is empty
    assert [(n, did) for n, did, _, _ in fast] == [(1, "d1"), (2, "d2"), (3, "d3"), (5, "d4"), (6, "d5"), (8, "d6"),
                                                   (9, "ａ")]
    assert fast[0][2:] == ("Té", 'tab\tand "quotes" \U0001f600 \\ back')
    assert fast[1][2] == "" and fast[4][3] == "second"


@pytest.mark.parametrize("block", [97, 16])
def test_a_gzipped_corpus_and_blocks_cut_inside_lines(block, tmp_path, monkeypatch):
    import gapbench.corpus_jsonl as fast_reader

    lines = [json.dumps({"_id": f"d{i}", "title": f"t{i}", "text": "word " * (i % 17)}) for i in range(500)]
    path = tmp_path / "corpus.jsonl.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    # blocks end inside lines, lines span several blocks, and (16) blocks hold no line end at all
    monkeypatch.setattr(fast_reader, "_BLOCK", block)
    assert list(plain_records(path)) == list(corpus_records(path))
    assert len(list(plain_records(path))) == 500


@pytest.mark.parametrize("name", ["scifact", "arguana"])
def test_compact_files_are_byte_identical_to_the_strict_readers(name, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "BATCH_ROWS", 64)  # several record batches
    path = FIXTURES / name / "corpus.jsonl"
    fast = _compact_bytes(path, tmp_path / "fast")
    strict = _compact_bytes(path, tmp_path / "strict", corpus_records(path))
    assert fast == strict
    assert json.loads(fast["meta.json"])["fingerprint"] == read_jsonl_corpus(path, compact="never").fingerprint


# lines only the strict reader reads: each makes the fast reader give up (NotPlain), and the conversion then gives
# exactly what the strict reader gives, records or error
ODD_LINES = [
    ('{"_id": "d9", "text": "x", "score": NaN}', None),  # json reads NaN, orjson refuses it
    ('{"_id": "d9", "text": "x", "big": 1e400}', None),  # json reads infinity, orjson refuses it
    ('\u00a0', None),  # blank to str.strip, not to orjson
    ('{"_id": "d9", "text": "x", "deep": ' + "[" * 300 + "]" * 300 + "}", None),
    ('{"_id": "d9", "text": "\\ud800"}', "unpaired surrogate"),
    ('{"_id": 12, "text": "x"}', "field '_id' is the number 12"),
    ('{"_id": "a b", "text": "x"}', "contains U+0020 (SPACE)"),
    ('{"_id": null, "doc_id": "d9", "text": "x"}', "field '_id' is null"),
    ('{"_id": "d9", "text": "x", "title": 3}', "field 'title' is the number 3"),
    ('{"_id": "d9"}', "missing field 'text'"),
    ('"just a string"', "expected a JSON object per line"),
    ('\ufeff{"_id": "d9", "text": "x"}', "byte order mark"),
]


@pytest.mark.parametrize("line, error", ODD_LINES)
def test_what_the_fast_reader_leaves_to_the_strict_one(line, error, tmp_path):
    path = _write(tmp_path / "corpus.jsonl", ['{"_id": "d1", "text": "a"}', line, '{"_id": "d2", "text": "b"}'])
    with pytest.raises(NotPlain):
        list(plain_records(path))
    if error is None:
        assert _compact_bytes(path, tmp_path / "fast") == _compact_bytes(path, tmp_path / "strict",
                                                                         corpus_records(path))
        return
    with pytest.raises(GapbenchError) as strict:
        read_jsonl_corpus(path, compact="never")
    with pytest.raises(GapbenchError) as compact:
        load_compact(path, root=tmp_path / "fast")
    assert error in str(strict.value) and "line 2" in str(strict.value)
    assert str(compact.value) == str(strict.value)


def test_invalid_utf8_is_the_strict_readers_error(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "\xff"}\n')
    with pytest.raises(NotPlain):
        list(plain_records(path))
    with pytest.raises(GapbenchError) as info:
        load_compact(path, root=tmp_path / "cache")
    assert "line 2: not valid UTF-8: byte 0xff" in str(info.value)
