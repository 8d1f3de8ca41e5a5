"""One grammar for the short strings that name and configure things: retriever, reranker, augmenter and task specs,
lists of them, fusion's option bracket and component list, and measure lists.

The grammar (every reader below is this one scanner with a different separator)::

    spec    = NAME [ ":" options ]                 bm25:k1=0.9,method=robertson   bright/biology:instructions=true
    options = option *( "," option )              (fusion and the LLM retrievers: "[" options "]" before the rest)
    option  = KEY "=" value
    value   = quoted | bare
    quoted  = '"' ... '"'  or  "'" ... "'"         a quote opens only at the start of a value (right after '=') or of
                                                   an item, so an apostrophe inside a prompt stays text; inside it
                                                   '\\' escapes the quote mark and '\\' itself, any other backslash is
                                                   kept (C:\\data); ',', '=', '+', ':' and spaces are text
    bare    = text up to the next ","; a "," followed by text holding no "=" continues the value
              (dense:query_prompt=query: a, b has one option)
    list    = item *( SEPARATOR item )             separators outside quotes (and, where the list allows, outside
                                                   brackets) split: measures at ',' and spaces, outside (...) and {...};
                                                   fusion's components at '+', outside [...] and (...)

So a value holding ``,x=`` (a path such as ``/data/a,x=1/model``) is written quoted::

    dense:model="/data/a,x=1/model"

Without the quotes the ``,x=`` starts a second option ``x``; that reading is kept because every spec written before
the quotes existed means it.

>>> parse_spec('dense:model="/data/a,x=1/model",batch_size=8')
('dense', {'model': '/data/a,x=1/model', 'batch_size': '8'})
>>> split_list("nDCG@10, P(rel=2,judged_only=true)@5 AP", ", ", brackets="(){}")
['nDCG@10', 'P(rel=2,judged_only=true)@5', 'AP']
"""

from __future__ import annotations

from collections.abc import Collection

from .errors import ConfigError

MAX_SPEC_LEN = 4096  # a name or spec is typed or scripted; longer text is a mistake (a file pasted into the argument)
QUOTES = "\"'"

EXAMPLES = {
    "retriever": "--retriever bm25 or --retriever dense:model=NAME",
    "reranker": "--reranker tournament or --reranker sliding-window:window=20",
    "task": "gapbench run impliret/multispeaker/wknow or gapbench run bright/biology:instructions=true",
}


def check_one_line(text: str, what: str) -> None:
    """Reject a name with a control character (a newline would forge lines in run files, tables and messages)."""
    if not isinstance(text, str):
        raise ConfigError(f"{what} must be text, got {type(text).__name__}.")
    if len(text) > MAX_SPEC_LEN:
        raise ConfigError(
            f"{what} {text[:40]!r}... is {len(text)} characters long; at most {MAX_SPEC_LEN} are accepted."
        )
    bad = next((i for i, ch in enumerate(text) if ch in "\x7f" or ord(ch) < 32), None)
    if bad is not None:
        raise ConfigError(
            f"{what} {text!r} contains the control character {text[bad]!r} at position {bad}; write it on one line "
            "without tabs or control characters."
        )


def split_list(text: str, separators: str, *, brackets: str = "", strict: bool = False) -> list[str]:
    """``text`` cut at each character of ``separators`` that stands outside quotes and outside the bracket pairs
    ``brackets`` (opening and closing characters in turn: ``"()[]"``); pieces are stripped and empty ones dropped.

    With ``strict`` a closing bracket without its opening one, or an opening one left open, is refused (fusion's
    components); without it a stray closing bracket is text (a measure name is checked on its own afterwards).
    A quote left open is always refused: the text after it would silently become one value.

    >>> split_list('a:x=1+(b+c)+d:p="1+1"', "+", brackets="()[]")
    ['a:x=1', '(b+c)', 'd:p="1+1"']
    """
    return [p.strip() for p in _scan(text, separators, brackets, strict) if p.strip()]


def split_pieces(text: str, separators: str, *, brackets: str = "", strict: bool = False) -> list[str]:
    """As :func:`split_list`, but every piece kept as written (unstripped, empty ones too), so a caller can say
    which piece is empty: ``split_pieces("a++b", "+") == ["a", "", "b"]``."""
    return _scan(text, separators, brackets, strict)


def split_options(text: str, context: str = "") -> list[tuple[str, str | None]]:
    """``key=value`` options separated by ',' as ``(key, value)`` pairs in order, values unquoted; a piece that is
    not ``key=value`` comes back as ``(piece, None)`` for the caller to refuse in its own words. Keys and unquoted
    values are stripped; a quoted value is kept exactly (spaces too). ``context`` (the whole spec) is what a message
    quotes.

    >>> split_options('model="a,b=c", prompt=query: x, y,k1=1')
    [('model', 'a,b=c'), ('prompt', 'query: x, y'), ('k1', '1')]
    """
    pieces: list[str] = []
    for piece in _scan(text, ",", "", False, context):
        # a comma inside a bare value (a prompt) is kept when the next piece has no '=' (and is no quoted value)
        if pieces and "=" not in piece and not _is_quoted(pieces[-1].partition("=")[2].strip()):
            pieces[-1] += "," + piece
        else:
            pieces.append(piece)
    out: list[tuple[str, str | None]] = []
    for piece in pieces:
        if not piece.strip():
            continue
        key, eq, value = piece.partition("=")
        if not eq:
            out.append((piece.strip(), None))
        else:
            out.append((key.strip(), unquote(value.strip(), context or piece.strip())))
    return out


def parse_spec(spec: str, kind: str = "retriever") -> tuple[str, dict[str, str]]:
    """``"dense:model=foo,batch_size=32"`` -> ``("dense", {"model": "foo", "batch_size": "32"})``.

    ``kind`` (retriever, reranker, augmenter, task) names the spec in messages."""
    check_one_line(spec, f"{kind} spec")
    spec = spec.strip()
    if not spec:
        raise ConfigError(f"empty {kind} name; for example {EXAMPLES.get(kind, EXAMPLES['retriever'])}.")
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise ConfigError(f"{kind} spec {spec!r} has no name before ':'; write NAME or NAME:key=value,key=value.")
    options: dict[str, str] = {}
    for key, value in split_options(rest, spec):
        if value is None or not key:
            shown = key if value is None else f"{key}={value}"
            raise ConfigError(f"option {shown!r} in {spec!r} is not key=value; write {name}:key=value,key=value.")
        if key in options:
            raise ConfigError(f"option {key!r} is given twice in {spec!r}; give each option once.")
        options[key] = value
    return name, options


def split_spec_list(text: str, names: Collection[str]) -> list[str]:
    """``"bm25,dense:model=x,batch_size=8"`` -> ``["bm25", "dense:model=x,batch_size=8"]``: a comma starts a new spec
    unless the piece after it is one more ``key=value`` of the spec before (its head is no name in ``names``).

    >>> split_spec_list('bm25,dense:model="a,bm25",batch_size=8', ["bm25", "dense"])
    ['bm25', 'dense:model="a,bm25",batch_size=8']
    """
    parts: list[str] = []
    for piece in _scan(text, ",", "", False):
        head = piece.split(":", 1)[0].strip()
        if parts and "=" in piece and head not in names:
            parts[-1] += "," + piece
        elif piece.strip():
            parts.append(piece.strip())
    return parts


def closing_bracket(text: str, brackets: str = "[]()") -> int:
    """Index of the bracket that closes the one ``text`` starts with, outside quotes; -1 when it is never closed.

    >>> closing_bracket('[llm_model="a]b"]bm25')
    16
    """
    opening, closing = brackets[0::2], brackets[1::2]
    depth = 0
    quote_mark = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote_mark:
            if ch == "\\":
                i += 1
            elif ch == quote_mark:
                quote_mark = ""
        elif ch in QUOTES and _opens_value(text, 0, i):
            quote_mark = ch
        elif ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def quote(value: object) -> str:
    """``value`` written so that :func:`split_options` reads it back whole: bare when it can be, else in double
    quotes with '"' and '\\' escaped. ``quote("a,b=c") == '"a,b=c"'``; ``quote(6) == "6"``."""
    text = str(value)
    if text and text == text.strip() and not any(ch in text for ch in ',="\'\\') and text[0] not in QUOTES:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unquote(value: str, context: str = "") -> str:
    """A value without its quotes (escapes resolved) when it is quoted, else as it is. Text after the closing quote
    is refused: ``"a"b`` would otherwise mean ``ab`` or ``"a"b`` depending on the reader."""
    if not value or value[0] not in QUOTES:
        return value
    mark, out, i = value[0], [], 1
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value) and value[i + 1] in (mark, "\\"):
            out.append(value[i + 1])
            i += 2
            continue
        if ch == mark:
            if value[i + 1:].strip():
                where = f" in {context!r}" if context else ""
                raise ConfigError(
                    f"the quoted value {value!r}{where} has text after its closing quote; put the whole value inside "
                    "the quotes."
                )
            return "".join(out)
        out.append(ch)
        i += 1
    raise _open_quote(value, context or value)


def _is_quoted(value: str) -> bool:
    return len(value) >= 2 and value[0] in QUOTES and value[-1] == value[0]


def _open_quote(text: str, context: str) -> ConfigError:
    return ConfigError(
        f"{context!r} opens a quote ({text[0]}) that is never closed; close it with the same mark, or escape a quote "
        "inside a value with a backslash."
    )


def _scan(text: str, separators: str, brackets: str, strict: bool, context: str = "") -> list[str]:
    opening, closing = brackets[0::2], brackets[1::2]
    parts: list[str] = []
    start = depth = 0
    quote_mark = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote_mark:
            if ch == "\\" and i + 1 < len(text):
                i += 2
                continue
            if ch == quote_mark:
                quote_mark = ""
        elif ch in QUOTES and _opens_value(text, start, i):
            quote_mark = ch
            quote_at = i
        elif ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
            if depth < 0:
                if strict:
                    raise ConfigError(
                        f"unbalanced {ch!r} at position {i} of {text!r}; every closing bracket needs an opening one."
                    )
                depth = 0
        elif ch in separators and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if quote_mark:
        raise _open_quote(text[quote_at:], context or text)
    if strict and depth:
        raise ConfigError(f"unclosed bracket or parenthesis in {text!r}; close every one that opens.")
    parts.append(text[start:])
    return parts


def _opens_value(text: str, start: int, i: int) -> bool:
    """A quote at ``i`` opens a quoted value when only spaces stand between it and the start of the piece, an '=',
    or an opening bracket (``[llm_model="a,b"]``); elsewhere it is text (``query_prompt=what's``)."""
    before = text[start:i].rstrip()
    return not before or before[-1] in "=[("
