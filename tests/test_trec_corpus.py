"""Corpus files of a local collection: TREC <DOC> files (plain, gzipped, a folder), TSV, JSONL; errors name the file,
the line and the formats accepted. Fingerprints on a real slice of the Vaswani (NPL) collection in Terrier's TREC
format (tests/fixtures/local_trec/PROVENANCE.md)."""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest

from gapbench.corpus_store import CompactCorpus
from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.tasks.trec_corpus import parse_doc_tags, read_corpus

FIX = Path(__file__).parent / "fixtures" / "local_trec"
VASWANI = FIX / "vaswani" / "doc-text.trec"
TREC = FIX / "corpus.trec"
JSONL = FIX / "corpus.jsonl"
# ir_datasets' fingerprint of vaswani (test/integration/vaswani.py) gives documents 1 and 10 with these texts, each
# ending in a line break; read from TREC files, the text keeps its inner line breaks and loses the last one
DOC_1 = ("compact memories have flexible capacities  a digital data storage\nsystem with capacity up to bits and "
         "random and or sequential access\nis described")
DOC_10 = "highspeed microwave switching of semiconductors part"
DOC_LAST = ("current build up in neon gas discharges at small overvoltages  the\nincrease is exponential the time "
            "constant is calculated theoretically\nassuming that the discharge is sustained by secondary emission "
            "from\nthe cathode caused by ions and metaastable ne atoms  there is good\nagreement with experiment")


def test_vaswani_slice_fingerprint():
    corpus = read_corpus(VASWANI)
    ids = corpus.ids()
    assert len(corpus) == 471 and ids[0] == "1" and ids[9] == "10" and ids[-1] == "11344"
    assert ids[299] == "300" and ids[300] == "402"  # docnos 1-300, then the judged ones in file order
    assert corpus["1"].text == DOC_1 and corpus["1"].title == ""
    assert corpus["10"].text == DOC_10
    assert corpus["11344"].text == DOC_LAST


def test_gzip_and_a_folder_of_files_read_as_one_file(tmp_path):
    whole = read_corpus(VASWANI)
    gz = tmp_path / "doc-text.trec.gz"
    gz.write_bytes(gzip.compress(VASWANI.read_bytes()))
    assert read_corpus(gz).fingerprint == whole.fingerprint
    # a folder: three files (one gzipped, one in a sub-folder), read in path order; hidden files are left out
    text = VASWANI.read_text()
    cuts = [text.index("<DOC>\n<DOCNO>101</DOCNO>"), text.index("<DOC>\n<DOCNO>402</DOCNO>")]
    folder = tmp_path / "docs"
    (folder / "b").mkdir(parents=True)
    (folder / "a1.trec").write_text(text[:cuts[0]])
    (folder / "a2.trec.gz").write_bytes(gzip.compress(text[cuts[0]:cuts[1]].encode()))
    (folder / "b" / "c.trec").write_text(text[cuts[1]:])
    (folder / ".DS_Store").write_bytes(b"\x00\x01binary")
    parts = read_corpus(folder)
    assert parts.ids() == whole.ids() and parts.fingerprint == whole.fingerprint


def test_doc_tags_choose_the_text():
    every = read_corpus(TREC)
    assert every.ids() == read_corpus(JSONL).ids()
    # by default all the text outside DOCNO and DOCHDR, tags dropped, each tag a line break
    assert every["FBIS3-10082"].text == ("2 March 1994\nPolice Report on Smuggling Ring\nInvestigators in Italy and "
                                         "Colombia describe an international crime organization moving cocaine "
                                         "through Adriatic ports.")
    assert every["LA010189-0018"].text.startswith("By a Staff Writer\nMafia Families Expand Abroad\n")
    assert "archive.example" not in every["LA010189-0018"].text  # the DOCHDR block
    assert every["FT921-3021"].text == ("Shipping Rates Rise\nFreight rates on Asian routes climbed for the fifth "
                                        "month running.")
    chosen = read_corpus(TREC, "TEXT+HEADLINE")
    assert chosen["FBIS3-10082"].text == ("Police Report on Smuggling Ring\nInvestigators in Italy and Colombia "
                                          "describe an international crime organization moving cocaine through "
                                          "Adriatic ports.")
    assert chosen["LA010189-0018"].text == ("Mafia Families Expand Abroad\nOrganized crime groups based in Sicily have "
                                            "opened operations in Germany, Canada and Venezuela, officials\nsaid.")
    assert chosen["FT921-1211"].text == ("Vaccination Drive Targets Polio\nHealth workers vaccinated millions of "
                                         "children against poliomyelitis as cases fell to their lowest level.")
    text_only = read_corpus(TREC, ("text",))
    jsonl = read_corpus(JSONL)
    for did in ("FBIS3-10082", "FBIS3-10169", "FT921-1211", "LA052189-0089", "FT921-3021"):
        assert text_only[did].text == jsonl[did].text
    assert parse_doc_tags("TEXT+HEADLINE") == ("TEXT", "HEADLINE") and parse_doc_tags("") is None


def test_doc_tags_errors(tmp_path):
    with pytest.raises(DataFormatError, match=r"corpus.trec: no document has any of the tags BODY; the documents' "
                                              r"tags are DATE, HEADLINE, TEXT, BYLINE, P, PROFILE"):
        read_corpus(TREC, "BODY")
    with pytest.raises(ConfigError, match="doc_tags: 'TE XT' is not a tag name"):
        read_corpus(TREC, "TE XT")
    with pytest.raises(ConfigError, match="<DOCNO> holds the document or its id"):
        read_corpus(TREC, "DOCNO")
    with pytest.raises(ConfigError, match="doc_tags applies to TREC <DOC> files; .*corpus.jsonl is JSONL"):
        read_corpus(JSONL, "TEXT")


def test_tsv_corpora(tmp_path):
    jsonl = read_corpus(JSONL)
    rows = [json.loads(line) for line in JSONL.read_text().splitlines()]
    three = tmp_path / "collection3.tsv"
    three.write_text("id\ttitle\ttext\n" + "".join(f"{r['_id']}\t{r['title']}\t{r['text']}\n" for r in rows))
    assert read_corpus(three).fingerprint == jsonl.fingerprint  # same ids, titles and texts
    two = tmp_path / "collection.tsv"
    two.write_text("".join(f"{r['_id']}\t{r['text']}\n" for r in rows))
    corpus = read_corpus(two)
    assert corpus.ids() == jsonl.ids() and corpus["FT921-3021"].title == ""
    assert corpus["FT921-3021"].text == "Freight rates on Asian routes climbed for the fifth month running."
    bad = tmp_path / "bad.tsv"
    bad.write_text("d1\tfirst text\nd2\ta title\tand a text\n")
    with pytest.raises(DataFormatError, match=r"bad.tsv, line 2: 3 tab-separated columns where the file began with 2"):
        read_corpus(bad)


@pytest.mark.parametrize("text, line, message", [
    ("hello world\n", 1, "not a corpus format I can read: found 'hello world'; a corpus is TREC <DOC>.*TSV.*JSONL"),
    ("\n<DOC>\n<DOCNO>a</DOCNO>\ntext\n", 2, "the document begun on line 2 is never closed; add </DOC>"),
    ("<DOC>\ntext without an id\n</DOC>\n", 1, "the document begun on line 1 has no <DOCNO>"),
    ("<DOC><DOCNO>a</DOCNO>x\n<DOC><DOCNO>b</DOCNO>y</DOC>\n", 2, "<DOC> opened again before the document begun on "
                                                                "line 1 was closed"),
    ("<DOC><DOCNO>a</DOCNO>x</DOC>\nstray words\n", 2, "text outside <DOC> ... </DOC>: 'stray words'; a corpus is"),
    ("<DOC><DOCNO>a</DOCNO>x</DOC>\n</DOC>\n", 2, "</DOC> without an opening <DOC>"),
    ("<DOC><DOCNO>a b</DOCNO>x</DOC>\n", 1, "the document begun on line 1 has the id 'a b'; an id is one token"),
    ("<DOC><DOCNO>a</DOCNO><DOCNO>b</DOCNO></DOC>\n", 1, "the document begun on line 1 has 2 <DOCNO> tags"),
    # topics given as the corpus
    ("\n<top><num>1</num></top>\n", 2, "text outside <DOC> ... </DOC>: '<top><num>1</num></top>'; a corpus is TREC"),
])
def test_unreadable_corpora_name_file_line_and_formats(tmp_path, text, line, message):
    path = tmp_path / "docs.txt"
    path.write_text(text)
    where = f"docs.txt, line {line}: " if line else "docs.txt: "
    with pytest.raises(DataFormatError, match=where + message):
        read_corpus(path)


def test_duplicate_docno_names_both_files(tmp_path):
    (tmp_path / "a.trec").write_text("<DOC><DOCNO>x1</DOCNO>one</DOC>\n")
    (tmp_path / "b.trec").write_text("\n<DOC><DOCNO>x1</DOCNO>two</DOC>\n")
    with pytest.raises(DuplicateIdError, match=r"b.trec, line 2: document id 'x1' appears twice \(first on "
                                               r".*a.trec, line 1\)"):
        read_corpus(tmp_path)


def test_doc_id_attribute_and_json_errors_stay_json(tmp_path):
    path = tmp_path / "attr.trec"
    path.write_text('<?xml version="1.0"?>\n<!-- one story -->\n<DOC id="AFP_ENG_1" type="story">\n'
                    "<HEADLINE>h</HEADLINE>\n<TEXT>t</TEXT>\n</DOC> <!-- end -->\n")
    assert read_corpus(path)["AFP_ENG_1"].text == "h\nt"
    broken = tmp_path / "c.jsonl"
    broken.write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n')
    with pytest.raises(DataFormatError, match="c.jsonl, line 2: malformed JSON"):
        read_corpus(broken)


def test_trec_through_a_pipe_and_the_memory_mapped_store(tmp_path, monkeypatch):
    expected = read_corpus(VASWANI)
    fifo = tmp_path / "docs.fifo"
    os.mkfifo(fifo)
    payload = gzip.compress(VASWANI.read_bytes())

    def feed():
        with open(fifo, "wb") as fh:
            fh.write(payload)

    threading.Thread(target=feed, daemon=True).start()
    assert read_corpus(fifo).fingerprint == expected.fingerprint
    monkeypatch.setenv("GAPBENCH_COMPACT_CORPUS", "always")
    compact = read_corpus(VASWANI)
    assert isinstance(compact, CompactCorpus)
    assert compact.fingerprint == expected.fingerprint and compact["11344"].text == DOC_LAST


def test_a_large_folder_is_memory_mapped_once_per_doc_tags(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPBENCH_COMPACT_CORPUS", "always")
    folder = tmp_path / "docs"
    folder.mkdir()
    text = TREC.read_text()
    cut = text.index("<DOC>\n<DOCNO> LA010189-0018")
    (folder / "a.trec").write_text(text[:cut])
    (folder / "b.trec.gz").write_bytes(gzip.compress(text[cut:].encode()))
    every, chosen = read_corpus(folder), read_corpus(folder, "TEXT+HEADLINE")
    assert isinstance(every, CompactCorpus) and isinstance(chosen, CompactCorpus)
    monkeypatch.setenv("GAPBENCH_COMPACT_CORPUS", "never")
    assert every.fingerprint == read_corpus(TREC).fingerprint
    assert chosen.fingerprint == read_corpus(TREC, "TEXT+HEADLINE").fingerprint != every.fingerprint
    # an edited file is converted again; a docno in two files is refused naming both
    (folder / "c.trec").write_text("<DOC><DOCNO>FT921-3021</DOCNO>again</DOC>\n")
    monkeypatch.setenv("GAPBENCH_COMPACT_CORPUS", "always")
    with pytest.raises(DuplicateIdError, match=r"c.trec, line 1: document id 'FT921-3021' appears twice \(first on "
                                               r".*b.trec.gz, line \d+\)"):
        read_corpus(folder)
    (folder / "c.trec").write_text("<DOC><DOCNO>X-1</DOCNO>one more</DOC>\n<DOC><DOCNO>X-1</DOCNO>twice</DOC>\n")
    with pytest.raises(DuplicateIdError, match=r"c.trec, line 2: document id 'X-1' appears twice \(first on line 1\)"):
        read_corpus(folder)
    (folder / "c.trec").write_text("<DOC><DOCNO>X-1</DOCNO>one more</DOC>\n")
    grown = read_corpus(folder)
    assert len(grown) == 7 and grown["X-1"].text == "one more"
