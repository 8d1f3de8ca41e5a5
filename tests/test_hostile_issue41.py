"""Hostile inputs of issue 41, one test per class closed at its root: TOML and JSON that are not text or are nested
thousands deep, NaN and infinities in TOML, a submission that validate would refuse (written by nothing), a board
measure stored under another name than the one results key it by, SMART ids in other digits or thousands of digits
long, Markdown written from data, the Python verbs' refusals (path for a run, empty run, a score that is no number,
measure= for measures=) and the one wording of a setting that is not one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gapbench.errors import ConfigError, DataFormatError, OptionsError, StrictJSONError, SubmissionError
from gapbench.jsonio import parse_json_strict, parse_toml_strict
from gapbench.tables import Table, md_escape, number, plural

# ---------------------------------------------------------------- TOML and JSON input


@pytest.mark.parametrize("data, said, line", [
    (b'name = "board"\nmeasure = "\xff\xfe"\n', "is not UTF-8 text (byte 26, 0xff)", 2),
    (b"x = " + b"[" * 5000 + b"]" * 5000, "is nested more than 32 levels deep", None),
    (b"x = " + b"{a = " * 3000 + b"1" + b"}" * 3000, "is nested more than 32 levels deep", None),
    (b'[t]\nalpha = nan\n', "holds nan at 't.alpha', which is not a finite number", None),
    (b'k = [1.0, -inf]\n', "holds -inf at 'k.1', which is not a finite number", None),
    (b'a = 1\nb = = 2\n', "malformed TOML", 2),
])
def test_toml_input_that_is_not_a_document_is_one_line(data, said, line):
    with pytest.raises(StrictJSONError) as caught:
        parse_toml_strict(data)
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.line == line


def test_toml_reader_keeps_brackets_inside_strings_and_comments():
    text = b'name = "a [[[[ b"  # [[[[[[\nlevels = [[1, 2], [3]]\n'
    assert parse_toml_strict(text, max_depth=3) == {"name": "a [[[[ b", "levels": [[1, 2], [3]]}


def test_json_input_nested_thousands_deep_or_not_text_is_one_line():
    with pytest.raises(StrictJSONError, match="nested too deeply|nested more than"):
        parse_json_strict(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(StrictJSONError, match=r"is not UTF-8 text \(byte 8, 0xc3\)") as caught:
        parse_json_strict(b'{\n"a": "\xc3("}')
    assert caught.value.line == 2


# ---------------------------------------------------------------- SMART identifiers

def _smart(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cran.all"
    path.write_text(text, encoding="utf-8")
    return path


def test_smart_record_ids_in_other_digits_stay_themselves(tmp_path):
    from gapbench.tasks.smart import parse_records

    records = parse_records(_smart(tmp_path, ".I 001\n.W\none\n.I \u0661\n.W\ntwo\n"))  # ARABIC-INDIC DIGIT ONE
    assert [r["id"] for r in records] == ["1", "\u0661"]  # never read as a second record 1


def test_smart_ids_thousands_of_digits_long_are_refused_with_the_limit(tmp_path):
    from gapbench.tasks.smart import parse_qrels, parse_records

    with pytest.raises(DataFormatError, match=r"an id of 5,000 characters .*ids have at most 1024") as caught:
        parse_records(_smart(tmp_path, ".I 1\n.W\none\n.I " + "7" * 5000 + "\n.W\ntwo\n"))
    assert caught.value.line == 4
    qrels = tmp_path / "qrels.text"
    qrels.write_text("1 5 1\n" + "2 " + "9" * 5000 + " 1\n")
    with pytest.raises(DataFormatError, match="an id of 5,000 characters"):
        parse_qrels(qrels)
    qrels.write_text("1 5 " + "3" * 50 + "\n")
    with pytest.raises(DataFormatError, match="is not a grade"):
        parse_qrels(qrels)


# ---------------------------------------------------------------- submissions and boards

def test_submit_create_checks_every_field_before_writing(tmp_path):
    from gapbench.products.submissions.write import write_submission
    from gapbench.types import Run

    out = tmp_path / "sub"
    run = Run({"q1": {"d1": 1.0}})
    with pytest.raises(SubmissionError, match=r"nothing written: .*'contact'.*control or invisible character U\+000A"):
        write_submission(out, system="mine", description="A system.", suite="impliret",
                         runs={"impliret/multispeaker/wknow": run}, adapter={"name": "bm25", "config": {}},
                         contact="me\n| forged | row |")
    assert not out.exists()


def test_submit_create_refuses_a_folder_outside_the_board(tmp_path):
    from gapbench.products.board_suites import FolderSuite
    from gapbench.products.submissions.write import write_submission
    from gapbench.types import Run

    board = FolderSuite(name="mine", tasks=("t",), folder=tmp_path / "board")
    with pytest.raises(ConfigError, match=r"is not a folder of the board's submissions; .*board/submissions/<system>"):
        write_submission(tmp_path / "elsewhere" / "sys", system="sys", description="d", suite=board,
                         runs={"t": Run({"q1": {"d1": 1.0}})}, adapter={"name": "bm25", "config": {}}, contact="me")
    assert not (tmp_path / "elsewhere").exists()


def test_a_board_measure_is_stored_under_the_name_results_key_it_by(tmp_path):
    from gapbench.cli import main
    from gapbench.evaluation.evaluation import measure_name

    assert [measure_name(m) for m in ("map", "ndcg_cut_10", " nDCG@10 ", "P.5")] == ["AP", "nDCG@10", "nDCG@10", "P@5"]
    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text('{"_id": "d1", "text": "a cat"}\n{"_id": "d2", "text": "a dog"}\n')
    (data / "queries.jsonl").write_text('{"_id": "q1", "text": "cat"}\n')
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert main(["leaderboard", "init", str(tmp_path / "board"), "--task", str(data), "--measure", "ndcg_cut_10"]) == 0
    assert 'measure = "nDCG@10"' in (tmp_path / "board" / "suite.toml").read_text().splitlines()


# ---------------------------------------------------------------- Markdown from data

def test_markdown_from_data_can_neither_inject_markup_nor_forge_a_row():
    hostile = "sys`rm -rf`|0.9999|\n| forged | 1.0000 |<script>x</script>\u2028**b** [l](u)"
    cell = md_escape(hostile)
    assert not set(cell) & set("`|<>\n\u2028*[]")
    assert cell.startswith("sys&#96;rm -rf&#96;&#124;0.9999&#124; &#124; forged")
    table = Table(["system", "nDCG@10"], [[cell, "0.5000"]]).markdown().splitlines()
    assert len(table) == 3 and table[2].count("|") == 3  # one row of two cells: no forged row, no extra cell


def test_numbers_and_counts_are_printed_as_said():
    assert [number(-0.00004), number(-0.00005), number(0.25, 1), number(float("nan"))] == \
        ["0.0000", "-0.0001", "0.2", "nan"]
    assert [plural(1, "comparison"), plural(2, "comparison"), plural(11, "query", "queries")] == \
        ["1 comparison", "2 comparisons", "11 queries"]


# ---------------------------------------------------------------- the Python verbs' refusals

QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}}


def test_evaluate_names_the_reader_for_a_path():
    from gapbench import evaluate

    with pytest.raises(ConfigError, match=r"run is given as the path 'runs/x\.trec'.*gapbench\.formats\.read_trec_run"):
        evaluate("runs/x.trec", QRELS, ["AP"])
    with pytest.raises(ConfigError, match=r"qrels is given as the path 'q\.txt'.*gapbench\.formats\.read_qrels"):
        evaluate({"q1": {"d1": 1.0}}, Path("q.txt"), ["AP"])


def test_evaluate_refuses_an_empty_run_and_a_score_that_is_no_number():
    from gapbench import evaluate

    with pytest.raises(DataFormatError, match="the run is empty"):
        evaluate({}, QRELS, ["AP"])
    with pytest.raises(DataFormatError, match=r"score of document 'd1' for query 'q1' is 'high', not a number"):
        evaluate({"q1": {"d1": "high"}}, QRELS, ["AP"])


def test_one_wording_for_a_setting_that_is_not_one():
    from gapbench import evaluate
    from gapbench.retrieval import get_retriever
    from gapbench.runner import RunOptions

    with pytest.raises(OptionsError) as caught:
        evaluate({"q1": {"d1": 1.0}}, QRELS, measure=["AP"])
    assert str(caught.value) == ("gapbench.evaluate: measure is not a setting (did you mean 'measures'?); accepted "
                                 "settings: measures, options, task, n_resamples, seed, depth.")
    with pytest.raises(OptionsError) as caught:
        RunOptions(measure=["AP"])
    assert re.fullmatch(r"RunOptions: measure is not a setting of gapbench\.run \(did you mean 'measures'\?\); "
                        r"accepted settings: measures, k, .*\.", str(caught.value))
    with pytest.raises(OptionsError) as caught:
        get_retriever("bm25:kl=1")
    assert str(caught.value).startswith("retriever bm25: kl is not a setting (did you mean 'k1'?); accepted settings: "
                                        "k1, b, ")


def test_run_json_is_the_results_document(tmp_path):
    """``Model.dump`` is the one serialiser: a results document read back dumps to itself."""
    from gapbench import evaluate
    from gapbench.schemas import RunResults

    res = evaluate({"q1": {"d1": 2.0, "d2": 1.0}, "q9": {"d1": 1.0}}, QRELS, ["RR@10"], n_resamples=50)
    doc = res.dump()
    assert json.loads(json.dumps(doc)) == doc
    assert (doc["n_queries"], doc["n_missing"], doc["n_unjudged"]) == (2, 1, 1)
    assert doc["measures"] == {"RR@10": 0.5} and len(doc["ci95"]["RR@10"]) == 2
    assert RunResults.model_validate(doc).dump() == doc


# ---------------------------------------------------------------- dense: a model folder, and the CPU's faster path

def test_a_model_folder_that_cannot_be_loaded_is_named_in_one_line(tmp_path):
    from gapbench.errors import GapbenchError
    from gapbench.retrieval import get_retriever
    from gapbench.types import Corpus, Document

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "nope_type"}')  # transformers: a ValueError, not an OSError
    dense = get_retriever(f"dense:model={folder},cache=false")
    with pytest.raises(GapbenchError) as caught:
        dense.index(Corpus([Document("d1", "a cat")]))
    said = str(caught.value)
    assert said.startswith(f"dense: cannot load model '{folder}': ValueError: The checkpoint you are trying to load "
                           "has model type `nope_type`")
    assert "\n" not in said and "give a local path with dense:model=" in said


def test_the_cpu_hint_names_openvino_past_a_minute():
    from gapbench.adapters._dense_hints import cpu_hint

    # 2 threads encode 4,720 tokens (18,880 characters) a second with torch: 60 s is 1,132,800 characters
    assert cpu_hint("dense", 1_132_000, 2) is None
    assert cpu_hint("dense", 1_133_000, 2) == (
        "dense: encoding on the CPU with torch takes at least a minute here; dense:backend=openvino gives the same "
        "vectors 1.58x faster (bfloat16 3x, benchmarks/results/bench_onnx_cpu.txt; pip install 'gapbench[openvino]')")
    assert cpu_hint("dense", 18_880 * 60 * 10, 2).startswith("dense: encoding on the CPU with torch takes at least "
                                                             "10 minutes here")


def test_the_report_is_titled_by_the_task_and_its_html_shows_code_as_code():
    from gapbench.products.report_render import _html_text, task_name

    assert [task_name(t) for t in ("/home/me/data/scifact:split=dev", "./runs/../cacm", "beir/scifact",
                                   "irds:vaswani")] == ["scifact:split=dev", "cacm", "beir/scifact", "irds:vaswani"]
    assert _html_text("rerun with `--k 100` <b>") == "rerun with <code>--k 100</code> &lt;b&gt;"


def test_a_code_span_from_data_cannot_be_ended_by_it():
    from gapbench.tables import md_code

    assert [md_code(t) for t in ("bm25", "a`b", "`x`", "a``b\nc")] == ["`bm25`", "``a`b``", "`` `x` ``", "```a``b c```"]
    # in a table the pipes are the table's to escape: GitHub reads \| inside a code span of a cell as a pipe
    row = Table(["id", "note"], [[md_code("x`| forged |"), md_escape("ok")]]).markdown().splitlines()[2]
    assert row == "| ``x`\\| forged \\|`` | ok |"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_numbers_of_input_files_are_finite(value):
    from pydantic import ValidationError

    from gapbench.schemas import RunResults

    with pytest.raises(ValidationError, match="finite number"):
        RunResults(system="s", n_queries=1, measures={"AP": value})
    with pytest.raises(ValidationError, match="finite number"):
        RunResults(system="s", n_queries=1, measures={"AP": 0.5}, ci95={"AP": [0.1, value]})
    with pytest.raises(ValidationError, match="finite number"):
        literal = "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"  # pydantic's JSON reads them
        RunResults.model_validate_json('{"system": "s", "n_queries": 1, "measures": {"AP": %s}}' % literal)


# ---------------------------------------------------------------- a matrix and a suite.toml that are not TOML

HOSTILE_TOML = [
    (b'[[row]]\nid = "\xff\xfe"\n', "is not UTF-8 text (byte 14, 0xff)", ", line 2: "),
    (b"x = " + b"[" * 10_000 + b"]" * 10_000 + b"\n", "is nested more than 32 levels deep", ": "),
    (b'name = "mine"\nmeasure = "nDCG@10"\nalpha = nan\n', "holds nan at 'alpha', which is not a finite number", ": "),
]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("gapbench: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("data, said, where", HOSTILE_TOML, ids=["binary", "nested", "nan"])
def test_a_matrix_that_is_not_toml_is_one_line_naming_it(tmp_path, capsys, data, said, where):
    from gapbench.cli import main

    path = tmp_path / "matrix.toml"
    path.write_bytes(data)
    assert main(["reproduce", "--matrix", str(path), "--list"]) == 2
    err = _one_error_line(capsys)
    assert f"{path}{where}{said}" in err


@pytest.mark.parametrize("data, said, where", HOSTILE_TOML, ids=["binary", "nested", "nan"])
def test_a_suite_file_that_is_not_toml_is_one_line_naming_it(tmp_path, capsys, data, said, where):
    from gapbench.cli import main

    board = tmp_path / "lb" / "mine"
    (board / "submissions" / "x").mkdir(parents=True)
    (board / "submissions" / "x" / "submission.json").write_text("{}")
    (board / "suite.toml").write_bytes(data)
    assert main(["leaderboard", "build", "--root", str(tmp_path / "lb")]) == 2
    err = _one_error_line(capsys)
    assert f"{board / 'suite.toml'}{where}{said}" in err


def test_a_suite_measure_is_stored_and_read_under_the_name_results_key_it_by(tmp_path):
    from gapbench.products.board_suites import init_suite, read_suite_file

    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text('{"_id": "d1", "text": "a cat"}\n{"_id": "d2", "text": "a dog"}\n')
    (data / "queries.jsonl").write_text('{"_id": "q1", "text": "cat"}\n')
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    file = init_suite(tmp_path / "board", [str(data)], measure="map")
    text = Path(file).read_text()
    assert 'measure = "AP"' in text.splitlines()
    assert read_suite_file(tmp_path / "board").measure == "AP"
    # a suite.toml written by hand under another spelling is read under the one name
    Path(file).write_text(text.replace('measure = "AP"', 'measure = "ndcg_cut_10"'))
    assert read_suite_file(tmp_path / "board").measure == "nDCG@10"


# ---------------------------------------------------------------- Markdown from matrix rows

HOSTILE_TEXT = "a `tick` | pipe\n| forged | row | <script>alert(1)</script>"


def _matrix_rows():
    from gapbench.schemas.reproduce import MatrixRow

    common = dict(task="impliret/multispeaker/wknow", measure="nDCG@10", published=0.152, tolerance=0.0005,
                  data_here=False, grade="not run")
    return [MatrixRow(id="ok/bm25", retriever="bm25", source="plain source", note="plain note", **common),
            MatrixRow(id=HOSTILE_TEXT, retriever="bm25:k1=`0.9`|b", reranker="x|y", source=HOSTILE_TEXT,
                      note=HOSTILE_TEXT, **common)]


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_matrix_markdown_from_hostile_rows_keeps_one_row_per_row(tmp_path):
    from gapbench.products.reproduce_render import HEAD, reference_markdown, write_matrix
    from gapbench.schemas.reproduce import ReproduceCounts, ReproduceReport

    rows = _matrix_rows()
    report = ReproduceReport(matrix="m.toml", gapbench_version="1", date="2026-01-01",
                             counts=ReproduceCounts(not_run=2), rows=rows)
    text = (write_matrix(report, tmp_path / "out") / "matrix.md").read_text()
    table = _table_lines(text)
    assert len(table) == 2 + len(rows)  # head, rule, one line per row: nothing forged
    assert all(_unescaped_pipes(line) == len(HEAD) + 2 for line in table)  # HEAD and the note column
    # the id's <script> stays inside its code spans (table and sources), where Markdown shows it as text
    assert text.count("<script>") == 2 and not any("| forged |" in line for line in table)
    hostile = table[3]
    assert hostile.startswith("| ``a `tick` \\| pipe \\| forged \\| row \\| <script>alert(1)</script>`` | "
                              "``bm25:k1=`0.9`\\|b`` >> `x\\|y` | nDCG@10 |")
    assert hostile.endswith("| not run | - | a &#96;tick&#96; &#124; pipe &#124; forged &#124; row &#124; "
                            "&#60;script&#62;alert(1)&#60;/script&#62; |")
    sources = [line for line in text.splitlines() if line.startswith("- ")]
    assert sources[1] == ("- ``a `tick` | pipe | forged | row | <script>alert(1)</script>``: a &#96;tick&#96; &#124; "
                          "pipe &#124; forged &#124; row &#124; &#60;script&#62;alert(1)&#60;/script&#62;")
    assert len(sources) == len(rows)
    # the board README's reference section is the same table, without the note
    ref = _table_lines(reference_markdown(rows))
    assert len(ref) == 2 + len(rows) and all(_unescaped_pipes(line) == len(HEAD) + 1 for line in ref)
    # ordinary text is left as it is: the committed board and docs/reproduce.md keep their bytes
    assert table[2] == ("| `ok/bm25` | `bm25` | nDCG@10 | 0.1520 | - | - | 0.0005 | not run | - | plain note |")


# ---------------------------------------------------------------- compare --json is the comparison's one document

def test_compare_json_holds_the_mde_and_every_number_the_table_prints(tmp_path, capsys):
    import gapbench
    from gapbench.cli import main
    from gapbench.evaluation.comparison import compare_run_dirs

    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    docs = {f"d{i}": f"{'cat' if i % 2 else 'dog'} {'cat ' * (i % 3)}item {i}" for i in range(8)}
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in docs.items()))
    (data / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": t}) + "\n"
                                                for i, t in enumerate(["cat", "dog item", "cat item 3", "dog 4"])))
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td1\t1\nq1\td2\t1\nq2\td3\t1\n"
                                             "q3\td4\t1\n")
    dirs = [tmp_path / "a", tmp_path / "b"]
    gapbench.run(str(data), "bm25", measures=["nDCG@10", "RR@10"], output=dirs[0])
    gapbench.run(str(data), "bm25:k1=0.1,b=0.1", measures=["nDCG@10", "RR@10"], output=dirs[1])
    cmp = compare_run_dirs(dirs, ["nDCG@10", "RR@10"])
    capsys.readouterr()
    assert main(["compare", *map(str, dirs), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads(json.dumps(cmp.dump()))
    assert [m["measure"] for m in out["mde"]] == ["nDCG@10", "RR@10"]
    assert [m["mde"] for m in out["mde"]] == [m.mde for m in cmp.mde] and out["mde"][0]["n"] == 4
    table = str(cmp)
    for system in out["systems"]:  # each mean and CI end the table shows is the JSON's, rounded as printed
        for m, mean in system["measures"].items():
            lo, hi = system["ci95"][m]
            assert f"{mean:.4f} [{lo:.3f},{hi:.3f}]" in table
    for m in out["mde"]:
        assert (f"{m['measure']} {m['mde']:.4f}" if m["mde"] is not None else f"{m['measure']} none") in table


def test_board_readme_from_hostile_names_keeps_one_row_per_system():
    from test_leaderboard import _entry

    from gapbench.products.reproduce_render import reference_markdown
    from gapbench.schemas.leaderboard import Leaderboard

    tasks = ("s/a|b `c`\n<script>", "s/t_1")
    entries = [_entry("bm25", 1, {tasks[0]: 0.1, tasks[1]: 0.3}, 0.2), _entry("dense", 2, {tasks[0]: 0.05}, None)]
    board = Leaderboard(kind="leaderboard", task="s", version=1, suite="s", tasks=list(tasks),
                        main_measures={t: "nDCG@10" for t in tasks}, alpha=0.05, n_resamples=1000,
                        n_permutations=10_000, seed=0, entries=entries, tests=[])
    readme = board.to_markdown() + "\n" + reference_markdown(_matrix_rows())  # as the board writes its README.md
    table = _table_lines(readme)
    # standings: head, rule, 2 systems; reference rows: head, rule, 2 rows
    assert len(table) == 4 + 4
    assert all(_unescaped_pipes(line) == 7 for line in table[:4])
    assert table[0] == ("| Rank | System | Full Benchmark Avg. [95% CI] | Rank stability | "
                        "a&#124;b &#96;c&#96; &#60;script&#62; | t_1 |")
    assert "<script>" not in board.to_markdown()
