"""The one table model (gapbench.tables): the three renderings, escaping, alignment and superscripts."""

import pytest

from gapbench.tables import Table, is_numeric, md_cell


def _table():
    return Table(["system", "nDCG@10", "note"], [["bm25", "0.4210", "a|b"], ["dense", "0.38", "x\ny"]],
                 caption="Means", sup={(0, 1): "b"})


def test_markdown_escapes_aligns_and_marks():
    assert _table().markdown() == "\n".join([
        "*Means*",
        "",
        "| system | nDCG@10 | note |",
        "|---|---:|---|",
        "| bm25 | 0.4210<sup>b</sup> | a\\|b |",
        "| dense | 0.38 | x y |",
    ])
    assert _table().markdown(caption=False).splitlines()[0] == "| system | nDCG@10 | note |"


def test_html_escapes_and_classes_numbers():
    t = Table(["a<b", "n"], [["<i>", "1,234"], ["x&y", "-"]], caption="c&d", sup={(1, 1): "a"})
    assert t.html() == (
        "<table><caption>c&amp;d</caption><thead><tr><th>a&lt;b</th><th>n</th></tr></thead><tbody>"
        '<tr><td>&lt;i&gt;</td><td class="num">1,234</td></tr>'
        '<tr><td>x&amp;y</td><td class="num">-<sup>a</sup></td></tr></tbody></table>')


def test_text_pads_and_right_aligns_numbers():
    t = Table(["task", "mean", "queries"], [["scifact", "0.6", "300"], ["nfcorpus/long", "0.3251", "-"]])
    assert t.text() == "\n".join([
        "task             mean  queries",
        "-------------  ------  -------",
        "scifact           0.6      300",
        "nfcorpus/long  0.3251        -",
    ])


def test_explicit_alignment_wins_over_the_guess():
    t = Table(["id", "count"], [["007", "3"]], align="rl")
    assert t.right_aligned() == [True, False]
    assert t.markdown().splitlines()[1] == "|---:|---|"


def test_first_column_and_placeholder_columns_stay_left():
    t = Table(["qid", "grade", "why"], [["1", "-", "x"], ["2", "?", "y"]])
    assert t.right_aligned() == [False, False, False]


@pytest.mark.parametrize("cell,numeric", [
    ("0.42", True), ("-3.1%", True), ("1,234", True), ("0.42 [0.40, 0.44]", True), ("<0.001", True),
    ("1e-05", True), ("bm25", False), ("", False), ("n/a", False),
])
def test_is_numeric(cell, numeric):
    assert is_numeric(cell) is numeric


def test_md_cell():
    # every line break str.splitlines knows is folded into one space (CRLF is one break)
    assert md_cell("a\\b|c\r\nd") == "a\\\\b\\|c d"
    assert md_cell("a\u2028b\rc\x85d") == "a b c d"


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="row 1 has 1 cells, the header has 2"):
        Table(["a", "b"], [["1", "2"], ["3"]])
    with pytest.raises(ValueError, match="one of l, r, a per column"):
        Table(["a", "b"], [["1", "2"]], align="lx")
