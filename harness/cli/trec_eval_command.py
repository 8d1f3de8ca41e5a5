"""``gapbench trec_eval [-q] [-c] [-n] [-J] [-l N] [-M N] [-N N] [-Z file] [-m M]... qrels run``: trec_eval's own
command line and output, byte for byte, with an opt-in column of 95% CIs (``--ci``) that trec_eval does not have."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import fail

USAGE = "[-q] [-c] [-n] [-J] [-l N] [-M N] [-N N] [-Z file] [-m measure]... qrels run [--ci]"
# trec_eval.c's getopt_long options "hvqm:cl:nD:JN:M:R:T:oZ:" and their long forms, as click reads them (joined short
# flags -qc, values glued on -M100 or -mP.10, --level_for_rel=2, options after the files); --ci, --resamples and
# --seed are gapbench's own. SHORT is what docs/trec-eval.md's test checks the page against.
SHORT = "hvqm:cl:nD:JN:M:R:T:oZ:"


def register(app: typer.Typer) -> None:
    """Add the ``trec_eval`` command to ``app``."""
    app.command("trec_eval", options_metavar=USAGE,
                context_settings={"help_option_names": ["-h", "--help"]})(trec_eval_cmd)


def trec_eval_cmd(
    files: list[str] = typer.Argument(None, metavar="QRELS RUN", show_default=False,
                                      help="trec_eval's two files: the qrels, then the run ('-': stdin)."),
    measure: list[str] = typer.Option(None, "-m", "--measure", help="A measure, its parameters (P.5,10), or a set "
                                                                    "(official, all_trec); repeatable."),
    query_eval_wanted: bool = typer.Option(False, "-q", "--query_eval_wanted", help="Per-query lines too."),
    complete: bool = typer.Option(False, "-c", "--complete_rel_info_wanted",
                                  help="Evaluate the qrels' queries the run lacks."),
    level: str = typer.Option("1", "-l", "--level_for_rel", help="The lowest relevant grade."),
    nosummary: bool = typer.Option(False, "-n", "--nosummary", help="No summary (all) lines."),
    debug: str | None = typer.Option(None, "-D", "--Debug_level", hidden=True),
    judged_only: bool = typer.Option(False, "-J", "--Judged_docs_only", help="Evaluate judged documents only."),
    num_docs: str = typer.Option("0", "-N", "--Number_docs_in_coll", help="Documents in the collection."),
    max_docs: str | None = typer.Option(None, "-M", "--Max_retrieved_per_topic",
                                        help="Evaluate each query's top N documents."),
    rel_format: str = typer.Option("qrels", "-R", "--Rel_info_format", help="qrels (the one format read)."),
    results_format: str = typer.Option("trec_results", "-T", "--Results_format",
                                       help="trec_results (the one format read)."),
    old_format: bool = typer.Option(False, "-o", "--Output_old_results_format", hidden=True),
    zscore: str | None = typer.Option(None, "-Z", "--Zscore", help="Print z-scores against this file's means."),
    version: bool = typer.Option(False, "-v", "--version", help="Print the version."),
    ci: bool = typer.Option(False, "--ci", help="gapbench's own: each mean's 95% bootstrap CI as a fourth column."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples of --ci."),
    seed: int = typer.Option(0, "--seed", help="Seed of --ci's bootstrap."),
) -> None:
    """trec_eval 10's command line and output, byte for byte (docs/trec-eval.md lists every flag); --ci adds each
    summary line's 95% bootstrap interval of the mean as a fourth column."""
    if version:
        from .. import __version__

        typer.echo(f"gapbench {__version__} (trec_eval version 10.0-rc3's measures)", err=True)
        return
    if rel_format != "qrels":
        fail(f"trec_eval -R {rel_format}: gapbench reads qrels only (prefs, qrels_prefs and qrels_jg are not read)")
    if results_format != "trec_results":
        fail(f"trec_eval -T {results_format}: gapbench reads trec_results only")
    if debug is not None:
        fail("trec_eval -D (debug output): gapbench has no debug output; leave -D out")
    if len(files or []) != 2:
        fail(f"trec_eval takes two files, the qrels then the run: gapbench trec_eval {USAGE}")
    flags = {"per_query": query_eval_wanted, "complete": complete, "summary": not nosummary,
             "judged_only": judged_only, "ci": ci}
    _evaluate(Path(files[0]), files[1], list(measure or []), flags, level=_atol(level),
              max_docs=None if max_docs is None else _atol(max_docs), num_docs=_atol(num_docs), zfile=zscore,
              resamples=resamples, seed=seed)


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
