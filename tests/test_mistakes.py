"""The mistakes a new user makes first get the answer that fixes them: a mistyped folder is "no such folder" with the
nearest one, an option typed as another tool spells it gets "did you mean" from the command's own options (every
command), and a file given without the ``.gz`` it has on disk is named."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
import typer.main
from gapbench.cli import app, main
from gapbench.errors import ConfigError, DataFormatError
from gapbench.formats import read_trec_run
from gapbench.nearest import gz_twin, nearest_folder
from gapbench.task import get_task

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(FIX.parent.parent)


@pytest.mark.parametrize("typed", ["./tests/fixtures/smart/cranfeld", "tests/fixtures/smart/cranfeld"])
def test_a_mistyped_folder_is_no_such_folder_with_the_nearest(in_repo, typed):
    with pytest.raises(ConfigError) as caught:
        get_task(typed)
    assert str(caught.value) == (f"no such folder {typed!r} (nor a registered task). The nearest existing folder is "
                                 "tests/fixtures/smart; did you mean tests/fixtures/smart/cranfield?")


def test_the_command_line_answers_it_in_one_line_without_the_task_list(in_repo, capsys):
    assert main(["run", "tests/fixtures/smrt/cacm", "-r", "bm25"]) == 2
    err = capsys.readouterr().err
    assert err == ("gapbench: error: no such folder 'tests/fixtures/smrt/cacm' (nor a registered task). The nearest "
                   "existing folder is tests/fixtures; did you mean tests/fixtures/smart/cacm?\n")
    assert "impliret" not in err


def test_the_nearest_folder_is_named_with_or_without_a_close_name(tmp_path):
    (tmp_path / "alpha").mkdir()
    (tmp_path / "beta").mkdir()
    assert nearest_folder(tmp_path / "zzz" / "x") == (f" The nearest existing folder is {tmp_path}; none of its "
                                                      "folders is named like 'zzz'.")
    assert nearest_folder(tmp_path / "alpah") == (f" The nearest existing folder is {tmp_path}; did you mean "
                                                  f"{tmp_path / 'alpha'}?")
    assert nearest_folder(tmp_path / "alpha") == ""  # it exists


def test_a_registered_name_is_still_a_task(in_repo):
    # 'beir/scifact' holds a '/', and no folder 'beir' is here: the registry's answer, not a folder's
    assert get_task("impliret/unispeaker/wknow").name == "impliret/unispeaker/wknow"


def test_topk_suggests_k(capsys):
    assert main(["run", "impliret/unispeaker/wknow", "-r", "bm25", "--topk", "5"]) == 2
    assert capsys.readouterr().err == ("gapbench: error: no such option '--topk'. Did you mean '--k'? Try 'gapbench "
                                       "run --help'.\n")


def _commands(group, path):
    for name, command in getattr(group, "commands", {}).items():
        if getattr(command, "commands", None):
            yield from _commands(command, [*path, name])
        else:
            yield [*path, name], command


def test_every_command_suggests_its_own_options(capsys):
    checked = 0
    for path, command in _commands(typer.main.get_command(app), []):
        longs = sorted(o for p in command.params for o in getattr(p, "opts", []) if o.startswith("--")
                       and o != "--help" and len(o) > 4)
        if not longs:
            continue
        option = longs[0]
        typo = option[:-1] + option[-1] * 2  # --output -> --outputt
        assert main([*path, typo]) == 2, path
        err = capsys.readouterr().err
        assert f"no such option {typo!r}. Did you mean {option!r}" in err, (path, err)
        checked += 1
    assert checked >= 15


def test_a_missing_file_whose_gz_exists_says_so(tmp_path, capsys):
    run = tmp_path / "run.trec.gz"
    with gzip.open(run, "wt") as fh:
        fh.write("1 Q0 d1 1 1.0 x\n")
    plain = tmp_path / "run.trec"
    assert gz_twin(plain) == f" {run} exists: give that name (gapbench reads gzip files as they are)."
    with pytest.raises(DataFormatError) as caught:
        read_trec_run(plain)
    assert str(caught.value) == (f"{plain}: file not found; check the path. {run} exists: give that name (gapbench "
                                 "reads gzip files as they are).")
    assert main(["evaluate", "--run", str(plain), "--qrels", str(FIX / "trec_eval" / "qrels.test")]) == 2
    assert f"{run} exists: give that name" in capsys.readouterr().err
    # the other way round: a .gz name for a plain file
    os.rename(run, plain)
    assert gz_twin(run) == f" {plain} exists (not gzipped): give that name."
    assert gz_twin(tmp_path / "nothing.trec") == ""
