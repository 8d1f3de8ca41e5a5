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

# What the trec_eval 10.0-rc3 build prints for `trec_eval -J -m num_ret -m map -m P.10 qrels.test results.test` and
# `trec_eval -N 100000 -m utility.1,-1,0,1 qrels.test results.test`
JUDGED_ONLY = ("num_ret               \tall\t738\n"
               "map                   \tall\t0.1848\n"
               "P_10                  \tall\t0.3000\n")
UTILITY_N = "utility_1,-1,0,1      \tall\t98944.0000\n"


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


def test_the_page_s_tables_are_the_code_s():
    """docs/trec-eval.md's tables of flags and measures are made from the code's tables (trec_eval_run.doc_tables):
    regenerated here, they equal the page (`python -m gapbench.evaluation.trec_eval_run docs/trec-eval.md` rewrites
    them)."""
    from gapbench.evaluation import trec_eval_run

    page = (Path(__file__).resolve().parents[1] / "docs" / "trec-eval.md").read_text(encoding="utf-8")
    tables = trec_eval_run.doc_tables()
    assert tables in page
    # every family trec_eval's measure table has, and every flag trec_eval.c reads, is on the page
    from gapbench import trec_names
    from gapbench.cli import trec_eval_command

    for name in (*trec_names.NAMES, *trec_names.TEXTS, *trec_names.UNSUPPORTED):
        assert f"`{name}`" in tables, name
    for short in trec_eval_command.SHORT.replace(":", ""):
        assert f"`-{short}" in tables or f"-{short}`" in tables or f", -{short}" in tables, short


def test_options_as_trec_eval_s_getopt_reads_them(capsys, monkeypatch):
    monkeypatch.chdir(HERE)
    want = _run(capsys, "-q", "-c", "-M", "100", "-m", "map", "qrels.test", "results.trunc")
    # joined short flags, a value glued on, long forms, options after the files: the same lines
    for argv in (["-qc", "-M100", "-mmap", "qrels.test", "results.trunc"],
                 ["--query_eval_wanted", "--complete_rel_info_wanted", "--Max_retrieved_per_topic=100",
                  "--measure", "map", "qrels.test", "results.trunc"],
                 ["qrels.test", "results.trunc", "-q", "-c", "-M100", "-m", "map"]):
        assert _run(capsys, *argv) == want
    assert want[1].splitlines()[-1] == "map                   \tall\t0.0947"  # out.test.aqcM's map all row
    assert "map                   \tall\t0.0947" in (HERE / "out.test.aqcM").read_text(encoding="utf-8")


def test_no_summary_judged_only_and_collection_size(capsys, monkeypatch):
    """-n, -J and -N on trec_eval's files; the expected lines are the trec_eval 10.0-rc3 build's output for the
    same commands."""
    monkeypatch.chdir(HERE)
    code, out, _ = _run(capsys, "-n", "-q", "-m", "num_ret", "-m", "P.10", "qrels.test", "results.test")
    assert code == 0 and "\tall\t" not in out and out.count("\n") == 6
    code, out, _ = _run(capsys, "-n", "-m", "map", "qrels.test", "results.test")
    assert (code, out) == (0, "")
    code, out, _ = _run(capsys, "-J", "-m", "num_ret", "-m", "map", "-m", "P.10", "qrels.test", "results.test")
    assert out == JUDGED_ONLY
    code, out, _ = _run(capsys, "-N", "100000", "-m", "utility.1,-1,0,1", "qrels.test", "results.test")
    assert out == UTILITY_N


def test_what_gapbench_trec_eval_refuses_in_one_line(capsys, monkeypatch):
    monkeypatch.chdir(HERE)
    for argv, said in ((["-l0", "qrels.test", "results.test"], "-l 0: gapbench evaluates relevance levels from 1"),
                       (["-R", "prefs", "qrels.test", "results.test"], "reads qrels only"),
                       (["-m", "yaap", "qrels.test", "results.test"], "illegal measure 'yaap'"),
                       (["qrels.test"], "takes two files"),
                       (["-x", "qrels.test", "results.test"], "no such option '-x'")):
        code, out, err = _run(capsys, *argv)
        assert code == 2 and out == "" and said in err and err.count("\n") == 1, (argv, err)


def test_a_query_the_run_lacks_is_trec_eval_s_stand_in(capsys, monkeypatch):
    """-c evaluates a query the run lacks (302 in results.trunc) on trec_eval.c's stand-in ranking of one document the
    qrels do not hold, then resets num_ret, utility, rbp_resid, unj_* and relstring by their exact printed names: a
    parameterised utility or rbp_resid keeps the stand-in's value, relstring_4 its '-'; with -J the stand-in is
    dropped, and an empty ranking's iprec_at_recall is trec_eval's 0/0. Expected: the trec_eval 10.0-rc3 build's
    lines for the same commands."""
    monkeypatch.chdir(HERE)
    _, out, _ = _run(capsys, "-q", "-c", "-m", "utility.2,-1,0,0", "-m", "utility", "-m", "relstring.4", "-m",
                     "rbp_resid.p=0.5", "-m", "unj.5", "qrels.test", "results.trunc")
    assert [line for line in out.splitlines() if "\t302\t" in line or "\tall\t" in line] == [
        "relstring_4           \t302\t'-'",
        "utility_2,-1,0,0      \t302\t-1.0000",
        "rbp_resid_p=0.5       \t302\t1.0000",
        "unj_5                 \t302\t0.0000",
        "utility_2,-1,0,0      \tall\t-118.0000",
        "rbp_resid_p=0.5       \tall\t0.3334",
        "unj_5                 \tall\t0.0000",
    ]
    _, out, _ = _run(capsys, "-q", "-c", "-J", "-m", "iprec_at_recall.0,0.5", "-m", "relstring.4", "qrels.test",
                     "results.trunc")
    assert [line for line in out.splitlines() if "\t302\t" in line] == [
        "iprec_at_recall_0.00  \t302\t  -nan", "iprec_at_recall_0.50  \t302\t0.0000", "relstring_4           \t302\t''"]


def test_ci_column_is_the_bootstrap_of_the_per_query_values(capsys, monkeypatch):
    """--ci: each mean's all line gets its 95% percentile-bootstrap CI over the queries (a geometric mean's is exp
    of its logs' interval); a count's line (a sum) keeps three columns, and the first three columns are trec_eval's."""
    import math

    from gapbench.evaluation import trec_eval_run
    from gapbench.evaluation.stats import bootstrap_cis
    from gapbench.formats import read_qrels, read_trec_run

    monkeypatch.chdir(HERE)
    code, out, err = _run(capsys, "--ci", "--seed", "3", "-m", "map", "-m", "gm_map", "-m", "num_ret", "qrels.test",
                          "results.test")
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert [cols[:3] for cols in lines] == [line.split("\t") for line in (HERE / "out.test.a").read_text(
        encoding="utf-8").splitlines() if line.split("\t")[0].rstrip() in ("num_ret", "map", "gm_map")]
    result = trec_eval_run.run_trec_eval(read_trec_run(HERE / "results.test"), read_qrels(HERE / "qrels.test"),
                                         ["map", "gm_map"])
    cis = bootstrap_cis({n: list(v.values()) for n, v in result.per_query.items()}, seed=3)
    by_name = {cols[0].rstrip(): cols for cols in lines}
    assert len(by_name["num_ret"]) == 3
    assert by_name["map"][3] == f"[{cis['map'][0]:.4f}, {cis['map'][1]:.4f}]"
    assert by_name["gm_map"][3] == f"[{math.exp(cis['gm_map'][0]):.4f}, {math.exp(cis['gm_map'][1]):.4f}]"
    lo, hi = (float(x) for x in by_name["map"][3].strip("[]").split(", "))
    assert 0.0324 <= lo < float(by_name["map"][2]) < hi <= 0.4175  # within the per-query values (out.test.aq)
