"""Strict JSON documents and JSON-lines files: duplicate keys, NaN, Infinity, lone surrogates and deep nesting are
refused, ids and texts must be JSON strings, and every error names the file and the line."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import closing

from .errors import DataFormatError, DuplicateIdError, StrictJSONError
from .files import atomic_writer
from .textio import PathLike, text_lines
from .types import Queries, Query, id_problem, show_id

# ---------------------------------------------------------------- strict JSON documents

def _strict_object(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError(f"key {key!r:.60} appears twice in one object; keep one.")
        out[key] = value
    return out


def _strict_constant(name: str):
    raise StrictJSONError(f"holds the literal {name}, which is not JSON; write a finite number.")


def _strict_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"holds the number {text[:40]}, which overflows to infinity; write a finite number.")
    return value


def _json_depth(value, limit: int) -> int:
    """Nesting depth of a parsed JSON value, stopping once past ``limit``."""
    if limit < 0 or not isinstance(value, (dict, list)):
        return 0
    children = value.values() if isinstance(value, dict) else value
    return 1 + max((_json_depth(v, limit - 1) for v in children), default=0)


def _utf8_text(data: bytes, kind: str) -> str:
    """``data`` as text, UTF-8 without a byte-order mark, or a :class:`StrictJSONError` naming the byte and line."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise StrictJSONError("starts with a UTF-8 byte-order mark (BOM); save it as UTF-8 without BOM.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"is not UTF-8 text (byte {exc.start}, {data[exc.start]:#04x}); save it as UTF-8 {kind}.",
                              data[:exc.start].count(b"\n") + 1) from None


def parse_json_strict(data: bytes, *, max_depth: int = 32):
    """The JSON document in ``data``, read as a published file must be: UTF-8 without a byte-order mark, no NaN or
    Infinity, no number that overflows, no key twice in one object, at most ``max_depth`` levels of nesting.
    Raises :class:`StrictJSONError` saying what is wrong and the fix (the caller names the file)."""
    text = _utf8_text(data, "JSON")
    try:
        value = json.loads(text, object_pairs_hook=_strict_object, parse_constant=_strict_constant,
                           parse_float=_strict_float)
    except json.JSONDecodeError as exc:
        raise StrictJSONError(f"malformed JSON ({exc.msg} at column {exc.colno}); fix the syntax.",
                              exc.lineno) from None
    except RecursionError:
        raise StrictJSONError(f"is nested too deeply; at most {max_depth} levels are accepted.") from None
    except StrictJSONError:
        raise
    except ValueError as exc:  # an integer literal beyond Python's digit limit
        raise StrictJSONError(f"holds a value JSON readers refuse ({str(exc)[:80]}); write ordinary numbers.") from None
    if _json_depth(value, max_depth) > max_depth:
        raise StrictJSONError(f"is nested more than {max_depth} levels deep; flatten it.")
    return value


# ---------------------------------------------------------------- TOML documents

def parse_toml_strict(data: bytes, *, max_depth: int = 32) -> dict:
    """The TOML document in ``data``, held to the rules of :func:`parse_json_strict`: UTF-8 without a byte-order mark,
    no ``nan`` or ``inf`` (TOML has them; no setting or published number is one), at most ``max_depth`` levels of
    nesting (tables and arrays), so that a hostile file ends in one line, never in a traceback. Raises
    :class:`StrictJSONError` (the caller names the file), with the line where known."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib

    text = _utf8_text(data, "TOML")
    # tomllib recurses once per level of an inline array or table: a file of many brackets would exhaust the stack
    # (or take the interpreter's recursion limit down with it) before any depth check could run on its result
    deepest = _bracket_depth(text)
    if deepest > max_depth:
        raise StrictJSONError(f"is nested more than {max_depth} levels deep; flatten it.")
    try:
        value = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"at line (\d+)", str(exc))
        line = int(found.group(1)) if found else None
        raise StrictJSONError(f"malformed TOML ({str(exc).split(' (at ')[0][:120]}); fix the syntax.", line) from None
    except RecursionError:
        raise StrictJSONError(f"is nested too deeply; at most {max_depth} levels are accepted.") from None
    if _json_depth(value, max_depth) > max_depth:
        raise StrictJSONError(f"is nested more than {max_depth} levels deep; flatten it.")
    where = _not_finite(value)
    if where is not None:
        raise StrictJSONError(f"holds {where}, which is not a finite number; write a finite number.")
    return value


def _bracket_depth(text: str) -> int:
    """The deepest run of open brackets and braces outside strings and comments, counted roughly (quotes of every
    kind toggle a string): an upper bound that is exact for the nested arrays and inline tables that matter here."""
    depth = deepest = 0
    quote = ""
    comment = False
    for ch in text:
        if comment:
            comment = ch != "\n"
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            comment = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _not_finite(value: object, path: str = "") -> str | None:
    """Where a NaN or an infinity is in a parsed document (``the value of 'a.b'``), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} at {path or 'the top level'!r}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _not_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------- JSONL

def read_jsonl(path: PathLike) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object); blank lines are skipped, malformed ones raise with the line number."""
    with closing(text_lines(path)) as lines:
        for n, line in lines:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                if exc.msg.startswith("Unexpected UTF-8 BOM"):
                    raise DataFormatError("a byte order mark (U+FEFF) starts this line; only the first line of a file "
                                          "may carry one, so remove it.", path=path, line=n) from None
                raise DataFormatError(f"malformed JSON ({exc.msg}: column {exc.colno}).", path=path, line=n) from None
            except RecursionError:
                raise DataFormatError("JSON nested too deeply to read; a record is a flat object of fields.",
                                      path=path, line=n) from None
            except ValueError as exc:  # an integer of more digits than Python converts
                raise DataFormatError(f"unreadable JSON value ({str(exc).split(':')[0]}).", path=path,
                                      line=n) from None
            if not isinstance(obj, dict):
                raise DataFormatError(f"expected a JSON object per line, found {_json_type(obj)}.", path=path, line=n)
            if ("\\ud" in line or "\\uD" in line) and _has_lone_surrogate(obj):
                raise DataFormatError("a string holds an unpaired surrogate escape (\\ud800-\\udfff), which is not "
                                      "text; fix or remove the escape.", path=path, line=n)
            yield n, obj


def _has_lone_surrogate(obj) -> bool:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"the string {show_id(value)}"


def write_jsonl(records: Iterable[dict], path: PathLike) -> None:
    with atomic_writer(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def _id_field(obj: dict, names: tuple[str, ...], kind: str, path: PathLike, n: int) -> str:
    for name in names:
        if name in obj:
            value = obj[name]
            if isinstance(value, str):
                problem = id_problem(value)
                if problem is None:
                    return value
                raise DataFormatError(f"{kind} id {show_id(value)} (field {name!r}) {problem}.", path=path, line=n)
            number = isinstance(value, int) and not isinstance(value, bool)
            fix = f'"{name}": "{value}"' if number else f'"{name}": "d1"'
            raise DataFormatError(f"field {name!r} is {_json_type(value)}; {kind} ids are JSON strings, for example "
                                  f"{fix}.", path=path, line=n)
    raise DataFormatError(f"missing field {names[0]!r} (found fields: {', '.join(obj) or 'none'}).", path=path, line=n)


def _text_field(obj: dict, names: tuple[str, ...], path: PathLike, n: int, *, required: bool = True) -> str:
    for name in names:
        if name in obj:
            value = obj[name]
            if isinstance(value, str):
                return value
            if value is None and not required:
                return ""
            raise DataFormatError(f"field {name!r} is {_json_type(value)}; it must be a JSON string (\"\" when "
                                  "empty).", path=path, line=n)
    if required:
        raise DataFormatError(f"missing field {names[0]!r} (found fields: {', '.join(obj) or 'none'}).",
                              path=path, line=n)
    return ""


def corpus_records(path: PathLike) -> Iterator[tuple[int, str, str, str]]:
    """(line, doc_id, title, text) of every document of a BEIR corpus file, each line checked as it is read."""
    for n, obj in read_jsonl(path):
        did = _id_field(obj, ("_id", "doc_id", "id", "docid"), "document", path, n)
        text = _text_field(obj, ("text", "contents", "content"), path, n)
        yield n, did, _text_field(obj, ("title",), path, n, required=False), text


def read_jsonl_queries(path: PathLike) -> Queries:
    def queries():
        for n, obj in read_jsonl(path):
            qid = _id_field(obj, ("_id", "query_id", "id", "qid"), "query", path, n)
            text = _text_field(obj, ("text", "query"), path, n)
            yield n, Query(qid, text, _text_field(obj, ("instruction",), path, n, required=False))

    return collect_records(Queries, queries(), path, "query")


def collect_records(cls, numbered: Iterator, path: PathLike, kind: str):
    recs = []
    lines: dict[str, int] = {}
    for n, rec in numbered:
        rid = rec.doc_id if kind == "document" else rec.query_id
        if rid in lines:
            raise DuplicateIdError(
                f"duplicate {kind} id {rid!r} (first seen on line {lines[rid]}); ids must be unique.", path=path, line=n
            )
        lines[rid] = n
        recs.append(rec)
    if not recs:
        raise DataFormatError(f"no {'queries' if kind == 'query' else kind + 's'} found; the file is empty.", path=path)
    return cls(recs, source=str(path))
