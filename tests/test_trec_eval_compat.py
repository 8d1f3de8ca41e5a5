"""`gapbench evaluate` against trec_eval's own expected outputs, line by line, on trec_eval's test files.

The files under tests/fixtures/trec_eval/ are trec_eval's (see PROVENANCE.md there): its qrels, its run, and what
`trec_eval -m all_trec [-q] [-c]` prints for them. Every measure line is compared as printed (name column, query,
value formatting), trec_eval 10's values on every line (iprec_at_recall included: gapbench computes it by trec_eval
10's rule, tests/test_trec_eval_measures.py shows where pytrec_eval differs), and trec_eval's text lines (runid,
relstring) too: no line of trec_eval's output is skipped.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gapbench import trec_names
from gapbench.cli import main

HERE = Path(__file__).resolve().parent / "fixtures" / "trec_eval"
CHECKSUMS = {
    "qrels.test": "6c44a070a10bfb14b123cadc597227fc63c1acec109bc6d1e5a6bc4763906698",
    "results.test": "69019319f6cb9ce861b4ad08d90898170d3d2b27da580fb3cba59e557ff2fd20",
    "results.trunc": "4a85d6b7b21b69b59728fa0aa7452199640f70d96529b86d0cca8f9c9292e438",
    "out.test": "eec0abb32bfb99fa78d239a3440b2c6cb01b06dead7e2338fd75b5c280d9eba0",
    "out.test.a": "8fd8f08c0b5c9064dc955263dc98ceed34b6d7421ebef363be0043256ccb1d68",
    "out.test.aq": "6e884d1ab060f5cede2e85490fb1f62e6ca664b8da99e7a8dfffeedefe9433eb",
    "out.test.aqc": "c4872c36186a26756867131a5dfe2c3e2aff001e1e9288a8584c5f4380b6ffc7",
    "v9/out.test": "9c79bbca63d26cbc4990bd8e2c39482dedaaa07f99363028f939f8a4c8d1dff6",
    "v9/out.test.a": "a3f5fec49e67208777fed3240d4dbdaa7dd706076b00573b3c83c6faff36bc8a",
    "v9/out.test.aq": "1db9ed1d5dd7b3cbe582d6ef02191af5e84d7a7452aa1f166d40c86dd5640361",
    "v9/out.test.aqc": "b3ffad09cdbabd1deea0a2d0034d1e46fd4282f66e7ae9c8f6f5f7431a9b3009",
    "out.test.aqcM": "7e858844afe8201d75a2720cfed75227df13f63ced9a400833547d89a144a96c",
    "qrels.rel_level": "4430ec2026fcb964851e03bd73df21daf27e7ef4783d20ad63634182bc9df843",
    "out.test.aql": "8aaf42d1f0261a8e3f5fa0de2be7a8c46df719617565a3667482eaced620ff91",
    "out.test.meas_params": "4caf844f1c8b595299f8035d0aa96aa47c73681228690b7529d4a9224775a243",
    "qrels.test.with-comments": "939273bd229a25b6c12486a34fa69772695b8ae885d9ecd061666fb6c7ec38da",
    "zscores_file": "9269185cb290fe4c11df2b94b2789b4db98131b1ea47673fb83f0a00100760f7",
    "out.test.aqZ": "3282cbce1e5c8e11619954dac0144a0541b219de528156c72b7b2acba168ac75",
}
# The lines of `-m all_trec` that gapbench does not print: none (runid and relstring, text, are printed beside the
# measures by `gapbench evaluate -q/--trec`).
NOT_COMPARED: set[str] = set()


def test_vendored_files_are_trec_eval_s_unchanged():
    for name, digest in CHECKSUMS.items():
        assert hashlib.sha256((HERE / name).read_bytes()).hexdigest() == digest, name
    assert "National Institute of Standards and Technology" in (HERE / "LICENSE.md").read_text(encoding="utf-8")


def _family(name: str) -> str:
    for family in sorted([*trec_names.NAMES, *trec_names.UNSUPPORTED], key=len, reverse=True):
        if name == family or name.startswith(family + "_"):
            return family
    raise AssertionError(f"trec_eval printed a measure this test does not know: {name}")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _split(expected_file: str) -> tuple[list[str], list[str]]:
    """(the lines gapbench must print, in trec_eval's order; the measure names to ask for)."""
    kept, names = [], []
    for line in _lines(HERE / expected_file):
        name = line.split("\t")[0].rstrip()
        family = _family(name)
        if family in NOT_COMPARED:
            continue
        assert family in trec_names.NAMES or family in trec_names.TEXTS, family
        kept.append(line)
        if name not in names:
            names.append(name)
    return kept, names


def _gapbench(capsys, run: str | Path, *flags: str, measures: list[str]) -> list[str]:
    code = main(["evaluate", "--qrels", str(HERE / "qrels.test"), "--run", str(HERE / run), "-m", ",".join(measures),
                 *flags])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out.splitlines()


def test_the_measures_left_out_are_exactly_those_gapbench_cannot_compute():
    assert NOT_COMPARED <= set(trec_names.UNSUPPORTED)
    printed = {_family(line.split("\t")[0].rstrip())
               for line in (HERE / "out.test.aq").read_text(encoding="utf-8").splitlines()}
    assert printed - NOT_COMPARED == printed & {*trec_names.NAMES, *trec_names.TEXTS}
    # what is compared: the 96 lines trec_eval prints per query (95 measures and relstring), on each of the 3
    # queries, and runid, num_q, gm_map and gm_bpref (summary only)
    _, names = _split("out.test.aq")
    assert len(names) == 100 and "runid" in names and "relstring" in names and "num_q" in names
    assert "ndcg_cut_10" in names and "iprec_at_recall_0.50" in names
    assert "gm_map" in names and "Rprec_mult_2.00" in names and "unj_20" in names


@pytest.mark.parametrize("expected, run, flags", [
    ("out.test.aq", "results.test", ["-q"]),   # trec_eval -m all_trec -q
    ("out.test.aqc", "results.trunc", ["-q"]),  # trec_eval -m all_trec -q -c: gapbench scores absent queries (-c)
    ("out.test.a", "results.test", ["--trec"]),  # trec_eval -m all_trec
    ("out.test", "results.test", ["--trec"]),  # trec_eval (its default measures)
])
def test_gapbench_evaluate_prints_what_trec_eval_prints(capsys, expected, run, flags):
    want, names = _split(expected)
    # given in reverse, so the order printed is trec_eval's own and not the order asked for
    # results.trunc as it is: words after the run tag on some lines, which trec_eval (and gapbench) ignore
    got = _gapbench(capsys, run, *flags, measures=list(reversed(names)))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"line {i + 1}: gapbench {g!r}, trec_eval {w!r}"


def test_map_p10_ndcg_cut_as_trec_eval_names_them(capsys):
    # `trec_eval -m map -m P.10 -m ndcg_cut.10 qrels.test results.test` prints these three lines of out.test.a
    want = [line for line in (HERE / "out.test.a").read_text(encoding="utf-8").splitlines()
            if line.split("\t")[0].rstrip() in ("map", "P_10", "ndcg_cut_10")]
    assert [w.split("\t")[2] for w in want] == ["0.1785", "0.3000", "0.3016"]
    assert _gapbench(capsys, "results.test", "--trec", measures=["map", "P_10", "ndcg_cut.10"]) == want
    # the default table shows the same numbers under ir-measures' names
    table = _gapbench(capsys, "results.test", measures=["map", "P_10", "ndcg_cut.10"])
    assert any(line.split()[:2] == ["AP", "0.1785"] for line in table)
    assert any(line.split()[:2] == ["P@10", "0.3000"] for line in table)
    assert any(line.split()[:2] == ["nDCG@10", "0.3016"] for line in table)


def test_counts_are_summed_in_the_summary_as_trec_eval_sums_them(capsys):
    # out.test: num_ret 1500, num_rel 561, num_rel_ret 131 over 3 queries (sums, not per-query means)
    table = _gapbench(capsys, "results.test", measures=["num_ret", "num_rel", "num_rel_ret"])
    assert any(line.split()[:3] == ["NumRet", "(sum)", "1500"] for line in table)
    assert any(line.split()[:3] == ["NumRel", "(sum)", "561"] for line in table)
    assert any(line.split()[:3] == ["NumRet(rel=1)", "(sum)", "131"] for line in table)


def test_the_trec_eval_page_runs_as_written(tmp_path):
    """docs/trec-eval.md: each `gapbench` command, run in the folder of trec_eval's files as a user would, prints
    the text block that follows it."""
    import os
    import re
    import shlex
    import subprocess
    import sys

    page = (Path(__file__).resolve().parents[1] / "docs" / "trec-eval.md").read_text(encoding="utf-8")
    pairs = re.findall(r"```bash\n(.*?)```\s*```text\n(.*?)```", page, flags=re.S)
    assert len(pairs) == 3  # gapbench trec_eval, evaluate --trec, evaluate -q
    for command, shown in pairs:
        argv = shlex.split(command)
        assert argv[0] == "gapbench"
        proc = subprocess.run([sys.executable, "-m", "gapbench", *argv[1:]], cwd=HERE, capture_output=True,
                              text=True, timeout=120, env=dict(os.environ, HF_HUB_OFFLINE="1"))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == shown
        # and what trec_eval printed for the same measures (its test outputs hold every one of these lines)
        expected = set(_lines(HERE / "out.test.aq"))
        assert set(proc.stdout.splitlines()) <= expected


def test_json_per_query_holds_the_values_the_trec_layout_prints(capsys):
    import json

    assert main(["evaluate", "--qrels", str(HERE / "qrels.test"), "--run", str(HERE / "results.test"),
                 "-m", "map,num_ret", "--json", "-q"]) == 0
    obj = json.loads(capsys.readouterr().out)
    # out.test.aq: map 301 0.0324, 302 0.4175, 303 0.0858; num_ret 500 each, 1500 in the all row
    assert {q: round(v, 4) for q, v in obj["per_query"]["AP"].items()} == {"301": 0.0324, "302": 0.4175, "303": 0.0858}
    assert obj["per_query"]["NumRet"] == {"301": 500.0, "302": 500.0, "303": 500.0}
    assert obj["summary"]["NumRet"] == 1500.0 and obj["measures"]["NumRet"] == 500.0
    assert round(obj["summary"]["AP"], 4) == 0.1785


def test_trec_and_json_together_are_refused(capsys):
    code = main(["evaluate", "--qrels", str(HERE / "qrels.test"), "--run", str(HERE / "results.test"), "--trec",
                 "--json"])
    assert code == 2
    assert capsys.readouterr().err == ("gapbench: error: --trec and --json are two output formats; give one of "
                                       "them.\n")
