"""Each analysis' settings are declared once: the fields of its options model. Every command's flags are generated from
those fields (gapbench.cli.from_options, pinned by tests/test_cli_from_options.py: every flag is a field or listed
CLI-only, every field has a flag unless it is library-only, with the field's default and help). Library code never
words an error as a flag."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer.main

from gapbench.cli import app
from gapbench.cli.contract import REGISTRY
from gapbench.cli.from_options import FromOptions
from gapbench.contract import Options
from gapbench.errors import OptionsError

ROOT = Path(__file__).resolve().parents[1]
# every analysis (issue 21): gap, signals, coverage, the four ARGUS analyses, regress, the leaderboard, the OBLIQ builder;
# and the core verb run (issue 25: RunOptions)
ANALYSES = {"gap", "signals", "coverage", "argus audit", "argus probe", "argus sweep", "argus compare", "regress",
            "leaderboard build", "obliq build", "run"}


def _commands() -> dict[str, object]:
    found = {}

    def walk(command, path):
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()


def test_every_analysis_builds_its_options_through_one_mapping():
    assert ANALYSES <= set(REGISTRY), sorted(ANALYSES - set(REGISTRY))
    assert set(REGISTRY) <= set(COMMANDS)
    for flags in REGISTRY.values():
        assert issubclass(flags.options, Options), flags.command


def test_no_command_writes_its_settings_flags_by_hand():
    """Every command's settings flags are generated from its options' fields (issue 25 part 2: regress, leaderboard
    build, obliq build and report were the last written by hand); tests/test_cli_from_options.py checks each one's
    parameters against its fields."""
    hand_written = sorted(name for name, flags in REGISTRY.items() if not isinstance(flags, FromOptions))
    assert hand_written == []


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_the_options_refuse_an_unknown_setting_by_name(name):
    flags = REGISTRY.get(name)
    if flags is None:
        pytest.fail(f"{name}: no Flags registered")
    of = flags.options.verb or "this analysis"  # a verb's options name it: gapbench.run, gapbench.regress
    with pytest.raises(OptionsError,
                       match=rf"no_such_setting is not a setting of {re.escape(of)}; accepted settings: "):
        flags.options(no_such_setting=1)


# a flag (--depth) inside the message of a raise in library code; a full command (`gapbench gap ... --depth`) may name
# its flags
_FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]+")


def _flag_messages() -> list[str]:
    out = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if "cli" in path.relative_to(ROOT / "harness").parts:
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Raise) and node.exc is not None:
                source = ast.get_source_segment(text, node.exc) or ""
                if re.search(r"gapbench [a-z]", source):
                    continue
                source = re.sub(r"`[^`]*`", "", source)  # a shell command in backticks (`ray start --head`) may
                out += [f"{path.relative_to(ROOT)}:{node.lineno}: {m}" for m in _FLAG.findall(source)]
    return out


def test_library_errors_name_settings_not_flags():
    found = _flag_messages()
    assert not found, "library errors worded as CLI flags:\n" + "\n".join(found)


def test_the_command_line_imports_no_options_class_at_start_up():
    """Flags name their options as "module:Class": `gapbench --help` and shell completion stay light."""
    import subprocess
    import sys

    code = ("import sys, gapbench.cli; print(sorted(m for m in sys.modules if m.startswith(('gapbench.analyses', "
            "'gapbench.products', 'numpy'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
