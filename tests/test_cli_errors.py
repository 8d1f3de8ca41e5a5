"""The CLI: bad input gives exit code 2 and one 'gapbench: error:' line, never a traceback; evaluate --json works."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gapbench.cli import main


@pytest.fixture(autouse=True)
def _clean_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # task names are tried as folder paths first; keep the cwd clean (conftest: offline)


QRELS = "q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 e1 1\n"
RUN = "q1 Q0 d2 1 3.0 mysys\nq1 Q0 d1 2 2.0 mysys\nq1 Q0 d3 3 1.0 mysys\nq2 Q0 e9 1 1.0 mysys\nq2 Q0 e1 2 0.5 mysys\n"


def files(tmp_path: Path, qrels: str = QRELS, run: str = RUN) -> tuple[str, str]:
    q = tmp_path / "t.qrels"
    r = tmp_path / "t.run"
    q.write_text(qrels)
    r.write_text(run)
    return str(q), str(r)


def expect_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("gapbench: error: ")
    assert err.endswith("\n") and err.count("\n") == 1, err  # exactly one line
    return err


def test_malformed_qrels(tmp_path, capsys):
    q, r = files(tmp_path, qrels="q1 0 d1 1\nq1 0 d2\n")
    err = expect_error(capsys, ["evaluate", "--qrels", q, "--run", r])
    assert q in err and "line 2" in err


def test_malformed_run(tmp_path, capsys):
    q, r = files(tmp_path, run="q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 x t\n")
    err = expect_error(capsys, ["evaluate", "--qrels", q, "--run", r])
    assert r in err and "line 2" in err and "'x'" in err


def test_missing_run_file(tmp_path, capsys):
    q, _ = files(tmp_path)
    err = expect_error(capsys, ["evaluate", "--qrels", q, "--run", str(tmp_path / "absent.run")])
    assert "absent.run" in err and "not found" in err


def test_unknown_measure(tmp_path, capsys):
    q, r = files(tmp_path)
    err = expect_error(capsys, ["evaluate", "--qrels", q, "--run", r, "--measures", "nDCG@10,Precison@5"])
    assert "unknown measure 'Precison@5'" in err


@pytest.mark.parametrize(
    "name, suggestion",
    [
        ("impliret/multispeaker/wknwo", "impliret/multispeaker/wknow"),
        ("impliret/multispeker/temporal", "impliret/multispeaker/temporal"),
    ],
)
def test_unknown_task_near_miss(capsys, name, suggestion):
    err = expect_error(capsys, ["run", name, "--retriever", "bm25"])
    assert f"unknown task {name!r}" in err
    assert "Did you mean" in err and repr(suggestion) in err


def test_unknown_task_far_miss(capsys):
    err = expect_error(capsys, ["run", "zzzz", "--retriever", "bm25"])
    assert "unknown task 'zzzz'" in err and "Did you mean" not in err and "Available:" in err


def test_unknown_retriever(capsys):
    err = expect_error(capsys, ["run", "impliret/multispeaker/wknow", "--retriever", "bm52"])
    assert "unknown retriever 'bm52'" in err and "Did you mean 'bm25'" in err


def test_unknown_retriever_option(capsys):
    err = expect_error(capsys, ["run", "impliret/multispeaker/wknow", "--retriever", "bm25:k9=1"])
    assert "k9 is not a setting" in err and "k1" in err  # names the bad option and lists accepted ones


def test_bad_retriever_option_value(capsys):
    err = expect_error(capsys, ["run", "impliret/multispeaker/wknow", "--retriever", "bm25:k1=high"])
    assert "retriever bm25: k1 must be a finite number >= 0, got 'high'" in err


def test_beir_folder_without_corpus(tmp_path, capsys):
    folder = tmp_path / "mybeir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "hello"}\n')
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    err = expect_error(capsys, ["run", str(folder), "--retriever", "bm25"])
    assert str(folder) in err and "corpus.jsonl" in err


def test_bad_k(capsys):
    err = expect_error(capsys, ["run", "impliret/multispeaker/wknow", "--retriever", "bm25", "--k", "0"])
    assert "--k" in err


# ---------------------------------------------------------------- success

# q1: ranking d2 (0), d1 (2), d3 (1).  DCG = 2/log2(3) + 1/log2(4); IDCG = 2/log2(2) + 1/log2(3)
# q2: ranking e9 (unjudged), e1 (1).   DCG = 1/log2(3);             IDCG = 1
# RR: q1 1/2 (d1 at rank 2), q2 1/2.  R@100: 1 and 1.
NDCG_Q1 = (2 / math.log2(3) + 1 / 2) / (2 + 1 / math.log2(3))
NDCG_Q2 = 1 / math.log2(3)


def test_evaluate_json(tmp_path, capsys):
    q, r = files(tmp_path)
    code = main(["evaluate", "--qrels", q, "--run", r, "--measures", "nDCG@10,RR", "-m", "R@100", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    assert out.count("\n") == 1
    obj = json.loads(out)
    assert set(obj) == {"task", "system", "n_queries", "n_missing", "n_dropped", "n_unjudged", "measures", "ci95",
                        "summary"}
    assert obj["summary"] == obj["measures"]  # no count among these: trec_eval's `all` row is the mean
    assert obj["task"] == q
    assert obj["system"] == "mysys"
    assert obj["n_queries"] == 2
    assert list(obj["measures"]) == ["nDCG@10", "RR", "R@100"]
    assert obj["measures"]["nDCG@10"] == pytest.approx((NDCG_Q1 + NDCG_Q2) / 2, abs=1e-12)
    assert obj["measures"]["RR"] == pytest.approx(0.5, abs=1e-12)
    assert obj["measures"]["R@100"] == pytest.approx(1.0, abs=1e-12)


def test_evaluate_table(tmp_path, capsys):
    q, r = files(tmp_path)
    assert main(["evaluate", "--qrels", q, "--run", r, "-m", "RR"]) == 0
    out = capsys.readouterr().out
    assert "mysys: 2 queries" in out and "RR" in out and "0.5000" in out


# ---------------------------------------------------------------- as a real process

def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "gapbench", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )


def test_subprocess_error_exit_code(tmp_path):
    q, r = files(tmp_path, qrels="q1 0 d1 one\n")
    proc = _cli(["evaluate", "--qrels", q, "--run", r], tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gapbench: error: ")
    assert q in lines[0] and "line 1" in lines[0] and "'one'" in lines[0]


def test_subprocess_unknown_task(tmp_path):
    proc = _cli(["run", "impliret/multispeaker/wknwo", "-r", "bm25"], tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Did you mean 'impliret/multispeaker/wknow'" in proc.stderr


def test_subprocess_evaluate_json(tmp_path):
    q, r = files(tmp_path)
    proc = _cli(["evaluate", "--qrels", q, "--run", r, "-m", "nDCG@10,RR", "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["measures"]["nDCG@10"] == pytest.approx((NDCG_Q1 + NDCG_Q2) / 2, abs=1e-12)
    assert obj["measures"]["RR"] == pytest.approx(0.5, abs=1e-12)


def test_subprocess_usage_check_exit_code(tmp_path):
    # errors raised through the CLI's own checks (_fail -> typer.Exit(2)) must also leave with code 2
    proc = _cli(["run", "impliret/multispeaker/wknow", "-r", "bm25", "--k", "0"], tmp_path)
    assert proc.stderr == "gapbench: error: --k must be greater than or equal to 1, got 0.\n"
    assert proc.returncode == 2
