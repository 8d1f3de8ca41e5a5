"""Each analysis' settings are declared once: the fields of its options model. Most commands' flags are generated from
those fields (gapbench.cli.from_options, pinned by tests/test_cli_from_options.py); a command whose flags are still
written by hand maps them onto the fields through one gapbench.cli.contract.Flags, and here it is checked against its
options (every flag is a field or declared CLI-only, every field has a flag unless it is library-only, and both have
the same default). Library code never words an error as a flag."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer.main

from gapbench.cli import app
from gapbench.cli.contract import REGISTRY, SAMPLING
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
# the commands whose flags are written by hand (the generated ones are their fields by construction)
HAND_WRITTEN = sorted(name for name in ANALYSES if not isinstance(REGISTRY.get(name), FromOptions))


def test_every_analysis_builds_its_options_through_one_mapping():
    assert ANALYSES <= set(REGISTRY), sorted(ANALYSES - set(REGISTRY))
    assert set(REGISTRY) <= set(COMMANDS)
    for flags in REGISTRY.values():
        assert issubclass(flags.options, Options), flags.command


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_every_flag_is_a_field_and_every_field_a_flag(name):
    flags = REGISTRY.get(name)
    if flags is None:
        pytest.fail(f"{name}: no Flags registered")
    fields = set(flags.options.model_fields)
    params = {p.name: p for p in COMMANDS[name].params}
    for param in params:
        target = flags.field_of(param)
        assert target is None or target in fields, f"{name}: flag {param} sets no field of {flags.options.__name__}"
    assert not (flags.library_only - fields), f"{name}: library_only names no field: {flags.library_only - fields}"
    set_by_flags = {flags.field_of(p) for p in params} - {None}
    missing = fields - set_by_flags - flags.library_only
    assert not missing, f"{name}: fields of {flags.options.__name__} with no flag and not library_only: {missing}"
    assert not (flags.cli_only & fields - set(flags.renamed.values())), \
        f"{name}: a CLI-only parameter has a field's name: {flags.cli_only & fields}"
    assert not [p for p in params if p in SAMPLING and p in fields]


@pytest.mark.parametrize("name", HAND_WRITTEN)
def test_flag_defaults_are_the_options_defaults(name):
    flags = REGISTRY.get(name)
    if flags is None:
        pytest.fail(f"{name}: no Flags registered")
    for param in COMMANDS[name].params:
        target = flags.field_of(param.name)
        if target is None or param.required:
            continue
        default = param.default
        if default is not None and param.name in flags.parse:
            default = flags.parse[param.name](default)
        want = flags.options.model_fields[target].get_default(call_default_factory=True)
        if isinstance(want, (list, tuple)) and isinstance(default, (list, tuple)):
            default, want = list(default), list(want)
        assert default == want, f"{name}: --{param.name} defaults to {default!r}, {target} to {want!r}"


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_the_options_refuse_an_unknown_setting_by_name(name):
    flags = REGISTRY.get(name)
    if flags is None:
        pytest.fail(f"{name}: no Flags registered")
    with pytest.raises(OptionsError, match=r"no_such_setting is not a setting of this analysis"):
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
