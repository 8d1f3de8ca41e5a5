"""One table model for every output: a :class:`Table` is built once and rendered to Markdown, HTML or the terminal.

Reports, leaderboards, the regression gate and the analyses all print tables; they build a :class:`Table` and call
:meth:`Table.markdown`, :meth:`Table.html` or :meth:`Table.text`, so escaping, alignment and the significance
superscripts are decided in one place::

    t = Table(["system", "nDCG@10"], [["bm25", "0.4210"], ["dense", "0.3817"]], align="lr")
    print(t.text())        # columns padded; numbers right-aligned
    t.markdown()           # | system | nDCG@10 |  /  |---|---:|  / rows, cells escaped
    t.html()               # <table>...</table>, numeric cells with class="num"

Cells are strings (format numbers before). ``align`` gives one letter per column: ``l`` (left), ``r`` (right) or
``a`` (automatic: right when every cell of a column after the first reads as a number). Markdown writes ``---:`` for
right-aligned columns and ``---`` otherwise, which renderers show left-aligned.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Table", "is_numeric", "md_cell", "md_code", "md_escape", "number", "plural"]

_PLACEHOLDERS = ("-", "?", "nan", "n/a", "")


def is_numeric(cell: str) -> bool:
    """Whether a formatted cell reads as a number: ``0.42``, ``-3.1%``, ``1,234``, ``0.42 [0.40, 0.44]``, ``<0.001``."""
    token = str(cell).strip().split(" ")[0].strip("[](),%<>~").replace(",", "")
    try:
        float(token)
    except ValueError:
        return False
    return True


def md_cell(text: object) -> str:
    """A Markdown table cell: backslashes and pipes escaped, line breaks (every one ``str.splitlines`` knows) folded
    into spaces. Markup in the cell (``**bold**``, a code span) is kept: :class:`Table` renders the cells its builder
    wrote; text that comes from data goes through :func:`md_escape` first."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(out.splitlines()) if any(c in out for c in _BREAKS) else out


_BACKTICKS = re.compile(r"`+")
# what str.splitlines() breaks a line on: a row of a table must stay one line whatever reads it
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# characters that are markup in Markdown or HTML, written as numeric character references: they show as themselves
# and mean nothing, in a table cell or in running text, and md_cell leaves them alone (no backslash to double)
_ENTITIES = {ch: f"&#{ord(ch)};" for ch in "&\\|`<>*_[]#~!"}


def md_escape(text: object) -> str:
    """Text from data (a system name, a source, a note, a description) made safe to place in Markdown, in a table cell
    or a line: backticks, pipes, backslashes, HTML tags, emphasis, links and headings shown as the characters they are
    (character references), and line breaks folded into spaces, so that a value can neither start a code span, end a
    cell, forge a table row nor inject HTML::

        >>> md_escape("a|b `x` <i>\\n| forged |")  # doctest: +SKIP
        'a&#124;b &#96;x&#96; &#60;i&#62; &#124; forged &#124;'

    For Markdown only: HTML output escapes with ``html.escape``."""
    out = "".join(_ENTITIES.get(ch, ch) for ch in str(text))
    return " ".join(out.splitlines()) if any(c in out for c in _BREAKS) else out


def md_code(text: object) -> str:
    """Text from data as a Markdown code span (an id, a retriever spec) that no character of it can end: fenced by
    one backtick more than its longest run of backticks, padded where it starts or ends with one, line breaks folded
    into spaces. In a table the span goes through :func:`md_cell` (a :class:`Table` cell does), which writes its
    pipes ``\\|``, as GitHub's tables want them inside code spans too.

    >>> md_code("a`b")  # doctest: +SKIP
    '``a`b``'"""
    out = str(text)
    out = " ".join(out.splitlines()) if any(c in out for c in _BREAKS) else out
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(out)), default=0) + 1)
    pad = " " if out.startswith("`") or out.endswith("`") else ""
    return f"{fence}{pad}{out}{pad}{fence}"


def number(value: float, places: int = 4) -> str:
    """``value`` with ``places`` decimals, as every table prints a mean: never ``-0.0000`` (a tiny negative rounds to
    0 and is printed as 0), ``nan`` for a value that is not one."""
    text = f"{value:.{places}f}"
    if text.startswith("-") and float(text) == 0:
        return text[1:]
    return text


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 query``, ``11 queries``: the count with the word that agrees with it (``many`` defaults to ``one + "s"``,
    so give it for irregular words: ``plural(n, "query", "queries")``)."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


@dataclass
class Table:
    """A header, rows of string cells, an optional caption, per-column alignment and per-cell superscripts."""

    header: list[str]
    rows: list[list[str]]
    caption: str = ""
    align: str = ""  # one of l/r/a per column; "" = every column automatic
    sup: dict[tuple[int, int], str] = field(default_factory=dict)  # (row, column) -> superscript, e.g. "a,b"

    def __post_init__(self) -> None:
        self.header = [str(h) for h in self.header]
        self.rows = [[str(c) for c in row] for row in self.rows]
        width = len(self.header)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"table row {i} has {len(row)} cells, the header has {width}: {row!r}")
        if self.align and (len(self.align) != width or set(self.align) - set("lra")):
            raise ValueError(f"table align {self.align!r}: give one of l, r, a per column ({width} columns)")

    # -- alignment --------------------------------------------------------------------------------------------------

    def right_aligned(self) -> list[bool]:
        """Per column: True when it is right-aligned (given ``r``, or ``a`` and every cell reads as a number)."""
        align = self.align or "a" * len(self.header)
        out = []
        for j, a in enumerate(align):
            if a == "a":
                cells = [row[j] for row in self.rows if row[j].strip() not in _PLACEHOLDERS]
                out.append(j > 0 and bool(cells) and all(is_numeric(c) for c in cells))
            else:
                out.append(a == "r")
        return out

    def _cell(self, i: int, j: int, text: str, escape) -> str:
        mark = self.sup.get((i, j))
        return escape(text) + (f"<sup>{escape(mark)}</sup>" if mark else "")

    # -- renderings -------------------------------------------------------------------------------------------------

    def markdown(self, *, caption: bool = True) -> str:
        """GitHub-flavoured Markdown; the caption (when asked) as an italic line above the table."""
        right = self.right_aligned()
        lines = [f"*{md_cell(self.caption)}*", ""] if caption and self.caption else []
        lines.append("| " + " | ".join(md_cell(h) or " " for h in self.header) + " |")
        lines.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
        for i, row in enumerate(self.rows):
            lines.append("| " + " | ".join(self._cell(i, j, c, md_cell) for j, c in enumerate(row)) + " |")
        return "\n".join(lines)

    def html(self) -> str:
        """One ``<table>`` element (caption, head, body); right-aligned cells carry ``class="num"``."""
        e = html.escape
        right = self.right_aligned()
        parts = ["<table>"]
        if self.caption:
            parts.append(f"<caption>{e(self.caption)}</caption>")
        parts.append("<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in self.header) + "</tr></thead><tbody>")
        for i, row in enumerate(self.rows):
            cells = []
            for j, c in enumerate(row):
                cls = ' class="num"' if right[j] else ""
                cells.append(f"<td{cls}>{self._cell(i, j, c, e)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
        return "".join(parts)

    def text(self, *, caption: bool = False) -> str:
        """Plain text for the terminal: columns padded, a dashed rule under the header, no trailing spaces."""
        cells = [[c + (f"^{self.sup[(i, j)]}" if (i, j) in self.sup else "") for j, c in enumerate(row)]
                 for i, row in enumerate(self.rows)]
        widths = [max(len(r[j]) for r in [self.header, *cells]) for j in range(len(self.header))]
        right = self.right_aligned()

        def line(row: Sequence[str]) -> str:
            cells = (c.rjust(w) if right[j] else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths)))
            return "  ".join(cells).rstrip()

        out = [self.caption] if caption and self.caption else []
        out += [line(self.header), "  ".join("-" * w for w in widths), *map(line, cells)]
        return "\n".join(out)
