"""The blocks of a report page (text, tables, figures), the figures drawn for it (matplotlib, Agg) and the number
formatting its tables share. :mod:`gapbench.products.report_build` puts them together."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..files import pyplot
from ..tables import Table


@dataclass
class Figure:
    """A PNG of the report: its file name beside report.md (numbered by :func:`name_figures`), bytes and caption."""

    name: str
    png: bytes
    caption: str = ""


Block = str | Table | Figure


@dataclass
class Section:
    """A section of the page: its anchor, title and blocks in order."""

    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


def name_figures(sections: list[Section]) -> None:
    """Number every figure across the report, in page order: ``fig03-<section>-<name>.png``."""
    n = 0
    for s in sections:
        for b in s.blocks:
            if isinstance(b, Figure):
                n += 1
                b.name = f"fig{n:02d}-{slug(s.id)}-{slug(b.name)}.png"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:40] or "x"


# ---------------------------------------------------------------- formatting


def fmt(v: Any) -> str:
    """A value as a table cell: 4 decimals, 3 significant digits when very small or large, yes/no, a count of a
    long list or of a mapping's entries."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            return f"{v:.3g}"
        return f"{v:.4f}"
    if isinstance(v, list):
        return f"[{len(v)} values]" if len(v) > 6 else ", ".join(fmt(x) for x in v)
    if isinstance(v, Mapping):
        return f"{{{len(v)} entries}}"
    return str(v)


def p_value(v: float) -> str:
    """A p-value as a table cell (below 1e-4 as "<0.0001")."""
    return "<0.0001" if v < 1e-4 else f"{v:.4f}"


def is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ---------------------------------------------------------------- plots (matplotlib, Agg)


def png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (no timestamp or software tag, so the same figure gives the same bytes)."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    pyplot().close(fig)
    return buf.getvalue()


def boxplot(groups: Mapping[str, Sequence[float]], ylabel: str, title: str, name: str) -> Figure:
    """A box per group (quartiles, median, mean)."""
    plt = pyplot()
    labels = list(groups)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.9 * len(labels) + 2), 3.6), dpi=100)
    ax.boxplot([list(groups[k]) for k in labels], showmeans=True)
    ax.set_xticks(range(1, len(labels) + 1))
    tilt = len(labels) > 4
    ax.set_xticklabels([str(k)[:24] for k in labels], rotation=30 if tilt else 0, ha="right" if tilt else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return Figure(name, png(fig), f"{title} (box: quartiles; line: median; triangle: mean)")


def histograms(groups: Mapping[str, Sequence[float]], xlabel: str, title: str, name: str) -> Figure:
    """One step histogram per group on shared bins (0 to 1 when every value lies there)."""
    import numpy as np

    plt = pyplot()
    allv = np.concatenate([np.asarray(v, dtype=float) for v in groups.values()])
    lo, hi = float(allv.min()), float(allv.max())
    if 0.0 <= lo and hi <= 1.0:
        lo, hi = 0.0, 1.0
    bins = np.linspace(lo, hi if hi > lo else lo + 1.0, 21)
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
    for i, (k, v) in enumerate(groups.items()):
        ax.hist(v, bins=bins, histtype="step", linewidth=1.6, color=f"C{i}", label=str(k)[:30])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("queries" if len(groups) > 1 or name == "histogram" else "count")
    ax.set_title(title)
    if len(groups) > 1:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return Figure(name, png(fig), title)
