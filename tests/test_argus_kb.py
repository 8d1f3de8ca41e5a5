"""`gapbench argus kb build`: a reference KB from JSONL, the abstracts XML dump or wikimedia/wikipedia parquet."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from gapbench.analyses.argus.remedy.kb import ReferenceKB
from gapbench.analyses.argus.remedy.kb import build_kb, detect_format, first_paragraph
from gapbench.errors import ConfigError, DataFormatError

FIX = Path(__file__).parent / "fixtures" / "argus_kb"

# expected KB lines, written by hand from the fixtures
JSONL_KB = [
    {"id": "Q90", "title": "Paris", "text": "Paris is the capital and largest city of France."},
    {"id": "Ada_Lovelace", "title": "Ada Lovelace",
     "text": "Ada Lovelace was an English mathematician who wrote the first computer program."},
    {"id": "Q64", "title": "Berlin", "text": "Berlin is the capital of Germany."},
]
XML_KB = [
    {"id": "Anarchism", "title": "Anarchism", "text": "Anarchism is a political philosophy and movement."},
    {"id": "Albedo", "title": "Albedo",
     "text": "Albedo is the fraction of sunlight that is diffusely reflected by a body."},
]
PARQUET_ROWS = {
    "id": ["12", "25", "39", "12"],
    "url": ["https://en.wikipedia.org/wiki/Anarchism", "https://en.wikipedia.org/wiki/Autism",
            "https://en.wikipedia.org/wiki/Albedo", "https://en.wikipedia.org/wiki/Anarchism"],
    "title": ["Anarchism", "Autism", "Albedo", "Anarchism"],
    "text": ["Anarchism is a political philosophy.\n\nHistory\n\nThe earliest anarchist themes...",
             "\n\n",
             "Albedo is the fraction of sunlight\nthat is reflected.\n  \nTerrestrial albedo ...",
             "A repeated id."],
}
PARQUET_KB = [
    {"id": "12", "title": "Anarchism", "text": "Anarchism is a political philosophy."},
    {"id": "39", "title": "Albedo", "text": "Albedo is the fraction of sunlight\nthat is reflected."},
]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _parquet(path: Path, rows: dict = PARQUET_ROWS, batch: int = 2) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(rows), path, row_group_size=batch)  # two row groups: the reader crosses batches
    return path


@pytest.fixture(scope="module")
def cli():
    from gapbench.cli import main
    return main


def test_jsonl_gives_the_expected_lines(tmp_path):
    st = build_kb([FIX / "kb.jsonl"], tmp_path / "kb.jsonl")
    assert _lines(tmp_path / "kb.jsonl") == JSONL_KB
    assert (st.written, st.empty, st.duplicates, st.stopped_at_max) == (3, 1, 1, False)


def test_abstracts_xml_plain_and_gzipped(tmp_path):
    gz = tmp_path / "enwiki-latest-abstract.xml.gz"
    gz.write_bytes(gzip.compress((FIX / "abstracts.xml").read_bytes()))
    for src in (FIX / "abstracts.xml", gz):
        st = build_kb([src], tmp_path / "kb.jsonl")
        assert _lines(tmp_path / "kb.jsonl") == XML_KB
        assert (st.written, st.empty, st.duplicates) == (2, 1, 0)


def test_parquet_first_paragraph_across_batches(tmp_path):
    st = build_kb([_parquet(tmp_path / "train-00000-of-00001.parquet")], tmp_path / "kb.jsonl")
    assert _lines(tmp_path / "kb.jsonl") == PARQUET_KB
    assert (st.written, st.empty, st.duplicates) == (2, 1, 1)


def test_first_paragraph():
    assert first_paragraph("  One\ntwo.\n \t\nThree.") == "One\ntwo."
    assert first_paragraph("\n\nLead.\n\nRest.") == "Lead."
    assert first_paragraph("") == ""


def test_sources_are_concatenated_and_ids_deduplicated_across_them(tmp_path):
    st = build_kb([FIX / "kb.jsonl", FIX / "kb.jsonl", FIX / "abstracts.xml"], tmp_path / "kb.jsonl")
    assert _lines(tmp_path / "kb.jsonl") == JSONL_KB + XML_KB
    assert (st.written, st.empty, st.duplicates) == (5, 3, 5)  # 1+1+1 empty; 1 + 4 (second copy) + 0 repeated


def test_max_stops_after_n_records(tmp_path):
    st = build_kb([FIX / "kb.jsonl", FIX / "abstracts.xml"], tmp_path / "kb.jsonl", max_n=2)
    assert _lines(tmp_path / "kb.jsonl") == JSONL_KB[:2]
    assert (st.written, st.stopped_at_max) == (2, True)
    with pytest.raises(ConfigError, match="max_n=0"):
        build_kb([FIX / "kb.jsonl"], tmp_path / "kb2.jsonl", max_n=0)


def test_built_kb_loads_and_is_searched(tmp_path):
    out = tmp_path / "kb.jsonl"
    build_kb([FIX / "kb.jsonl", FIX / "abstracts.xml"], out)
    kb = ReferenceKB.resolve(out)
    assert sorted(kb.passages) == ["Ada_Lovelace", "Albedo", "Anarchism", "Q64", "Q90"]
    assert kb.passages["Q90"].title == "Paris"
    hits = kb.lookup(["Lovelace mathematician", "sunlight reflected"], k=1)
    assert hits["Lovelace mathematician"][0][0] == "Ada_Lovelace"
    assert hits["sunlight reflected"][0][0] == "Albedo"


def test_malformed_jsonl_names_the_line(tmp_path):
    with pytest.raises(DataFormatError, match=r"bad\.jsonl, line 2: malformed JSON"):
        build_kb([FIX / "bad.jsonl"], tmp_path / "kb.jsonl")
    (tmp_path / "noid.jsonl").write_text('{"id": "a", "text": "x"}\n{"text": "y", "url": "u"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"noid\.jsonl, line 2: a KB record needs \"text\" and an id: \"id\", "
                                              r"\"qid\" or \"title\" .*; found the keys 'text', 'url'\."):
        build_kb([tmp_path / "noid.jsonl"], tmp_path / "kb.jsonl")
    assert not (tmp_path / "kb.jsonl").exists()  # nothing half-written
    (tmp_path / "notext.jsonl").write_text('{"id": "a", "text": 5}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"notext\.jsonl, line 1: a KB record needs \"text\""):
        ReferenceKB.resolve(tmp_path / "notext.jsonl")


def test_malformed_xml_names_the_line(tmp_path):
    with pytest.raises(DataFormatError, match=r"bad\.xml, line 4: not well-formed XML \(mismatched tag"):
        build_kb([FIX / "bad.xml"], tmp_path / "kb.jsonl")


def test_parquet_missing_column_is_named(tmp_path):
    src = _parquet(tmp_path / "x.parquet", {"id": ["1"], "title": ["T"]})
    with pytest.raises(DataFormatError, match=r"x\.parquet: missing column\(s\) text; found id, title"):
        build_kb([src], tmp_path / "kb.jsonl")
    src = _parquet(tmp_path / "y.parquet", {"id": ["1", None], "title": ["T", "U"], "text": ["a", "b"]})
    with pytest.raises(DataFormatError, match=r"y\.parquet: row 2 has no id"):
        build_kb([src], tmp_path / "kb.jsonl")


def test_an_id_with_a_space_names_the_line(tmp_path):
    (tmp_path / "sp.jsonl").write_text('{"id": "Q1", "title": "A", "text": "a"}\n'
                                       '{"id": "Q 2", "title": "B", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"sp\.jsonl: line 2: the id 'Q 2' contains U\+0020 \(SPACE\)"):
        build_kb([tmp_path / "sp.jsonl"], tmp_path / "kb.jsonl")


def test_format_detection_and_override(tmp_path):
    assert detect_format("a/enwiki-latest-abstract.xml.gz") == "abstracts-xml"
    assert detect_format("train-0.parquet") == "parquet"
    assert detect_format("kb.jsonl.gz") == "jsonl"
    assert detect_format("dump.txt", "jsonl") == "jsonl"
    with pytest.raises(ConfigError, match="cannot tell the format of 'dump.txt'"):
        detect_format("dump.txt")
    with pytest.raises(ConfigError, match="fmt='csv': give auto, jsonl, abstracts-xml, parquet"):
        detect_format("x.jsonl", "csv")
    src = shutil.copy(FIX / "abstracts.xml", tmp_path / "dump.txt")
    build_kb([src], tmp_path / "kb.jsonl", fmt="abstracts-xml")
    assert _lines(tmp_path / "kb.jsonl") == XML_KB


def test_all_empty_keeps_an_earlier_kb(tmp_path):
    out = tmp_path / "kb.jsonl"
    out.write_text("earlier\n", encoding="utf-8")
    (tmp_path / "empty.jsonl").write_text('{"title": "T", "text": ""}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="no KB record with a non-empty paragraph"):
        build_kb([tmp_path / "empty.jsonl"], out)
    assert out.read_text(encoding="utf-8") == "earlier\n"


def test_cli_exit_codes(cli, tmp_path, capsys):
    out = tmp_path / "kb.jsonl"
    assert cli(["argus", "kb", "build", str(FIX / "kb.jsonl"), str(FIX / "abstracts.xml"), "--out", str(out),
                "--max", "4"]) == 0
    said = capsys.readouterr().out
    assert f"KB written to {out}: 4 records from 2 source(s); skipped 1 empty paragraph(s), 1 repeated id(s); " \
           "stopped at --max 4" in said
    assert _lines(out) == JSONL_KB + XML_KB[:1]
    assert cli(["argus", "kb", "build", str(FIX / "bad.jsonl"), "--out", str(tmp_path / "b.jsonl")]) == 2
    assert "bad.jsonl, line 2: malformed JSON" in capsys.readouterr().err
    assert cli(["argus", "kb", "build", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli(["argus", "kb", "build", str(FIX / "kb.jsonl")]) == 2  # --out is required


def test_a_kb_line_that_is_not_an_object_is_named(tmp_path):
    from gapbench.analyses.argus.remedy.kb import ReferenceKB

    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"id": "Q90", "text": "Paris is the capital of France."}\n["Q64", "Berlin"]\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"kb\.jsonl, line 2: expected a JSON object per line, found a list\."):
        ReferenceKB.resolve(kb)


# ------------------------------------------------------------------------------------- one format, one reader
def test_one_rule_reads_both_shipped_kbs_and_what_build_writes(tmp_path):
    """The id is "id", else "qid", else the title (spaces as underscores); the title is optional; other keys are
    ignored. The packaged KBs use two of those forms ({qid, text} and {id, title, text, country, wikidata})."""
    from gapbench.analyses.argus.remedy.kb import PACKAGED_KBS, read_jsonl

    assert set(PACKAGED_KBS) == {"wikipedia-slice", "landmarks-oracle"}
    wiki = ReferenceKB.packaged("wikipedia-slice")
    assert len(wiki.passages) == 620 and wiki.passages["Q100"].title == ""
    assert wiki.passages["Q100"].text.startswith("Boston is the capital and most populous city of the U.S. state")
    oracle = ReferenceKB.packaged("landmarks-oracle")
    assert len(oracle.passages) == 97
    assert oracle.passages["Q108303643"].title == "Northwell Health Ice Center"
    # a KB written by build_kb from a {qid, text} source reads back as the same passages
    src = tmp_path / "slice.jsonl"
    src.write_text('{"qid": "Q1", "text": " One. "}\n{"title": "Two words", "text": "Two."}\n'
                   '{"id": "x", "qid": "Q9", "title": "T", "text": "Three.", "extra": 1}\n', encoding="utf-8")
    assert [(e.id, e.title, e.text) for e in read_jsonl(src)] == [
        ("Q1", "", "One."), ("Two_words", "Two words", "Two."), ("x", "T", "Three.")]
    build_kb([src], tmp_path / "kb.jsonl")
    assert _lines(tmp_path / "kb.jsonl") == [{"id": "Q1", "title": "", "text": "One."},
                                             {"id": "Two_words", "title": "Two words", "text": "Two."},
                                             {"id": "x", "title": "T", "text": "Three."}]
    direct, built = ReferenceKB.resolve(src), ReferenceKB.resolve(tmp_path / "kb.jsonl")
    assert direct.passages == built.passages and direct.fingerprint == built.fingerprint


def test_a_kb_file_is_used_as_it_is_while_build_cleans_sources(tmp_path):
    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"id": "Q1", "text": "a"}\n{"id": "Q 2", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"kb\.jsonl: line 2: the id 'Q 2' contains U\+0020 \(SPACE\)"):
        ReferenceKB.resolve(kb)
    kb.write_text('{"id": "Q1", "text": "a"}\n{"qid": "Q1", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"line 2: KB passage id 'Q1' is given again \(first on line 1\)"):
        ReferenceKB.resolve(kb)
    st = build_kb([kb], tmp_path / "out.jsonl")  # the builder skips and counts the repeated id
    assert (st.written, st.duplicates) == (1, 1)
