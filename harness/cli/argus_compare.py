"""``gapbench argus compare``: Original vs ARGUS Expansion and Synthesis indexing (see
:mod:`gapbench.analyses.argus.remedy.remedy_compare`); its flags map onto ``ArgusCompareOptions`` in one place,
:data:`FLAGS`.

``register_argus(argus_app)`` adds the command to the ``gapbench argus`` sub-app (harness/cli/argus.py);
``register(app)`` finds that sub-app on the main app, or creates it when nothing registered it yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from . import llm_options as cli_llm
from .contract import Flags

ARGUS_HELP = "ARGUS: entity retrievability audit, blind-spot probes, and knowledge-base augmentation."


def _variant_list(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _measures(values: List[str]) -> list[str]:
    from .common import measure_list

    return measure_list(values)


# the flags of `argus compare` onto ArgusCompareOptions: each flag is the field of its name (llm, a client object, is
# set from Python only); --variants is a comma list, -m/--measures may repeat and hold commas
FLAGS = Flags("argus compare", "gapbench.analyses.argus.remedy.remedy_compare:ArgusCompareOptions",
              cli_only={"task", "retriever", "as_json"}, parse={"variants": _variant_list, "measures": _measures},
              library_only={"llm"})
# ArgusCompareOptions.measures' default, written out so that the CLI imports no analysis at start-up
# (tests/test_cli_contract.py checks that the two agree)
DEFAULT_MEASURES = ["nDCG@5", "nDCG@10", "nDCG@20", "nDCG@50", "R@5", "R@10", "R@20", "R@50", "R@100"]


@cli_llm.sampling_options
def compare_cmd(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="Task or suite name (e.g. impliret/multispeaker/wknow)."),
    retriever: str = typer.Option(..., "--retriever", "-r",
                                  help="Retriever spec; used for embedding, diagnosis and ranking."),
    probe: Optional[Path] = typer.Option(None, "--probe", help="A probe saved by `gapbench argus probe` (Probe.save); "
                                         "default: the probe bound to the retriever's fingerprint, if any."),
    diagnosis: str = typer.Option("auto", "--diagnosis", help="auto (the probe given or bound to the retriever, else "
                                  "an exact RPS audit), probe, audit, or label-prior (FAC/GPE/LOC/ORG flagged)."),
    kb: str = typer.Option("wikipedia-slice", "--kb", help="Reference KB: a JSONL file of {text, and id, qid or "
                           "title} records, or a packaged name: wikipedia-slice (620 Wikipedia first paragraphs, the "
                           "default) or landmarks-oracle (states ImpliRet's wknow answers: a pipeline check)."),
    tau: float = typer.Option(0.3, "--tau", help="Flag entities with predicted RPS below this."),
    k_aug: int = typer.Option(2, "--k-aug", help="KB passages per flagged entity."),
    ner: str = typer.Option("spacy", "--ner", help="spacy (offline default), auto (the paper's "
                             "dslim/bert-base-NER when it is on disk, a folder or in the HF cache; else spacy) or a "
                             "transformers NER model name or folder."),
    variants: Optional[str] = typer.Option(None, "--variants", help="Which indexings to compare, e.g. "
                                           "original,expansion,synthesis. Default: all three with an LLM endpoint "
                                           "(--llm-base-url, $OPENAI_BASE_URL); original,expansion without one (ask "
                                           "for synthesis by name to run it on the slow embedded model)."),
    measures: List[str] = typer.Option(DEFAULT_MEASURES, "--measures", "-m", help="Measures, repeatable or comma "
                                       "separated."),
    k: int = typer.Option(100, "--k", help="Documents retrieved per query."),
    seed: int = typer.Option(0, "--seed"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint for synthesis; "
                                               "without one (nor $OPENAI_BASE_URL, $OPENAI_API_KEY) synthesis runs "
                                               "only when --variants names it, on the embedded LLM."),
    llm_model: Optional[str] = typer.Option(None, "--llm-model", help="Model for synthesis, as the endpoint names it "
                                            "(or a .gguf file for the embedded LLM; default SmolLM2)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write argus_compare.json/.md/.png here."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON result."),
) -> None:
    """With and without ARGUS: Original, Expansion and Synthesis indexing with deltas and paired tests."""
    from ..analyses.argus.remedy.remedy_compare import argus_compare
    from .common import check_output

    check_output(output, run_dir=False)
    options = FLAGS.build(ctx.params)
    result = argus_compare(task, retriever, options)
    typer.echo(json.dumps(result.to_dict(), indent=2) if as_json else str(result))
    if output is not None and not as_json:
        typer.echo(f"wrote {output}/argus_compare.json, .md, .png")


def register_argus(argus_app: typer.Typer) -> None:
    """Add ``compare`` to the ``gapbench argus`` sub-app (once)."""
    if any(c.name == "compare" for c in argus_app.registered_commands):
        return
    argus_app.command("compare")(compare_cmd)


def register(app: typer.Typer) -> None:
    """Add ``argus compare`` to the main app, on its existing ``argus`` group or a new one."""
    for group in app.registered_groups:
        if group.name == "argus" and group.typer_instance is not None:
            register_argus(group.typer_instance)
            return
    argus_app = typer.Typer(add_completion=False, no_args_is_help=True, help=ARGUS_HELP)
    register_argus(argus_app)
    app.add_typer(argus_app, name="argus")
