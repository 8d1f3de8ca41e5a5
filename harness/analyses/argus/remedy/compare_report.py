"""The ARGUS comparison as a result: :class:`ArgusComparison` (the model of ``argus_compare.json`` with its Markdown
rendering), its tables and figure, and its files (``argus_compare.json``, ``.md``, ``.png``).

The rendering reads the file's layout (a mapping), so a file written by an earlier version renders as it did::

    print(comparison_markdown(read_outputs("out/")))
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import PrivateAttr

from ....errors import GapbenchError
from ....files import output_folder, write_figure, write_text_atomic
from ....schemas import ArgusCompare, SchemaError, read_back
from ....schemas.argus_compare import Variant
from ....tables import Table
from ..probe.probe_files import max_rps_table
from .kb import PIPELINE_CHECK_NOTE

KIND: Final = "argus_compare"


class ArgusComparison(ArgusCompare):
    """The comparison :func:`gapbench.argus_compare` returns: the fields of :class:`gapbench.schemas.ArgusCompare`
    (what ``argus_compare.json`` holds; this class adds none), printed as Markdown tables, and, for a comparison run in
    this process, each variant's :class:`gapbench.schemas.RunResults` (per-query values)."""

    # task -> variant -> Results; {} when read from a file
    _results: dict[str, dict[Variant, Any]] = PrivateAttr(default_factory=dict)

    def keep_results(self, results: Mapping[str, Mapping[Variant, Any]]) -> None:
        """Hold each task's evaluation results (task -> variant -> Results); they are not part of the file."""
        self._results = {task: dict(per) for task, per in results.items()}

    def results(self, task: str | None = None) -> dict[Variant, Any]:
        """variant -> Results (per-query values, means, CIs) of ``task`` (default: the first), as evaluated in this
        process; a comparison read from a file has only the means and intervals of its ``tasks``."""
        name = next(iter(self.tasks)) if task is None else task
        if name not in self.tasks:
            raise GapbenchError(f"task {name!r} is not in this comparison; it has {', '.join(self.tasks)}.")
        if name not in self._results:
            raise GapbenchError(f"the per-query results of {name!r} are not kept in argus_compare.json: re-run the "
                                "comparison to get them (the file has each variant's means and ci95).")
        return dict(self._results[name])

    def markdown(self) -> str:
        return comparison_markdown(self.model_dump(mode="json", exclude_unset=True))

    def __str__(self) -> str:
        return self.markdown()


def _cell(t: Mapping[str, Any], v: str, m: str) -> str:
    cell = f"{100 * t['variants'][v]['means'][m]:.2f}"
    if v == "original":
        return cell
    dl = t["deltas"][v][m]
    return cell + f" ({100 * dl['delta']:+.2f}{'*' if dl['significant'] else ''})"


def variant_table(t: Mapping[str, Any]) -> Table:
    """One task's variants: each measure x100 with its delta vs original (``*`` significant), views/doc, indexed."""
    measures = list(t["variants"]["original"]["means"])
    rows = [[v, *(_cell(t, v, m) for m in measures), f"{row['growth']['views_per_doc']:.2f}",
             str(row["growth"]["indexed"])] for v, row in t["variants"].items()]
    return Table(["variant", *measures, "views/doc", "indexed"], rows, align="l" * (len(measures) + 3))


def average_table(fba: Mapping[str, Mapping[str, float]]) -> Table:
    """The Full Benchmark Avg.: one row per variant, each measure x100."""
    measures = list(next(iter(fba.values())))
    rows = [[v, *(f"{100 * row[m]:.2f}" for m in measures)] for v, row in fba.items()]
    return Table(["variant", *measures], rows, align="l" * (len(measures) + 1))


def _task_lines(task: str, t: Mapping[str, Any]) -> list[str]:
    dg = t["diagnosis"]
    sec = dg["seconds"]
    lines = [f"## {task} ({t['n_queries']} queries)", "", variant_table(t).markdown(), "",
             "Values x100; (delta vs original, * = significant at 0.05: paired randomization test, "
             "Holm-corrected over the variant pairs).", "",
             f"Diagnosis ({dg['method']['method']}): {dg['n_mentions']} mentions in {dg['n_docs']} documents, "
             f"{dg['n_flagged_entities']} flagged entities in {dg['n_docs_flagged']} documents. Cost: NER "
             f"{sec['ner']:.1f} s, embedding {sec['embed']:.1f} s, probe {sec['probe']:.2f} s, "
             + (f"audit {sec['audit']:.1f} s, " if sec.get("audit") else "") + "KB lookup "
             f"{t['kb_seconds']:.2f} s."]
    if t.get("llm"):
        u = t["llm"]
        lines.append(f"LLM synthesis: {u.get('requests', 0)} requests, {u.get('calls', 0)} calls, "
                     f"{u.get('cache_hits', 0)} cache hits, {u.get('prompt_tokens', 0)} prompt and "
                     f"{u.get('completion_tokens', 0)} completion tokens, {u.get('truncated', 0)} answers cut by "
                     "their token budget.")
    return lines + _table4_lines(t.get("max_rps_delta")) + [f"- {note}" for note in t.get("notes", [])] + [""]


def _table4_lines(deltas: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """Table 4 of the Original run, or nothing (a result written before it, or a depth under every cut-off)."""
    if not deltas:
        return []
    no_ent = next(iter(deltas.values()))["no_entities"]
    return ["", "Max predicted RPS of gold documents retrieved vs not in the top k, Original run (Table 4, appendix "
            f"E.1); {no_ent} (query, gold document) pairs whose document has no entity are left out.", "",
            max_rps_table({f"top {k}": d for k, d in deltas.items()}).markdown(), ""]


def _diagnosis_text(cfg: Mapping[str, Any]) -> str:
    if "diagnosis" not in cfg:  # a result written before the diagnosis setting existed: a probe, or the label prior
        return f"probe {cfg['probe'] or 'none (label-prior fallback)'}"
    used = cfg["diagnosis_method"] + (f" {cfg['probe']}" if cfg.get("probe") else "")
    return f"diagnosis {cfg['diagnosis']} ({used})"


def comparison_markdown(d: Mapping[str, Any]) -> str:
    """Markdown tables from an ``argus_compare.json`` document (a mapping, as read from the file)."""
    cfg = d["config"]
    lines = [f"# ARGUS with and without: {d['task']} | {d['retriever']}", "",
             *([f"**{PIPELINE_CHECK_NOTE}**", ""] if cfg.get("pipeline_check") else []),
             f"Diagnosis: tau={cfg['tau']}, k_aug={cfg['k_aug']}, NER {cfg['ner']}, Reference KB {cfg['kb']}, "
             f"{_diagnosis_text(cfg)}; retrieval depth {cfg['k']}, seed {cfg['seed']}.",
             ""]
    for task, t in d["tasks"].items():
        lines += _task_lines(task, t)
    fba = d.get("full_benchmark_avg") or {}
    if d.get("suite") and fba:
        lines += [f"## Full Benchmark Avg. ({d['suite']}, {len(d['tasks'])} tasks)", "", average_table(fba).markdown(),
                  ""]
    lines += [f"- {note}" for note in d.get("notes", [])]
    return "\n".join(lines).rstrip() + "\n"


def plot(d: Mapping[str, Any], path: Path) -> None:
    """nDCG@k per variant (x100): the suite's Full Benchmark Avg., else the first task."""
    from ....files import pyplot

    plt = pyplot()
    if d.get("suite") and d.get("full_benchmark_avg"):
        table, title = d["full_benchmark_avg"], f"{d['task']} (Full Benchmark Avg.)"
    else:
        first = next(iter(d["tasks"]))
        table = {v: r["means"] for v, r in d["tasks"][first]["variants"].items()}
        title = first
    cuts = [m for m in next(iter(table.values())) if m.startswith("nDCG@")]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / max(1, len(table))
    for i, (v, row) in enumerate(table.items()):
        ax.bar([j + i * width for j in range(len(cuts))], [100 * row[m] for m in cuts], width, label=v)
    ax.set_xticks([j + width * (len(table) - 1) / 2 for j in range(len(cuts))], cuts)
    ax.set_ylabel("x100")
    ax.set_title(f"ARGUS: {title} | {d['retriever']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path, dpi=110)


def write_outputs(result: ArgusCompare, out: str | os.PathLike, *, with_plot: bool = True) -> dict[str, Path]:
    """``argus_compare.json``, ``.md`` and ``.png`` in ``out`` (created), each written atomically."""
    out = output_folder(out)
    d = result.model_dump(mode="json", exclude_unset=True)
    paths = {"json": out / f"{KIND}.json", "md": out / f"{KIND}.md"}
    write_text_atomic(paths["json"], result.model_dump_json(indent=2, exclude_unset=True) + "\n")
    write_text_atomic(paths["md"], comparison_markdown(d))
    if with_plot:
        paths["png"] = out / f"{KIND}.png"
        plot(d, paths["png"])
    return paths


def read_comparison(out: str | os.PathLike) -> ArgusComparison:
    """The comparison in ``out`` (a folder holding ``argus_compare.json``, or the file), checked against its schema; a
    file written by an earlier version loads (its missing keys stay unset)."""
    import json

    path = Path(out) / f"{KIND}.json" if Path(out).is_dir() else Path(out)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GapbenchError(f"{path}: cannot read an argus_compare result ({exc}).") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise SchemaError(f"kind {data.get('kind') if isinstance(data, dict) else None!r}; expected {KIND!r} (a file "
                          "written by `gapbench argus compare`).", path=path)
    read_back("argus_compare", data, path, "re-run `gapbench argus compare` to rewrite it")
    return ArgusComparison.model_validate(data)


def read_outputs(out: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``argus_compare.json`` document in ``out`` (checked against its schema), e.g. for ``gapbench report``."""
    return read_comparison(out).model_dump(mode="json", exclude_unset=True)
