"""Paired comparison of two or more systems on the same queries.

:func:`compare` returns :class:`gapbench.schemas.Comparison`, the model of ``gapbench compare --json``: each system's
results (means and CIs; in memory, the per-query values the tests were computed from), the paired tests and the
re-score checks."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from ..contract import Alpha, Options, Permutations, Seed
from ..errors import ConfigError, GapbenchError
from ..schemas.comparison import Comparison, MeasureMDE, PairTest
from ..schemas.run import RunResults
from .evaluation import evaluate
from .stats import POWER, holm, paired_mde, paired_t_test, randomization_test


class CompareOptions(Options):
    """The settings of a comparison's paired tests, checked when made (an :class:`~gapbench.errors.OptionsError`
    names the field, in the words every options class uses); :func:`compare` and :func:`compare_run_dirs` build one
    from their keywords."""

    verb = "gapbench.compare"  # named by the error of a setting it does not have

    alpha: Alpha = Field(0.05, description="A difference is significant when its Holm-corrected p is below this.")
    n_permutations: Permutations = Field(10_000, description="Sign flips of each paired randomization test.")
    seed: Seed = Field(0, description="Seed of the sign flips (and of the bootstrap of runs evaluated here).")


def compare(
    items: Sequence[RunResults] | Sequence[Any],
    qrels: Any = None,
    measures: Iterable[str] | None = None,
    options: CompareOptions | None = None,
    **settings: Any,
) -> Comparison:
    """Compare systems: pass results of :func:`gapbench.evaluate` or :func:`gapbench.run` (same task), or runs
    together with ``qrels``.

    >>> cmp = compare([gapbench.run(task, "bm25"), gapbench.run(task, "dense")])  # doctest: +SKIP
    >>> cmp = compare([run_a, run_b], qrels, ["nDCG@10"])  # doctest: +SKIP
    """
    o = CompareOptions.of(options, settings)  # refused before any work
    alpha, n_permutations, seed = o.alpha, o.n_permutations, o.seed
    if len(items) < 2:
        raise GapbenchError("compare needs at least two systems.")
    results: list[RunResults] = []
    for item in items:
        if isinstance(item, RunResults):
            if not item.per_query:
                raise GapbenchError(f"{item.system!r}: these results hold no per-query values (a results.json read "
                                    "on its own); read the run directory with gapbench.store.load_results.")
            results.append(item)
        else:
            if qrels is None:
                raise GapbenchError("compare was given runs without qrels; pass qrels=... or evaluated results.")
            results.append(evaluate(item, qrels, measures, seed=seed))
    # a local folder's task is named by its path, and one folder at two paths is one task (its identity is its
    # content, which compare_run_dirs checks): only registered names are told apart here
    named = [r for r in results if r.task and not os.path.isabs(r.task)]
    other = next((r for r in named if r.task != named[0].task), None)
    if other is not None:  # before the names: two tasks' runs of one retriever share a name
        raise ConfigError(f"{other.system!r} holds results on task {other.task!r} and {named[0].system!r} on task "
                          f"{named[0].task!r}; compare results of one task (paired tests need the same queries and "
                          "qrels).")
    names = [r.system for r in results]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise GapbenchError(f"two systems are both named {dup!r}; give each run a distinct name.")
    base_q = results[0].query_ids
    base_m = results[0].measures
    for r in results[1:]:
        if set(r.query_ids) != set(base_q):
            raise GapbenchError(
                f"{r.system!r} was evaluated on {r.n_queries} queries and {results[0].system!r} on "
                f"{results[0].n_queries}; paired tests need the same queries (same task and qrels)."
            )
        if list(r.measures) != list(base_m):
            raise GapbenchError(f"{r.system!r} has measures {list(r.measures)}, {results[0].system!r} has "
                                f"{list(base_m)}.")
    tests: list[PairTest] = []
    mde: list[MeasureMDE] = []
    for m in base_m:
        raw, diffs = [], []
        for a, b in itertools.combinations(results, 2):
            va = [a.per_query[m][q] for q in base_q]
            vb = [b.per_query[m][q] for q in base_q]
            raw.append((a, b, a.means[m] - b.means[m], randomization_test(va, vb, n_permutations, seed),
                        paired_t_test(va, vb)))
            diffs.append([x - y for x, y in zip(va, vb)])
        mde.append(MeasureMDE(measure=m, power=POWER, **paired_mde(diffs, alpha, POWER)))
        adj_r = holm([x[3] for x in raw])
        adj_t = holm([x[4] if x[4] == x[4] else 1.0 for x in raw])
        for (a, b, delta, pr, pt), hr, ht in zip(raw, adj_r, adj_t):
            tests.append(PairTest(measure=m, a=a.system, b=b.system, delta=delta, p_randomization=pr, p_ttest=pt,
                                  p_randomization_holm=hr, p_ttest_holm=ht))
    return Comparison(systems=results, tests=tuple(tests), alpha=alpha, correction="holm", checks=(), mde=tuple(mde))


def compare_run_dirs(
    run_dirs: Sequence[str | os.PathLike[str]],
    measures: Sequence[str] | None = None,
    *,
    n_permutations: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
    rescore: str = "auto",
    data: Sequence[str] = (),
) -> Comparison:
    """Compare stored run directories of one task, read, checked and re-scored (``rescore``, see
    :mod:`gapbench.evaluation.rescore`) as ``gapbench regress`` does.

    A local task is its content (:mod:`gapbench.identity`): runs of the same BEIR folder at two paths are one task,
    re-scored from the data found where a manifest recorded it or given in ``data`` (folders or task strings).
    Systems stored under the same name (one retriever with other options) are told apart by their folder's name.
    """
    from ..identity import identity_of
    from ..store import load_results
    from .rescore import Rescorer, check_mode

    CompareOptions(alpha=alpha, n_permutations=n_permutations, seed=seed)  # refused before any run directory is read
    check_mode(rescore)
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        shown = f" (got only {dirs[0]})" if dirs else ""
        raise ConfigError(f"compare needs two or more run directories{shown}; add another one made by "
                          "`gapbench run TASK -r RETRIEVER --output DIR`.")
    for i, d in enumerate(dirs):
        for e in dirs[:i]:
            if os.path.lexists(d) and os.path.lexists(e) and os.path.realpath(d) == os.path.realpath(e):
                raise ConfigError(f"{d} is given twice (also as {e}); compare different run directories.")
    loaded = [(d, load_results(d)) for d in dirs]
    ids = [identity_of(d, r, check_name=False) for d, r in loaded]
    first_dir, first = loaded[0]
    for (d, r), ident in zip(loaded[1:], ids[1:]):
        if ident.key != ids[0].key:
            raise ConfigError(f"{d} holds task {ident.label!r} and {first_dir} holds task {ids[0].label!r}; compare "
                              "run directories of one task" + (" (a local task is its data: the same corpus, queries "
                              "and qrels)" if ident.local or ids[0].local else "") + ".")
    if measures is not None:
        wanted = list(measures)
        if not wanted or not all(isinstance(m, str) and m for m in wanted):
            raise ConfigError(f"measures is {wanted!r}; name stored measures, e.g. ['nDCG@10', 'R@100'], or leave "
                              "measures out (None) to compare every measure the run directories share.")
        twice = sorted({m for m in wanted if wanted.count(m) > 1})
        if twice:
            raise ConfigError(f"measures lists {twice[0]} twice; name each measure once.")
        for d, r in loaded:
            missing = [m for m in wanted if m not in r.measures]
            if missing:
                raise ConfigError(f"{d}: {r.system!r} has no stored {missing[0]} (stored: {', '.join(r.measures)}); "
                                  "pick stored measures, or re-run with them.")
    else:
        wanted = [m for m in first.measures if all(m in r.measures for _, r in loaded)]
        if not wanted:
            raise ConfigError(f"the run directories share no measure ({first_dir} stores "
                              f"{', '.join(first.measures)}); re-run them with the same measures.")
    qids = set(first.query_ids)
    for d, r in loaded[1:]:
        if set(r.query_ids) != qids:
            only_a, only_b = sorted(qids - set(r.query_ids)), sorted(set(r.query_ids) - qids)
            raise ConfigError(f"{first_dir} and {d} scored different queries ({len(only_a)} only in the first, e.g. "
                              f"{only_a[:3]}; {len(only_b)} only in the second, e.g. {only_b[:3]}); paired tests need "
                              "runs of the same task revision and queries.")
    rescorer = Rescorer(rescore, data)
    check = rescorer.check(ids[0].label or str(first_dir), loaded, wanted)
    unused_data(rescorer)
    names = [r.system for _, r in loaded]
    results = [r.model_copy(update={
        "system": f"{r.system} ({_folder_label(d, dirs)})" if names.count(r.system) > 1 else r.system,
        "measures": {m: r.measures[m] for m in wanted},
        "ci95": None if r.ci95 is None else {m: r.ci95[m] for m in wanted if m in r.ci95}}) for d, r in loaded]
    compared = compare(results, n_permutations=n_permutations, alpha=alpha, seed=seed)
    return compared.model_copy(update={"checks": (check,)})


def unused_data(rescorer: Any) -> None:
    """Refuse ``--data`` that no run directory was made on: a wrong folder must not pass unnoticed."""
    unused = rescorer.unused_data()
    if unused:
        raise ConfigError(f"data {unused[0]} holds data that none of the run directories was made on (its corpus, "
                          "queries or qrels differ); give the folder the runs were made on, or leave it out of data.")


def _folder_label(d: Path, dirs: Sequence[Path]) -> str:
    """The shortest tail of ``d``'s path that no other directory shares (base/wknow vs cand/wknow)."""
    parts = d.parts
    for n in range(1, len(parts) + 1):
        tail = parts[-n:]
        if all(e.parts[-n:] != tail for e in dirs if e != d):
            return str(Path(*tail))
    return str(d)
