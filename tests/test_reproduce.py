"""gapbench reproduce: the shipped matrix of published results, its offline rows re-run and graded (this is the CI
run of those rows), the --data path against `gapbench run`, the files it writes, the docs page, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gapbench.cli import main
from gapbench.products.reproduce import (
    ReproduceOptions,
    grade,
    load_matrix,
    matrix_path,
    reproduce,
    select,
)
from gapbench.products.reproduce_render import (
    PAGE_END,
    PAGE_START,
    page_section,
    reference_html,
    reference_markdown,
    with_section,
)
from gapbench.schemas import ReproduceReport, load_file
from gapbench.tasks.bright import PUBLISHED_BM25_NDCG10 as BRIGHT_PUBLISHED
from gapbench.tasks.impliret import PUBLISHED_BM25_NDCG10 as IMPLIRET_PUBLISHED

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / "tests" / "fixtures" / "beir" / "scifact"
FAMILIES = {"beir", "bright", "impliret", "rarb", "obliq"}
# gapbench's bm25 nDCG@10 on the six ImpliRet sets (docs/tasks/impliret.md: 14.16 15.18 14.05 8.07 10.20 11.76 x100)
IMPLIRET_MEASURED = {"unispeaker/wknow": 0.1416, "multispeaker/wknow": 0.1518, "unispeaker/arithmetic": 0.1405,
                     "multispeaker/arithmetic": 0.0807, "unispeaker/temporal": 0.1020,
                     "multispeaker/temporal": 0.1176}


# ---------------------------------------------------------------------------------------------------- the matrix

def test_matrix_has_forty_rows_over_the_five_families_each_with_source_and_tolerance():
    rows = load_matrix()
    assert len(rows) >= 40
    assert {r.task.split("/", 1)[0] for r in rows} == FAMILIES
    assert len({r.id for r in rows}) == len(rows)
    for r in rows:
        # Anserini's rule grades BM25 with tolerance 0 (a match at four decimals or above); gapbench's needs a tolerance
        assert r.source and (r.tolerance > 0 or r.rule == "anserini") and 0 <= r.published <= 1, r.id
        assert r.id.startswith(r.task.split(":", 1)[0] + "/"), r.id


def test_matrix_values_are_the_ones_the_task_modules_cite():
    rows = {r.id: r for r in load_matrix()}
    for (config, split), value in IMPLIRET_PUBLISHED.items():
        assert rows[f"impliret/{config}/{split}/bm25"].published == pytest.approx(value / 100, abs=1e-9)
    for domain, value in BRIGHT_PUBLISHED["paper"].items():
        assert rows[f"bright/{domain}/bm25-paper"].published == pytest.approx(value / 100, abs=1e-9)
    for domain, value in BRIGHT_PUBLISHED["pyserini_bm25qs"].items():
        assert rows[f"bright/{domain}/bm25qs-pyserini"].published == pytest.approx(value / 100, abs=1e-9)
    # Anserini's SciFact regression pages (flat 0.6789, multifield 0.6647) at the commit the rows cite
    assert rows["beir/scifact/bm25-flat"].published == 0.6789
    assert rows["beir/scifact/bm25-multifield"].published == 0.6647
    assert "81e3414573a39ad7433d271c5cadc360bc821945" in rows["beir/scifact/bm25-flat"].source
    # OBLIQ-Bench Table 3: Math BM25 NDCG@10 .022 (G) and .029 (P)
    assert rows["obliq/math/bm25-okapi-gold"].published == 0.022
    assert rows["obliq/math/bm25-okapi-pool"].task == "obliq/math:qrels=pool"


@pytest.mark.parametrize("delta,tolerance,expected", [
    (0.0, 0.01, "OK"), (0.01, 0.01, "OK"), (-0.01, 0.01, "OK"), (0.0101, 0.01, "OKish"), (-0.02, 0.01, "OKish"),
    (0.0201, 0.01, "FAIL"), (-0.5, 0.01, "FAIL"),
])
def test_gapbench_rule_is_symmetric_with_okish_at_twice_the_tolerance(delta, tolerance, expected):
    assert grade(delta, tolerance) == expected


def test_only_matches_ids_and_tasks():
    rows = load_matrix()
    assert [r.id for r in select(rows, ["beir/scifact/*"])] == ["beir/scifact/bm25-flat", "beir/scifact/bm25-multifield"]
    assert len(select(rows, ["impliret/*"])) == 6
    assert [r.id for r in select(rows, ["obliq/math:qrels=pool"])] == ["obliq/math/bm25-okapi-pool",
                                                                       "obliq/math/bm25-okapi-pool-r100"]


# ---------------------------------------------------------------------------------------------------- the command

def test_list_shows_every_row_and_where_its_data_is(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    n = len(load_matrix())
    assert f"{n} rows over beir, bright, impliret, obliq, rarb; 6 with their data on this machine" in out
    lines = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.startswith(("impliret/", "beir/"))}
    assert lines["impliret/multispeaker/wknow/bm25"] == "yes" and lines["beir/scifact/bm25-flat"] == "no"


def test_list_json_and_data_make_a_row_local(capsys, tmp_path):
    folder = tmp_path / "scifact"
    shutil.copytree(SCIFACT, folder)
    assert main(["reproduce", "--list", "--json", "--only", "beir/scifact/*", "--data", f"beir/scifact={folder}"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["data_here"]) for r in rows] == [("beir/scifact/bm25-flat", True),
                                                         ("beir/scifact/bm25-multifield", True)]


@pytest.fixture(scope="module")
def impliret_run(once_per_session):
    """`gapbench reproduce --only 'impliret/*' --offline -o DIR`, run once in the whole session (``once_per_session``,
    tests/fx_models.py): its exit code and DIR, which the tests read (a test that runs it again copies DIR)."""

    def make(folder: Path) -> None:
        code = main(["reproduce", "--only", "impliret/*", "--offline", "-o", str(folder / "out")])
        (folder / "code").write_text(str(code))

    folder = once_per_session("reproduce-impliret", make)
    return int((folder / "code").read_text()), folder / "out"


def test_impliret_rows_grade_ok_offline_and_matrix_json_has_the_fields(impliret_run):
    code, out = impliret_run
    assert code == 0
    data = json.loads((out / "matrix.json").read_text())
    report = load_file(out / "matrix.json")  # the reproduce schema, found by the file's kind
    assert isinstance(report, ReproduceReport)
    assert len(data["rows"]) == 6 and data["counts"] == {"OK": 6, "OKish": 0, "FAIL": 0, "not_run": 0,
                                                         "not_comparable": 0, "non_discriminating": 0, "failing": 0}
    for row in data["rows"]:
        assert {"id", "task", "retriever", "measure", "published", "source", "tolerance", "measured", "delta",
                "grade"} <= set(row)
        key = row["task"].removeprefix("impliret/")
        assert row["grade"] == "OK" and row["retriever"] == "bm25" and row["measure"] == "nDCG@10"
        assert row["measured"] == pytest.approx(IMPLIRET_MEASURED[key], abs=5e-5)
        assert row["delta"] == pytest.approx(row["measured"] - row["published"], abs=1e-12)
        assert abs(row["delta"]) <= row["tolerance"] and not row["cached"] and row["counted"]
        assert (Path(row["run_dir"]) / "run.trec.gz").is_file()
    md = (out / "matrix.md").read_text()
    assert "6 rows: 6 OK, 0 OKish, 0 FAIL, 0 not run, 0 not comparable; 0 floor rows" in md and "## Sources" in md
    # Anserini grades BM25 by an exact match at four decimals: 0.1518 against 0.1520 is its FAIL
    assert "`impliret/multispeaker/wknow/bm25` (OK by gapbench's, FAIL by Anserini's)" in md
    page = (out / "matrix.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "impliret/multispeaker/wknow/bm25" in page
    assert "<script" not in page and "src=" not in page and "<link" not in page  # self-contained


def test_second_reproduce_reads_the_runs_back(impliret_run, capsys, tmp_path):
    out = tmp_path / "repro"
    shutil.copytree(impliret_run[1], out)
    stamps = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/run.trec.gz")}
    assert len(stamps) == 6
    assert main(["reproduce", "--only", "impliret/*", "--offline", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("(cached)") == 6 and "gapbench: reproduce [6/6] " in err
    assert all(r["cached"] for r in json.loads((out / "matrix.json").read_text())["rows"])
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing was run again


def test_docs_page_is_generated_from_the_matrix(impliret_run):
    _, out = impliret_run
    measured = {r.id: r for r in ReproduceReport.model_validate_json((out / "matrix.json").read_text()).rows}
    from gapbench.products.reproduce import listing

    rows = [measured.get(r.id, r) for r in listing(ReproduceOptions())]
    page = (ROOT / "docs" / "reproduce.md").read_text()
    expected = with_section(page, page_section(rows))
    assert page == expected, ("docs/reproduce.md is stale; regenerate it with "
                              "gapbench.products.reproduce.update_page('docs/reproduce.md')")
    section = page[page.index(PAGE_START):page.index(PAGE_END)]
    assert ("| `impliret/multispeaker/wknow/bm25` | `bm25` | nDCG@10 | 0.1520 | 0.1518 | -0.0002 | 0.0005 | OK | FAIL |"
            in section)
    assert ("| `beir/scifact/bm25-flat` | `bm25-lucene:ties=anserini` | nDCG@10 | 0.6789 | - | - | 0 | not run | - |"
            in section)
    assert ("| `obliq/twitter/bm25-okapi-gold` | `bm25-okapi` | nDCG@10 | 0.0000 | - | - | 0.005 | not run (floor) "
            "| - |") in section
    assert "Measured rows graded differently under the two rules: `impliret/" in section
    for row in load_matrix():
        assert f"- `{row.id}`: " in section  # every row's source is on the page


def test_reference_rows_for_a_board(impliret_run, tmp_path):
    """A board shows the rows of its tasks from the matrix.json that `reproduce -o` wrote (as <suite>/reference.json)."""
    import shutil

    from gapbench.products.leaderboard import reference_rows

    _, out = impliret_run
    shutil.copy(out / "matrix.json", tmp_path / "reference.json")
    rows = reference_rows(tmp_path, ["impliret/multispeaker/wknow", "beir/scifact"])
    assert [(r.id, r.grade) for r in rows] == [("impliret/multispeaker/wknow/bm25", "OK")]
    fragment = reference_html(rows)
    assert "Reference rows" in fragment and ">0.1520<" in fragment and ">OK</span>" in fragment
    assert "| `impliret/multispeaker/wknow/bm25` | `bm25` | nDCG@10 | 0.1520 | 0.1518 |" in reference_markdown(rows)
    assert reference_html([]) == "" and reference_markdown([]) == ""


def test_beir_row_through_data_gives_what_gapbench_run_gives(tmp_path, capsys):
    folder = tmp_path / "beir" / "scifact"
    shutil.copytree(SCIFACT, folder)
    assert main(["run", str(folder), "-r", "bm25-lucene", "-m", "nDCG@10", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)["measures"]["nDCG@10"]
    # the fixture is hand-written, not SciFact: refused (tests/test_reproduce_identity.py), so run --ungraded
    code = main(["reproduce", "--only", "beir/scifact/bm25-flat", "--data", f"beir/scifact={folder}", "--ungraded",
                 "-o", str(tmp_path / "out")])
    assert code == 0
    capsys.readouterr()
    row = json.loads((tmp_path / "out" / "matrix.json").read_text())["rows"][0]
    assert row["measured"] == expected and row["data_here"] and row["grade"] == "not comparable"
    # the family form names the folder that holds the unzipped sets
    assert main(["reproduce", "--only", "beir/scifact/bm25-flat", "--data", f"beir={tmp_path / 'beir'}",
                 "--ungraded", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["measured"] == expected


def test_a_row_without_its_data_is_not_run_and_says_how(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GAPBENCH_DATA_OBLIQ", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["reproduce", "--only", "obliq/math/bm25-okapi-gold", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["grade"] == "not run" and row["measured"] is None and "--data obliq/math=DIR" in row["why"]


# ---------------------------------------------------------------------------------------------------- bad input

def _bad_matrix(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


ROW = ('[[row]]\nid = "impliret/multispeaker/wknow/x"\ntask = "impliret/multispeaker/wknow"\nretriever = "{r}"\n'
       'measure = "nDCG@10"\npublished = 0.152\ntolerance = 0.0005\nsource = "test"\n')


@pytest.mark.parametrize("args,message", [
    (["--only", "nothing/*"], ("no row id or task of the matrix matches the pattern 'nothing/*' (only); the rows "
                               "start with beir/")),
    (["--data", "beir/scifact"], "--data 'beir/scifact' is not TASK=DIR"),
    (["--data", "impliret=."], "names 'impliret', whose data cannot be given as a folder"),
    (["--data", "beir/scifact=/no/such/folder"], "gives beir/scifact=/no/such/folder, which is not a folder"),
    (["--only", ""], "--only holds an empty pattern"),
])
def test_bad_input_exits_2_with_one_line(args, message, capsys):
    assert main(["reproduce", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gapbench: error: ") and message in err, err


def test_a_row_naming_an_unknown_retriever_exits_2(tmp_path, capsys):
    path = _bad_matrix(tmp_path, ROW.format(r="bm26"))
    assert main(["reproduce", "--matrix", str(path), "--offline"]) == 2
    err = capsys.readouterr().err
    assert "row 'impliret/multispeaker/wknow/x' names the retriever 'bm26': unknown retriever 'bm26'. Did you mean " \
           "'bm25'" in err and err.count("\n") == 1


def test_a_malformed_matrix_names_the_file_and_row(tmp_path, capsys):
    path = _bad_matrix(tmp_path, ROW.format(r="bm25").replace("tolerance = 0.0005", "tolerance = -1.0"))
    assert main(["reproduce", "--matrix", str(path), "--list"]) == 2
    err = capsys.readouterr().err
    assert (f"{path}: row 1 ('impliret/multispeaker/wknow/x'): the row: Value error, tolerance is -1.0; it must be "
            "above 0 and below 0.05 (rule gapbench)") in err
    path = _bad_matrix(tmp_path, "[[row]\n")
    assert main(["reproduce", "--matrix", str(path), "--list"]) == 2
    assert "malformed TOML" in capsys.readouterr().err


def test_library_options_name_fields():
    from gapbench.errors import OptionsError

    with pytest.raises(OptionsError, match="data"):
        ReproduceOptions(data={"impliret": "."})
    assert matrix_path().name == "matrix.toml" and matrix_path().is_file()
    from gapbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"no row id or task of the matrix matches the pattern 'zzz' \(only\)"):
        reproduce(ReproduceOptions(only=["zzz"]))
