"""The commands' flags are generated from their options models (gapbench.cli.from_options): a command's parameters are
exactly its options' fields (those set from Python only left out) plus the short list of CLI-only parameters below;
every generated flag takes its name, default and help from the field, so a setting is described once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
import typer
import typer.main
from pydantic import Field
from typer.testing import CliRunner

from gapbench.cli import app, main
from gapbench.cli.contract import REGISTRY, SAMPLING
from gapbench.cli.from_options import (
    FromOptions,
    _collection,
    add_command,
    choices,
    cli_type,
    command,
    help_text,
)
from gapbench.contract import Options, Seed

# command -> the parameters that are not settings of its options (what is analysed, the output format)
CLI_ONLY = {
    "run": {"task", "retriever", "as_json", *SAMPLING},
    "evaluate": {"run_file", "qrels", "task", "measures", "per_query", "trec", "as_json"},
    "compare": {"run_dirs", "measures", "as_json", "rescore", "data"},
    "reproduce": {"list_rows", "as_json"},
    "gap": {"task", "retrievers", "as_json", *SAMPLING},
    "signals": {"task", "retrievers", "as_json"},
    "coverage": {"task", "retrievers", "as_json", *SAMPLING},
    "argus audit": {"retriever", "entities", "relations", "dataset", "relation_mode", "out", "no_plot", "as_json"},
    "argus probe": {"retriever", "entities", "relations", "dataset", "out", "as_json"},
    "argus sweep": {"retriever", "entities", "relations", "dataset", "out", "no_plot"},
    "argus compare": {"task", "retriever", "as_json", *SAMPLING},
    "regress": {"baseline", "candidate", "junit", "summary", "output", "data"},
    "leaderboard build": {"root", "data"},
    "report": {"task", "run_dirs", "analyses", "out"},
    "obliq build": {"corpus", "as_json", *SAMPLING},
}

# the required settings' values a command's options are built with when its defaults are checked
REQUIRED = {"obliq build": {"lens": "the stance a tweet implies", "out": Path("task")}}


def _command(path: str):
    cmd = typer.main.get_command(app)
    for part in path.split():
        cmd = cmd.get_command(cmd.context_class(cmd), part)
    return cmd


def _generated() -> list[str]:
    return sorted(name for name, flags in REGISTRY.items() if isinstance(flags, FromOptions))


def test_the_listed_commands_are_generated():
    assert set(CLI_ONLY) <= set(_generated())
    assert set(_generated()) <= set(CLI_ONLY), "a generated command without its CLI-only list here"


@pytest.mark.parametrize("name", sorted(CLI_ONLY))
def test_parameters_are_the_fields_plus_the_cli_only_ones(name):
    flags = REGISTRY[name]
    params = {p.name for p in _command(name).params}
    fields = set(flags.options.model_fields) - flags.library_only
    by_field = {flags.renamed.get(p, p) for p in params - CLI_ONLY[name]}
    assert by_field == fields, (name, by_field ^ fields)
    assert CLI_ONLY[name] <= params, CLI_ONLY[name] - params


@pytest.mark.parametrize("name", sorted(CLI_ONLY))
def test_each_generated_flag_is_its_field(name):
    flags = REGISTRY[name]
    params = {p.name: p for p in _command(name).params}
    required = REQUIRED.get(name, {})
    for param, field, info in flags.settings():
        p = params[param]
        assert p.help == help_text(info.description) and p.help, (name, param)
        assert f"--{param.replace('_', '-')}" in p.opts + p.secondary_opts, (name, param, p.opts)
        if info.is_required():  # a required setting is a required flag (obliq build's --lens and --out)
            assert p.required, (name, param)
            continue
        # the flag's default, read as a value given on the command line is, builds the field's default
        value = _collection(p, p.default)
        assert flags.options(**required, **flags.values({param: value})) == flags.options(**required), \
            (name, param, p.default)


@pytest.mark.parametrize("name", sorted(CLI_ONLY))
def test_no_generated_command_declares_a_settings_flag_itself(name):
    """The command writes no typer.Option for a setting: its flag, default and help are the field's."""
    import inspect
    import re

    flags = REGISTRY[name]
    callback = _command(name).callback
    while hasattr(callback, "__wrapped__"):
        callback = callback.__wrapped__
    source = inspect.getsource(callback)
    declared = re.findall(r'typer\.Option\([^)]*?"(--[a-z0-9-]+)"', source, re.S)
    own = {f"--{p.replace('_', '-')}" for p, _, _ in flags.settings()}
    assert not own & set(declared), (name, own & set(declared))


# a small options model of its own, so the generator's rules are pinned apart from any verb's
class _Demo(Options):
    depth: int = Field(100, ge=1, description="Documents per pool.")
    mode: Literal["fast", "exact"] = Field("fast", description="How to search.")
    keep: bool = Field(False, description="Keep the files.")
    sizes: tuple[int, ...] = Field((50, 100), description="Pool budgets.")
    name: str | None = Field(None, description="A name.")
    seed: Seed = Field(0, description="The seed.")
    extra: object | None = Field(None, description="Set from Python only.")


DEMO = FromOptions("demo-test", _Demo, short={"depth": ("-d",)}, library_only={"extra"})
REGISTRY.pop("demo-test")  # a command of this test's own app, not of gapbench's
_seen: list = []


@command(DEMO)
def _demo_cmd(thing: str = typer.Argument(...), options=None,
              as_json: bool = typer.Option(False, "--json")) -> None:
    _seen.append((thing, options, as_json))


def _demo_app() -> typer.Typer:
    demo = typer.Typer(add_completion=False)
    add_command(demo, "demo", _demo_cmd)

    @demo.command("other")
    def _other() -> None:  # two commands, so that `demo` is a sub-command
        pass

    return demo


def test_the_generator_reads_names_defaults_help_choices_and_flags_from_the_fields():
    cmd = typer.main.get_command(_demo_app()).get_command(None, "demo")
    params = {p.name: p for p in cmd.params}
    # the fields' flags stand where the command put `options`: after its argument, before --json
    assert [p.name for p in cmd.params] == ["thing", "depth", "mode", "keep", "sizes", "name", "seed", "as_json"]
    assert params["depth"].opts == ["--depth", "-d"] and params["depth"].default == 100
    assert params["depth"].help == "Documents per pool."
    # a Literal's values are the flag's choices in the help and in shell completion; the model checks them
    assert params["mode"].metavar == "fast|exact"
    assert [c.value for c in params["mode"].shell_complete(None, "e")] == ["exact"]
    refused = CliRunner().invoke(_demo_app(), ["demo", "x", "--mode", "slow"])
    assert refused.exit_code == 2
    assert "gapbench: error: --mode must be 'fast' or 'exact', got 'slow'.\n" in refused.output
    assert params["keep"].is_flag and params["keep"].opts == ["--keep"]
    assert params["keep"].secondary_opts == ["--no-keep"]
    assert params["sizes"].multiple and list(params["sizes"].default) == [50, 100]
    assert params["name"].default is None
    assert "extra" not in params


def test_the_command_gets_the_options_the_model_built():
    runner = CliRunner()
    _seen.clear()
    done = runner.invoke(_demo_app(), ["demo", "x", "-d", "7", "--mode", "exact", "--keep", "--sizes", "3",
                                       "--sizes", "4", "--json"])
    assert done.exit_code == 0, done.output
    thing, options, as_json = _seen[-1]
    assert (thing, as_json) == ("x", True)
    assert options == _Demo(depth=7, mode="exact", keep=True, sizes=(3, 4), seed=0)
    _seen.clear()
    assert runner.invoke(_demo_app(), ["demo", "y"]).exit_code == 0
    assert _seen[-1][1] == _Demo()


def test_a_value_the_model_refuses_ends_with_one_line_naming_the_flag(tmp_path, capsys):
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 sys\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n")
    assert main(["evaluate", "--run", str(run), "--qrels", str(qrels), "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert err == "gapbench: error: --seed must be greater than or equal to 0, got -1.\n"


def test_evaluate_takes_its_options_from_the_flags(tmp_path, capsys):
    """--n-resamples 0 is EvaluateOptions' 'the means only': the JSON has the mean and no interval."""
    import json

    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\nq2 Q0 d2 1 1.0 sys\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d2 1\nq2 0 d2 1\n")
    assert main(["evaluate", "--run", str(run), "--qrels", str(qrels), "-m", "RR", "--n-resamples", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measures"] == {"RR": pytest.approx((0.5 + 1.0) / 2)}  # q1: first relevant at rank 2; q2: rank 1


def test_help_is_the_description_as_plain_text():
    assert help_text("A probe saved by ``gapbench argus probe``\n    (see :class:`~gapbench.llm.client.LLMClient`, "
                     ":mod:`gapbench.analyses.argus`).") == ("A probe saved by gapbench argus probe (see LLMClient, "
                                                            "gapbench.analyses.argus).")


def test_cli_type_of_the_shared_field_types():
    from gapbench.contract import Depth, Folder, Text

    assert cli_type(Depth) is int
    assert cli_type(Folder | None) == Path | None
    assert cli_type(Text | None) == str | None
    assert cli_type(Literal["a", "b"]) is str and choices(Literal["a", "b"] | None) == ("a", "b")
    assert cli_type(tuple[str, ...]) == list[str] and cli_type(tuple[int, ...] | None) == list[int] | None


def test_gapbench_help_imports_no_verb_and_no_analysis():
    """Generated flags are made when their command is parsed: `gapbench --help` stays light."""
    code = ("import sys\nfrom gapbench.cli import main\nmain(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('gapbench.analyses', 'gapbench.products', "
            "'gapbench.runner', 'gapbench.evaluation', 'numpy', 'pydantic'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert "run" in done.stdout and "evaluate" in done.stdout


def test_run_help_adds_the_registered_rerankers_to_the_description_without_keeping_them(capsys):
    from gapbench.retrieval import RERANKERS, _ensure_builtin
    from gapbench.runner import RunOptions

    _ensure_builtin()
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    described = help_text(RunOptions.model_fields["reranker"].description)
    assert f"{described} Registered: {', '.join(RERANKERS.names())}." in text
    reranker = next(p for p in REGISTRY["run"].click_params() if p.name == "reranker")
    assert reranker.help == described  # the listing was for that help only
