"""`gapbench trec_eval`, the drop-in: every case of trec_eval's `make quicktest` that reads trec_eval's qrels and run
formats, run with trec_eval's own argument syntax, prints trec_eval's expected output byte for byte (the files and their
checksums: tests/fixtures/trec_eval/PROVENANCE.md, checked by test_trec_eval_compat.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gapbench.cli import main

HERE = Path(__file__).resolve().parent / "fixtures" / "trec_eval"
MEAS_PARAMS = ["-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000", "-m",
               "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75", "-mndcg.1=3,2=9,4=4.5",
               "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20"]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["trec_eval", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# trec_eval's Makefile, target quicktest: each command and the file it diffs the output against
@pytest.mark.parametrize("expected, argv", [
    ("out.test", ["qrels.test", "results.test"]),
    ("out.test.a", ["-m", "all_trec", "qrels.test", "results.test"]),
    ("out.test.aq", ["-m", "all_trec", "-q", "qrels.test", "results.test"]),
    ("out.test.aqc", ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"]),
    ("out.test.aqcM", ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"]),
    ("out.test.aql", ["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"]),
    ("out.test.meas_params", ["-q", *MEAS_PARAMS, "qrels.test", "results.test"]),
    ("out.test", ["qrels.test.with-comments", "results.test"]),
    ("out.test.aqZ", ["-q", "-m", "all_trec", "-Z", "zscores_file", "qrels.test", "results.test"]),
])
def test_quicktest_byte_for_byte(capsys, monkeypatch, expected, argv):
    monkeypatch.chdir(HERE)
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert out == (HERE / expected).read_text(encoding="utf-8")


def test_compare_shows_gm_map_and_counts_as_trec_eval_s_all_row():
    """`gapbench compare`'s table: gm_map is exp of the mean of its per-query logs and num_nonrel_judged_ret the sum
    over the queries, as trec_eval's all row prints them (out.test.a: gm_map 0.1051 on results.test)."""
    from gapbench import compare
    from gapbench.formats import read_qrels, read_trec_run

    qrels = read_qrels(HERE / "qrels.test")
    run = read_trec_run(HERE / "results.test")
    other = read_trec_run(HERE / "results.trunc").renamed("trunc")
    table = str(compare([run, other], qrels, ["gm_map", "num_nonrel_judged_ret"], n_permutations=100))
    row = next(line for line in table.splitlines() if "STANDARD" in line)
    # out.test.a: gm_map 0.1051, num_nonrel_judged_ret 607 (a sum over the 3 queries, not their mean of 202.3)
    assert "0.1051 [" in row and "607.0000 [" in row, table
