"""Local TREC files: SGML and tsv topics, TREC qrels, a JSONL corpus; errors name the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gapbench.tasks.local_trec as local_trec
from gapbench.cli import main
from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.runner import run
from gapbench.task import get_task

FIX = Path(__file__).parent / "fixtures" / "local_trec"
TOPICS, TSV, QRELS, CORPUS = (FIX / n for n in ("topics.301-303.txt", "topics.301-303.tsv", "qrels.301-303.txt",
                                                 "corpus.jsonl"))
SPEC = f"local/trec:topics={TOPICS},qrels={QRELS},corpus={CORPUS}"


def test_sgml_topics_fields():
    topics = local_trec.parse_sgml_topics(TOPICS)
    assert [t["num"] for t in topics] == ["301", "302", "303"]
    assert topics[0]["title"] == "International Organized Crime"
    assert topics[0]["desc"] == ("Identify organizations that take part in international criminal activity, and the "
                                 "countries where they operate.")
    assert topics[2]["narr"] == "Documents that only describe the mirror flaw are not relevant."
    assert topics[1]["line"] == 17


def test_fingerprint_through_the_registry():
    task = get_task(SPEC)
    assert task.name == "local/trec/topics.301-303.txt" and task.revision == "local"
    data = task.load()
    assert data.queries.ids() == ["301", "302", "303"]
    assert data.queries["303"].text == "Hubble Telescope Achievements"
    assert len(data.corpus) == 6 and data.corpus.ids()[0] == "FBIS3-10082" and data.corpus.ids()[-1] == "FT921-3021"
    assert data.corpus["LA010189-0018"].title == "Mafia Families Expand Abroad"
    assert data.qrels.to_dict() == {
        "301": {"FBIS3-10082": 1, "FBIS3-10169": 0, "LA010189-0018": 2},
        "302": {"FT921-1211": 1},
        "303": {"LA052189-0089": 1, "FBIS3-10169": 0},
    }
    assert data.excluded == {}


def test_tsv_topics_and_desc_field():
    data = local_trec.trec_files_task(TSV, QRELS, CORPUS, name="trec-tsv").load()
    assert data.queries.ids() == ["301", "302", "303"] and data.queries["302"].text == "poliomyelitis and post-polio"
    desc = get_task(SPEC + ",field=desc").load()
    assert desc.queries["302"].text == "Is the disease of poliomyelitis (polio) under control in the world?"


def test_bm25_run_end_to_end(capsys):
    result = run(get_task(SPEC), "bm25", k=3, measures=["nDCG@10"])
    assert all(len(r) == 3 for r in result.run.values())
    assert result.run["301"][0][0] in ("LA010189-0018", "FBIS3-10082")
    assert main(["run", SPEC, "--retriever", "bm25", "--json", "-m", "nDCG@10"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task"] == "local/trec/topics.301-303.txt" and out["n_queries"] == 3


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topics.txt"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("<top>\n<num> Number: 1\n<title> a\n", None, "begun on line 1 is never closed"),
        ("<top>\n<num> Number: 1\n<title> a\n<top>\n", 4, "<top> opened again"),
        ("<top>\n<num> Number: 1\n<title> a\n</top>\n</top>\n", 5, "</top> without an opening"),
        ("<top>\nstray words\n<num> Number: 1\n</top>\n", 2, "text outside any field tag"),
        ("<title> a\n", 1, "<title> outside a <top>"),
        ("<top>\n<title> no number\n</top>\n", 3, "has no <num>"),
        ("<top>\n<num> Number: 1 2\n<title> a\n</top>\n", 1, "not a single token"),
    ],
)
def test_malformed_sgml_names_file_and_line(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(DataFormatError, match=message) as err:
        local_trec.read_topics(path)
    assert str(path) in str(err.value) and err.value.line == line


def test_malformed_tsv_and_duplicates(tmp_path):
    path = _write(tmp_path, "1\tfirst topic\n2 second topic without a tab\n")
    with pytest.raises(DataFormatError, match="expected 'query_id<TAB>text'") as err:
        local_trec.read_topics(path)
    assert err.value.line == 2 and str(path) in str(err.value)
    path = _write(tmp_path, "<top>\n<num> Number: 7\n<title> a\n</top>\n<top>\n<num> Number: 7\n<title> b\n</top>\n")
    with pytest.raises(DuplicateIdError, match="topic '7' appears twice") as err:
        local_trec.read_topics(path)
    assert err.value.line == 5
    path = _write(tmp_path, "<top>\n<num> Number: 7\n<title>\n</top>\n")
    with pytest.raises(DataFormatError, match="topic '7' has an empty <title>"):
        local_trec.read_topics(path)


def test_options_and_mismatched_files(tmp_path):
    with pytest.raises(ConfigError, match="needs the option\\(s\\) qrels, corpus"):
        get_task(f"local/trec:topics={TOPICS}")
    template = get_task("local/trec")  # listable by `gapbench tasks`; loading says what to give
    assert "topics=PATH" in template.description
    with pytest.raises(ConfigError, match="needs the option\\(s\\) topics, qrels, corpus"):
        template.load()
    with pytest.raises(ConfigError, match="qrels=.*is not a file"):
        get_task(f"local/trec:topics={TOPICS},qrels={tmp_path / 'nope'},corpus={CORPUS}")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("301 0 FBIS3-10082 1\n399 0 FBIS3-10082 1\n")
    with pytest.raises(DataFormatError, match=r"qrels.txt, line 2: topic '399' is judged here but absent from"):
        local_trec.trec_files_task(TOPICS, qrels, CORPUS).load()
    qrels.write_text("301 0 FBIS3-10082 1\n\n301 0 NOT-IN-CORPUS 1\n")
    with pytest.raises(DataFormatError, match="qrels.txt, line 3: .*'NOT-IN-CORPUS', absent from"):
        local_trec.trec_files_task(TOPICS, qrels, CORPUS).load()


def test_every_file_through_a_pipe_and_with_a_bom(tmp_path):
    # each file is opened once, so named pipes work; a BOM is dropped, so the first topic keeps its number
    import os
    import threading

    expected = local_trec.trec_files_task(TOPICS, QRELS, CORPUS).load()
    paths = {}
    for name, src in (("topics", TOPICS), ("qrels", QRELS), ("corpus", CORPUS)):
        fifo = tmp_path / name
        os.mkfifo(fifo)
        payload = b"\xef\xbb\xbf" + src.read_bytes().replace(b"\n", b"\r\n")

        def feed(path=fifo, data=payload):
            with open(path, "wb") as fh:
                fh.write(data)

        threading.Thread(target=feed, daemon=True).start()
        paths[name] = fifo
    data = local_trec.trec_files_task(paths["topics"], paths["qrels"], paths["corpus"]).load()
    assert data.queries.fingerprint == expected.queries.fingerprint and data.queries.ids() == ["301", "302", "303"]
    assert data.corpus.fingerprint == expected.corpus.fingerprint
    assert data.qrels.to_dict() == expected.qrels.to_dict()


@pytest.mark.parametrize("text, line, message", [
    ("1\tfirst\n3\u00a001\tsecond\n", 2, "topic number '3\\\\xa001' contains U\\+00A0 \\(NO-BREAK SPACE\\)"),
    ("<top>\n<num> Number: 3\x0001\n<title> a\n</top>\n", 1, "topic number '3\\\\x0001' contains U\\+0000"),
])
def test_topic_numbers_are_ids(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(DataFormatError, match=message) as err:
        local_trec.read_topics(path)
    assert err.value.line == line and str(path) in str(err.value)


# ---------------------------------------------------------------- a real TREC <DOC> collection: Vaswani (NPL)

VASWANI = FIX / "vaswani"


def test_bm25_lucene_on_a_trec_doc_collection(tmp_path, capsys):
    # the command of issue 20's "done when", on a real slice of a classic test collection in Terrier's TREC format
    import pytrec_eval

    from gapbench.formats import read_trec_run

    spec = (f"local/trec:topics={VASWANI / 'query-text.trec'},qrels={VASWANI / 'qrels'},"
            f"corpus={VASWANI / 'doc-text.trec'}")
    assert main(["run", spec, "-r", "bm25-lucene", "-m", "AP,P@10,nDCG@10", "-o", str(tmp_path / "out"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_queries"] == 10
    run_ = read_trec_run(tmp_path / "out" / "run.trec.gz")
    assert sorted(run_, key=int) == [str(q) for q in range(1, 11)]
    qrels: dict[str, dict[str, int]] = {}
    for line in (VASWANI / "qrels").read_text().splitlines():
        qid, _, did, rel = line.split()
        qrels.setdefault(qid, {})[did] = int(rel)
    raw = pytrec_eval.RelevanceEvaluator(qrels, {"map", "P_10", "ndcg_cut_10"}).evaluate(run_.to_dict())
    for ours, theirs in (("AP", "map"), ("P@10", "P_10"), ("nDCG@10", "ndcg_cut_10")):
        assert out["measures"][ours] == pytest.approx(sum(raw[q][theirs] for q in qrels) / 10, abs=1e-12)
    # pinned (bm25-lucene's defaults k1=0.9, b=0.4 on these 471 documents): a change of tokenizer or scoring shows here
    # (Anserini 0.22.1's own run: AP 0.7124, its doc-id-ascending tie order; bm25-lucene:ties=anserini gives that)
    assert round(out["measures"]["AP"], 4) == 0.7123 and round(out["measures"]["P@10"], 4) == 0.53
    # doc_tags on the command line: Vaswani's documents have no tags but DOCNO, so asking for <TEXT> is refused
    assert main(["run", spec + ",doc_tags=TEXT", "-r", "bm25-lucene"]) == 2
    assert "no document has any of the tags TEXT" in capsys.readouterr().err


def test_readme_trec_collection_command(tmp_path, monkeypatch, capsys):
    # the README's command, run as written in a copy of the collection's folder
    import re
    import shlex
    import shutil

    readme = " ".join((Path(__file__).resolve().parents[1] / "docs" / "tasks" / "local-trec.md")
                      .read_text(encoding="utf-8").split())
    command = re.search(r'`(gapbench run "local/trec:topics=query-text\.trec,[^`]*)`', readme).group(1)
    shutil.copytree(VASWANI, tmp_path / "vaswani")
    monkeypatch.chdir(tmp_path / "vaswani")
    args = shlex.split(command)
    assert args[:2] == ["gapbench", "run"] and main(args[1:]) == 0
    out = capsys.readouterr().out
    assert "local/trec/query-text.trec | bm25-lucene: 10 queries" in out
    assert re.search(r"nDCG@10\s+0\.7646\s", out)  # as in test_bm25_lucene_on_a_trec_doc_collection's run
