"""``gapbench trec_eval [-q] [-c] [-n] [-J] [-l N] [-M N] [-N N] [-Z file] [-m M]... qrels run``: trec_eval's own
command line and output, byte for byte, with an opt-in column of 95% CIs (``--ci``) that trec_eval does not have."""

from __future__ import annotations

import getopt
from pathlib import Path

import typer

from ..evaluation.trec_eval_run import FLAGS  # noqa: F401 - the flags this command reads, documented
from .common import fail

USAGE = "[-q] [-c] [-n] [-J] [-l N] [-M N] [-N N] [-Z file] [-m measure]... qrels run [--ci]"
# trec_eval.c's getopt_long: its short options, and its long ones (name, whether it takes a value) in the same order.
# gapbench's own: --ci (the 95% CI column) and --resamples/--seed of its bootstrap.
SHORT = "hvqm:cl:nD:JN:M:R:T:oZ:"
LONG = ("help", "version", "query_eval_wanted", "measure=", "complete_rel_info_wanted", "level_for_rel=",
        "nosummary", "Debug_level=", "Judged_docs_only", "Number_docs_in_coll=", "Max_retrieved_per_topic=",
        "Rel_info_format=", "Results_format=", "Output_old_results_format", "Zscore=")
OWN = ("ci", "resamples=", "seed=")
_LONG_TO_SHORT = {"--help": "-h", "--version": "-v", "--query_eval_wanted": "-q", "--measure": "-m",
                  "--complete_rel_info_wanted": "-c", "--level_for_rel": "-l", "--nosummary": "-n",
                  "--Debug_level": "-D", "--Judged_docs_only": "-J", "--Number_docs_in_coll": "-N",
                  "--Max_retrieved_per_topic": "-M", "--Rel_info_format": "-R", "--Results_format": "-T",
                  "--Output_old_results_format": "-o", "--Zscore": "-Z"}
def register(app: typer.Typer) -> None:
    """Add the ``trec_eval`` command to ``app``."""
    app.command("trec_eval", add_help_option=False, options_metavar=USAGE,
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                                  "allow_interspersed_args": False})(trec_eval_cmd)


def trec_eval_cmd(ctx: typer.Context) -> None:
    """trec_eval 10's command line and output, byte for byte (docs/trec-eval.md lists every flag); --ci adds each
    summary line's 95% bootstrap interval of the mean (--resamples N, --seed N) as a fourth column."""
    try:
        opts, operands = getopt.gnu_getopt(list(ctx.args), SHORT, [*LONG, *OWN])
    except getopt.GetoptError as exc:
        fail(f"trec_eval: {exc}; usage: gapbench trec_eval {USAGE}")
    measures: list[str] = []
    flags = {"per_query": False, "complete": False, "summary": True, "judged_only": False, "ci": False}
    level, max_docs, num_docs, zfile, resamples, seed = 1, None, 0, None, 1000, 0
    for flag, value in opts:
        flag = _LONG_TO_SHORT.get(flag, flag)
        if flag == "-h":
            typer.echo(ctx.get_help())
            return
        if flag == "-v":
            from .. import __version__

            typer.echo(f"gapbench {__version__} (trec_eval version 10.0-rc3's measures)", err=True)
            return
        if flag == "-q":
            flags["per_query"] = True
        elif flag == "-m":
            measures.append(value)
        elif flag == "-c":
            flags["complete"] = True
        elif flag == "-n":
            flags["summary"] = False
        elif flag == "-J":
            flags["judged_only"] = True
        elif flag in ("-l", "-M", "-N", "--resamples", "--seed"):
            number = _atol(value)
            if flag == "-l":
                level = number
            elif flag == "-M":
                max_docs = number
            elif flag == "-N":
                num_docs = number
            elif flag == "--resamples":
                resamples = number
            else:
                seed = number
        elif flag == "-Z":
            zfile = value
        elif flag == "-R" and value != "qrels":
            fail(f"trec_eval -R {value}: gapbench reads qrels only (prefs, qrels_prefs and qrels_jg are not read)")
        elif flag == "-T" and value != "trec_results":
            fail(f"trec_eval -T {value}: gapbench reads trec_results only")
        elif flag == "-D":
            fail("trec_eval -D (debug output): gapbench has no debug output; leave -D out")
        elif flag == "--ci":
            flags["ci"] = True
    if len(operands) != 2:
        fail("trec_eval takes two files, the qrels then the run: gapbench trec_eval [-q] [-m measure]... qrels run")
    _evaluate(Path(operands[0]), operands[1], measures, flags, level=level, max_docs=max_docs, num_docs=num_docs,
              zfile=zfile, resamples=resamples, seed=seed)


def _atol(text: str) -> int:
    """A number as trec_eval's atol reads it: the leading digits (and sign); 0 when there are none."""
    import re

    m = re.match(r"\s*([+-]?[0-9]+)", text)
    return int(m.group(1)) if m else 0


def _evaluate(qrels_path: Path, run_path: str, measures: list[str], flags: dict[str, bool], *, level: int,
              max_docs: int | None, num_docs: int, zfile: str | None, resamples: int, seed: int) -> None:
    from .. import trec_names
    from ..errors import GapbenchError
    from ..evaluation import trec_eval_run as te
    from ..formats import read_qrels, read_trec_run

    try:
        run = read_trec_run("/dev/stdin" if run_path == "-" else run_path)
        qrels = read_qrels(qrels_path)
        zscores = te.read_zscores(zfile) if zfile is not None else None
        result = te.run_trec_eval(run, qrels, te.measure_names(measures), level=level, complete=flags["complete"],
                                  max_docs=max_docs, judged_only=flags["judged_only"], num_docs=num_docs,
                                  zscores=zscores)
    except GapbenchError as exc:
        fail(str(exc))
    lines = trec_names.trec_eval_lines(result.measures, result.per_query, result.summary,
                                       queries=flags["per_query"], texts=result.texts, totals=flags["summary"],
                                       prefix="Z" if zscores is not None else "",
                                       integers=zscores is None)
    if flags["ci"] and flags["summary"]:
        lines = _with_cis(lines, result, resamples, seed)
    if lines:
        typer.echo("\n".join(lines))


def _with_cis(lines: list[str], result, resamples: int, seed: int) -> list[str]:
    """Each measure's all line with its 95% percentile-bootstrap CI of the mean (queries resampled) as a fourth
    column, ``[lo, hi]``; the counts (summed, not averaged) and the text lines keep three columns."""
    import math

    from .. import trec_names
    from ..evaluation import trec_eval_run as te
    from ..evaluation.stats import bootstrap_cis

    averaged = {n: list(v.values()) for n, v in result.per_query.items() if n not in te.COUNTS}
    if not averaged:
        return lines
    cis = bootstrap_cis(averaged, n_resamples=resamples, seed=seed)
    out = []
    for line in lines:
        name, qid, _ = line.split("\t")
        name = name.rstrip().removeprefix("Z") if name.startswith("Z") and name.rstrip()[1:] in cis else name.rstrip()
        if qid == "all" and name in cis:
            lo, hi = cis[name]
            if name in trec_names.GEOMETRIC:
                lo, hi = math.exp(lo), math.exp(hi)
            line += f"\t[{lo:.4f}, {hi:.4f}]"
        out.append(line)
    return out
