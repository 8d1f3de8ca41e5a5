"""Quiet by default: a warning a library raises from its own code becomes at most one gapbench line per command;
``--verbose`` (anywhere on the line) shows them all, as the library prints them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gapbench.cli import main
from gapbench.cli.quiet import _library, verbose_given

_LIBRARY = '''
import warnings
warnings.warn("the option 'x' is not used by this model", UserWarning)
warnings.warn("a second thing, worded differently", UserWarning)
warnings.warn("and a third", RuntimeWarning)
'''
_RUN = ("import sys\n"
        "from gapbench.cli.quiet import quiet_third_parties\n"
        "sys.argv = ['gapbench', *sys.argv[1:]]\n"
        "quiet_third_parties()\n"
        "import warnings\n"
        "warnings.warn('a warning of the user code itself', UserWarning)\n"
        "import noisylib2\n")


def _python(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    site = tmp_path / "lib" / "site-packages"
    (site / "noisylib2").mkdir(parents=True, exist_ok=True)
    (site / "noisylib2" / "__init__.py").write_text(_LIBRARY)
    env = {k: v for k, v in os.environ.items() if k not in ("GAPBENCH_WARNINGS", "PYTHONWARNINGS")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", _RUN, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_library_s_warnings_become_one_line(tmp_path):
    proc = _python(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    # the user's own warning as Python prints it, then one line for all three of the library's
    assert "UserWarning: a warning of the user code itself" in lines[0]
    assert lines[1:] == ["gapbench: noisylib2 warned: the option 'x' is not used by this model (UserWarning; library "
                         "warnings are kept to this one line: --verbose shows them all)"]


def test_verbose_shows_them_all(tmp_path):
    proc = _python(tmp_path, "run", "x", "--verbose")
    assert proc.returncode == 0, proc.stderr
    assert "gapbench:" not in proc.stderr
    for text in ("UserWarning: the option 'x' is not used", "UserWarning: a second thing",
                 "RuntimeWarning: and a third"):
        assert text in proc.stderr


def test_verbose_is_taken_anywhere_before_a_double_dash():
    assert verbose_given(["run", "--verbose", "T", "-r", "bm25"]) == (["run", "T", "-r", "bm25"], True)
    assert verbose_given(["--verbose", "run"]) == (["run"], True)
    assert verbose_given(["run", "--", "--verbose"]) == (["run", "--", "--verbose"], False)
    assert verbose_given(["run"]) == (["run"], False)


def test_the_command_line_accepts_verbose(capsys):
    assert main(["--verbose", "--version"]) == 0
    assert capsys.readouterr().out.startswith("gapbench ")


def test_which_files_are_a_library_s():
    assert _library("/x/lib/python3.11/site-packages/sentence_transformers/models/Transformer.py") == \
        "sentence_transformers"
    assert _library("/x/lib/python3.11/site-packages/six.py") == "six"
    assert _library("/x/lib/python3.11/site-packages/gapbench/runner.py") is None
    assert _library("/usr/lib/python3.11/warnings.py") is None
    assert _library("/home/me/project/mine.py") is None
