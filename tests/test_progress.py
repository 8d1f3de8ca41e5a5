"""Progress outside a terminal: plain lines at the interval with the right counts, rate and ETA (a fake clock), the
environment switches, and a real `gapbench run` whose stderr, redirected to a file, holds the progress lines."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gapbench import progress as prog
from gapbench.errors import ConfigError


README = Path(__file__).resolve().parents[1] / "docs" / "progress.md"  # the docs page that holds the command


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def reporter(total, *, interval=30.0, unit="docs", description="dense: encoding"):
    clock, out = Clock(), io.StringIO()
    rep = prog.LineReporter(total, description, unit=unit, interval=interval, clock=clock, stream=out)
    return rep, clock, out


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_lines_at_the_interval_with_counts_rate_over_the_last_minute_and_eta():
    rep, clock, out = reporter(2000)
    steps = [(10, 100), (20, 100), (30, 100), (40, 100), (50, 100), (60, 100), (70, 200), (80, 200), (90, 200)]
    seen = []
    for t, n in steps:
        clock.now = t
        rep.advance(n)
        seen.append(len(lines(out)))
    # a line at t=30, 60, 90: one every 30 s, none in between
    assert seen == [0, 0, 1, 1, 1, 2, 2, 2, 3]
    # t=30: 300 done at 300/30 = 10/s; 1,700 left -> 170 s
    # t=60: 600/60 = 10/s; 1,400 left -> 140 s
    # t=90: the rate over the last minute counts from the sample at t=30 (300 done): (1200-300)/(90-30) = 15/s,
    #       not the overall 1200/90 = 13.3/s; 800 left -> 53.3 s
    assert lines(out) == [
        "gapbench: dense: encoding 300/2,000 docs (10/s, ETA 2m50s)",
        "gapbench: dense: encoding 600/2,000 docs (10/s, ETA 2m20s)",
        "gapbench: dense: encoding 1,200/2,000 docs (15/s, ETA 53s)",
    ]
    clock.now = 95
    rep.finish()  # 1200 in 95 s = 12.6/s
    assert lines(out)[-1] == "gapbench: dense: encoding 1,200/2,000 docs in 1m35s, 13/s"


def test_a_stage_shorter_than_the_interval_prints_nothing():
    rep, clock, out = reporter(50)
    for t in range(1, 6):
        clock.now = t
        rep.advance(10)
    rep.finish()
    assert out.getvalue() == ""


def test_interval_zero_prints_every_step_and_a_closing_line():
    rep, clock, out = reporter(3, interval=0, unit="calls", description="argus synthesis")
    for t in (2, 4, 6):
        clock.now = t
        rep.advance(1)
    clock.now = 6
    rep.finish()
    assert lines(out) == [
        "gapbench: argus synthesis 1/3 calls (0.50/s, ETA 4s)",
        "gapbench: argus synthesis 2/3 calls (0.50/s, ETA 2s)",
        "gapbench: argus synthesis 3/3 calls (0.50/s, ETA 0s)",
        "gapbench: argus synthesis 3/3 calls in 6s, 0.50/s",
    ]


def test_the_heartbeat_prints_a_due_line_without_a_step_and_slow_rates_read_per_minute():
    rep, clock, out = reporter(10, unit="calls", description="tournament")
    clock.now = 20
    rep.advance(1)
    clock.now = 25
    rep.tick()  # not due yet
    assert out.getvalue() == ""
    clock.now = 40
    rep.tick()  # 1 call in 40 s: 1.5 a minute; 9 left -> 360 s
    assert lines(out) == ["gapbench: tournament 1/10 calls (1.5/min, ETA 6m00s)"]
    clock.now = 50
    rep.tick()
    assert len(lines(out)) == 1


def test_an_open_ended_count_and_a_stage_with_nothing_done_yet():
    rep, clock, out = reporter(None, interval=0, unit="mentions", description="spaCy NER")
    clock.now = 4
    rep.advance(6)
    assert lines(out) == ["gapbench: spaCy NER 6 mentions (1.5/s)"]
    rep2, clock2, out2 = reporter(100, interval=10)
    clock2.now = 12
    rep2.tick()  # nothing done for 12 s: no rate, no ETA, but the time it has been going
    assert lines(out2) == ["gapbench: dense: encoding 0/100 docs (starting, 12s elapsed)"]


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.4, "59s"), (146, "2m26s"), (3600, "1h00m"), (3725, "1h02m")])
def test_format_duration(seconds, text):
    assert prog.format_duration(seconds) == text


@pytest.mark.parametrize("rate, text", [(410.2, "410/s"), (12345.0, "12,345/s"), (10.4, "10/s"), (2.46, "2.5/s"),
                                        (0.25, "0.25/s"), (0.005, "0.3/min")])
def test_format_rate(rate, text):
    assert prog.format_rate(rate) == text


@pytest.mark.parametrize("value, mode", [("lines", "lines"), ("off", "off"), ("0", "off"), ("false", "off"),
                                         ("BAR", "bar"), ("auto", "lines"), ("1", "lines")])
def test_modes_from_the_environment(monkeypatch, capsys, value, mode):
    monkeypatch.setenv("GAPBENCH_PROGRESS", value)  # stderr is not a terminal here: auto means lines
    assert prog.mode() == mode


def test_bad_settings_name_the_variable_and_what_is_accepted(monkeypatch):
    monkeypatch.setenv("GAPBENCH_PROGRESS", "loud")
    with pytest.raises(ConfigError, match=r"GAPBENCH_PROGRESS='loud' .* auto, bar, lines, off"):
        prog.mode()
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "-3")
    with pytest.raises(ConfigError, match=r"GAPBENCH_PROGRESS_INTERVAL='-3' is not a number of seconds >= 0"):
        prog.interval()
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "5")
    assert prog.interval() == 5.0


def test_progress_writes_lines_to_stderr_outside_a_terminal_and_nothing_when_off(monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_PROGRESS", "lines")
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "0")
    with prog.progress(5, "bm25: indexing", unit="docs") as advance:
        advance(2)
        advance(3)
    err = capsys.readouterr().err.splitlines()
    assert [re.sub(r" \(.*\)$", "", line) for line in err[:2]] == ["gapbench: bm25: indexing 2/5 docs",
                                                                  "gapbench: bm25: indexing 5/5 docs"]
    assert err[2].startswith("gapbench: bm25: indexing 5/5 docs in ") and len(err) == 3
    monkeypatch.setenv("GAPBENCH_PROGRESS", "off")
    with prog.progress(5, "bm25: indexing") as advance:
        advance(5)
    assert capsys.readouterr().err == ""


def test_nested_stages_each_report(monkeypatch, capsys):
    monkeypatch.setenv("GAPBENCH_PROGRESS", "lines")
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "0")
    with prog.progress(2, "outer", unit="tasks") as outer:
        with prog.progress(3, "inner", unit="docs") as inner:
            inner(3)
        outer(1)
    err = capsys.readouterr().err
    assert "gapbench: inner 3/3 docs (" in err and "gapbench: outer 1/2 tasks (" in err


README_COMMAND = re.compile(r"`(GAPBENCH_PROGRESS=lines [^`]* 2> run\.log)`")


def test_the_readme_command_writes_progress_lines_into_a_log_file(tmp_path):
    """README's `gapbench run ... 2> run.log`, run as written (stderr redirected to a file, as in CI or under nohup):
    the log holds each stage's lines, and the closing lines count every document and query of the task."""
    from gapbench.pipeline import prepare

    command = README_COMMAND.search(" ".join(README.read_text(encoding="utf-8").split())).group(1)
    env = dict(os.environ, HF_HUB_OFFLINE="1", GAPBENCH_HOME=str(tmp_path / "home"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("GAPBENCH_PROGRESS", None)
    proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True,
                          timeout=600)
    text = (tmp_path / "run.log").read_text()
    assert proc.returncode == 0, text
    data = prepare("impliret/multispeaker/wknow").data
    n_docs, n_queries = len(data.corpus), len(data.queries)
    got = text.splitlines()
    indexing = [line for line in got if line.startswith("gapbench: bm25: indexing ")]
    searching = [line for line in got if line.startswith("gapbench: bm25: searching ")]
    # a line per step (indexing: every batch the memory budget allows, 32,768 documents by default, tokenized whole),
    # then the closing line with every item done
    from gapbench.adapters.bm25 import BYTES_PER_DOC
    from gapbench.budget import rows_within

    batch = rows_within(BYTES_PER_DOC)
    assert indexing[0].startswith(f"gapbench: bm25: indexing {min(batch, n_docs):,}/{n_docs:,} docs (")
    assert indexing[-1].startswith(f"gapbench: bm25: indexing {n_docs:,}/{n_docs:,} docs in ")
    assert len(indexing) == -(-n_docs // batch) + 1
    assert searching[0].startswith(f"gapbench: bm25: searching 1/{n_queries:,} queries (")
    assert searching[-1].startswith(f"gapbench: bm25: searching {n_queries:,}/{n_queries:,} queries in ")
    assert (tmp_path / "out" / "manifest.json").is_file()


@pytest.mark.slow  # loads MiniLM
@pytest.mark.model
def test_dense_encoding_reports_every_batch_not_every_chunk(monkeypatch, capsys):
    """40 documents, batches of 8, one cache chunk of 64: five steps of 8 (before: one step of 40, the chunk)."""
    from gapbench.adapters.dense import Dense
    from gapbench.types import Corpus, Document

    monkeypatch.setenv("GAPBENCH_PROGRESS", "lines")
    monkeypatch.setenv("GAPBENCH_PROGRESS_INTERVAL", "0")
    corpus = Corpus([Document(f"d{i}", f"progress test document {i} " + "word " * (i % 7)) for i in range(40)])
    Dense(batch_size=8, chunk_size=64).index(corpus)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("gapbench: dense: encoding ")]
    assert [int(re.search(r"encoding (\d+)/40 docs", line).group(1)) for line in lines] == [8, 16, 24, 32, 40, 40]
    assert " in " in lines[-1]
