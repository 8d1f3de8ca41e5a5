"""``gapbench argus compare``: Original vs ARGUS Expansion and Synthesis indexing (see
:mod:`gapbench.analyses.argus.remedy.remedy_compare`); its flags map onto ``ArgusCompareOptions`` in one place,
:data:`FLAGS`.

``register_argus(argus_app)`` adds the command to the ``gapbench argus`` sub-app (harness/cli/argus.py);
``register(app)`` finds that sub-app on the main app, or creates it when nothing registered it yet.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from . import llm_options as cli_llm
from .from_options import FromOptions, add_command, command

ARGUS_HELP = "ARGUS: entity retrievability audit, blind-spot probes, and knowledge-base augmentation."


def _variant_list(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _measures(values: list[str]) -> list[str] | None:
    from .common import measure_list

    return measure_list(values)


# the flags of `argus compare` are ArgusCompareOptions' fields (llm, a client object, is set from Python only);
# --variants is a comma list, -m/--measures may repeat and hold commas
FLAGS = FromOptions("argus compare", "gapbench.analyses.argus.remedy.remedy_compare:ArgusCompareOptions",
                    short={"measures": ("-m",), "output": ("-o",)},
                    kinds={"probe": Path | None, "variants": str | None, "measures": list[str]},
                    parse={"variants": _variant_list, "measures": _measures}, library_only=frozenset({"llm"}))


@cli_llm.sampling_options
@command(FLAGS)
def compare_cmd(
    task: str = typer.Argument(..., help="Task or suite name (e.g. impliret/multispeaker/wknow)."),
    retriever: str = typer.Option(..., "--retriever", "-r",
                                  help="Retriever spec; used for embedding, diagnosis and ranking."),
    options=None,  # ArgusCompareOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print the JSON result."),
) -> None:
    """With and without ARGUS: Original, Expansion and Synthesis indexing with deltas and paired tests."""
    from ..analyses.argus.remedy.remedy_compare import argus_compare
    from .common import check_output

    output = options.output
    check_output(output, run_dir=False)
    result = argus_compare(task, retriever, options)
    typer.echo(json.dumps(result.model_dump(mode="json", exclude_unset=True), indent=2) if as_json else str(result))
    if output is not None and not as_json:
        typer.echo(f"wrote {output}/argus_compare.json, .md, .png")


def register_argus(argus_app: typer.Typer) -> None:
    """Add ``compare`` to the ``gapbench argus`` sub-app (once)."""
    if any(c.name == "compare" for c in argus_app.registered_commands):
        return
    add_command(argus_app, "compare", compare_cmd)


def register(app: typer.Typer) -> None:
    """Add ``argus compare`` to the main app, on its existing ``argus`` group or a new one."""
    for group in app.registered_groups:
        if group.name == "argus" and group.typer_instance is not None:
            register_argus(group.typer_instance)
            return
    argus_app = typer.Typer(add_completion=False, no_args_is_help=True, help=ARGUS_HELP)
    register_argus(argus_app)
    app.add_typer(argus_app, name="argus")
