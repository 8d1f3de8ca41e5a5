"""SMART collections as they are distributed: a folder holding the documents, the queries and the qrels of Cranfield,
CACM, CISI, MED or ADI in their original files runs with ``gapbench run DIR``, told apart from a BEIR folder by content.

* Documents and queries: records opened by ``.I ID``, fields opened by a line ``.T`` (title), ``.W`` (text), ``.A``,
  ``.B``, ``.N``, ``.X``, ``.K`` or ``.C``. A document is its ``.T`` (title) and ``.W`` (text); a query is its ``.W``.
  Of the two record files, the one with more records holds the documents. A last query ``.I 0`` with no text (CACM's
  sentinel) is dropped. Numeric ids lose their leading zeros (``.I 001`` is query ``1``).
* Qrels: ``query document code`` (Cranfield's ``cranqrel``), ``query document 0 0`` (CACM's ``qrels.text``, CISI's
  ``CISI.REL``: every pair relevant) or TREC's ``query 0 document relevance`` (MED's ``MED.REL``). When several files
  could be qrels, the one whose name holds ``rel`` is taken.
* Cranfield's numbering: its qrels number the queries by their position in ``cran.qry`` (1 to 225) while the file
  numbers them ``001, 002, 004, 008, ...``; qrels whose query ids are positions but not all the file's ids name the
  queries by position, as ir_datasets does.
* Cranfield's grades run the other way (1 a complete answer, 4 minimum interest, -1 no interest): codes that are all
  among -1, 1, 2, 3, 4, 5 become gains ``5 - code``, and -1 becomes 0 (judged, not relevant), the same mapping
  gapbench's ``irds:cranfield`` uses, so graded measures (nDCG) count 1 as the best grade.

What was read this way (the numbering, the grade mapping, a dropped sentinel) is said on stderr when the task loads.
NPL, TIME and LISA come in other layouts and are not read here (ir_datasets' ``vaswani`` is NPL).

>>> task = smart_folder_task("tests/fixtures/smart/cranfield")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError, GapbenchError
from gapbench.task import Task
from gapbench.textio import text_lines
from gapbench.types import MAX_ID_LENGTH, Corpus, Document, Qrels, Queries, Query, TaskData, id_problem, show_id

FIELDS = "ITABWXNKC"
_MARK = re.compile(rf"^\.([{FIELDS}])(?:[ \t]+(.*?))?[ \t]*$")
_NUMBERS = re.compile(r"^[ \t]*-?[0-9]+(?:\.[0-9]+)?(?:[ \t]+-?[0-9]+(?:\.[0-9]+)?){2,3}[ \t]*$")
# Cleverdon's relevance codes (cranqrel.readme) and the gain each gets: 1 is the best grade
CRANFIELD_CODES = {1: "a complete answer", 2: "high relevance", 3: "useful background", 4: "minimum interest",
                   5: "no interest", -1: "no interest"}
CRANFIELD_GAINS = {1: 4, 2: 3, 3: 2, 4: 1, 5: 0, -1: 0}  # as gapbench.tasks.irds reads irds:cranfield


@dataclass(frozen=True)
class SmartFiles:
    """The three files of a SMART collection in one folder."""

    folder: Path
    docs: Path
    queries: Path
    qrels: Path


def smart_folder_task(path: str | Path) -> Task | None:
    """The task of a folder of SMART files, or None when the folder holds none (a BEIR folder, say)."""
    files = find_files(Path(path).expanduser().resolve())
    if files is None:
        return None
    spec = str(files.folder)
    # what changes the numbers' meaning is said in the task's source too, which every run manifest records
    graded = grade_mapping({code for _, _, code, _ in parse_qrels(files.qrels)}) is not None
    return Task(
        name=spec,
        loader=functools.partial(load, files),
        source=f"local SMART files {files.folder}: documents {files.docs.name}, queries {files.queries.name}, "
               f"qrels {files.qrels.name}"
               + ("; Cleverdon's relevance codes (1 best) read as gains 5 - code, -1 as 0" if graded else ""),
        revision="local",
        split="test",
        license="unknown (local data)",
        description="A folder of SMART-format files (Cranfield, CACM, CISI, MED, ADI).",
        main_measure="nDCG@10",
        measures=("nDCG@10", "AP", "R@100", "RR@10"),
        spec=spec,
    )


# ---------------------------------------------------------------- finding the files


def _first_line(path: Path) -> str | None:
    """The first non-blank line of a file, or None for a file that is not UTF-8 text (a zip, a picture)."""
    try:
        for _, line in text_lines(path):
            if line.strip():
                return line.strip()
    except GapbenchError:
        return None
    return None


def _records(path: Path) -> int:
    return sum(1 for _, line in text_lines(path) if line.startswith(".I"))


def find_files(folder: Path) -> SmartFiles | None:
    """The documents, queries and qrels among the files of ``folder`` (not its sub-folders), by their content."""
    if not folder.is_dir() or any((folder / f"{name}.jsonl").exists() or (folder / f"{name}.jsonl.gz").exists()
                                  for name in ("corpus", "queries")):
        return None
    records, qrels = [], []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        first = _first_line(path)
        if first is None:
            continue
        if _MARK.match(first) and first.startswith(".I"):
            records.append(path)
        elif _NUMBERS.match(first):
            qrels.append(path)
    if not records:
        return None
    found = (f"found {len(records)} SMART record file(s) ({', '.join(p.name for p in records)}) and "
             f"{len(qrels)} qrels file(s) ({', '.join(p.name for p in qrels) or 'none'})")
    if len(records) != 2:
        raise ConfigError(f"{folder}: a SMART collection needs one documents file and one queries file (records "
                          f"opened by '.I ID'); {found}. Keep exactly those two record files in the folder.")
    named = [p for p in qrels if "rel" in p.name.lower()]
    if len(qrels) > 1 and len(named) == 1:
        qrels = named
    if len(qrels) != 1:
        raise ConfigError(f"{folder}: a SMART collection needs one qrels file (lines 'query document code', "
                          f"'query document 0 0' or TREC qrels); {found}. Keep exactly one qrels file in the folder.")
    sizes = {p: _records(p) for p in records}
    docs, queries = sorted(records, key=lambda p: (-sizes[p], p.name))
    return SmartFiles(folder, docs, queries, qrels[0])


# ---------------------------------------------------------------- reading


def parse_records(path: str | Path) -> list[dict]:
    """Records ``{"id", "line", "I": ..., "T": [lines], "W": [lines], ...}`` of a SMART file, in file order."""
    path = Path(path)
    out: list[dict] = []
    current: dict | None = None
    field: str | None = None
    seen: dict[str, int] = {}
    for n, line in text_lines(path):
        mark = _MARK.match(line)
        if mark and mark.group(1) == "I":
            rid = (mark.group(2) or "").strip()
            if not rid or len(rid.split()) != 1:
                raise DataFormatError(f"'.I' must be followed by one record id, found {line.strip()[:60]!r}.",
                                      path=path, line=n)
            rid = _record_id(rid, path, n)
            if rid in seen:
                raise DuplicateIdError(f"record id {rid!r} appears twice (first on line {seen[rid]}).",
                                       path=path, line=n)
            seen[rid] = n
            current, field = {"id": rid, "line": n}, None
            out.append(current)
        elif mark:
            if current is None:
                raise DataFormatError(f"field {line.strip()!r} before the first '.I ID' record.", path=path, line=n)
            field = mark.group(1)
            current.setdefault(field, [])
            if mark.group(2):
                current[field].append(mark.group(2))
        elif line.strip():
            if current is None:
                raise DataFormatError(f"text before the first '.I ID' record: {line.strip()[:60]!r}.", path=path,
                                      line=n)
            if field is None:
                raise DataFormatError(f"text in record {current['id']!r} before any field line such as '.W': "
                                      f"{line.strip()[:60]!r}.", path=path, line=n)
            current[field].append(line)
        elif field is not None and current is not None:  # a field line has a record
            current[field].append(line)
    if not out:
        raise DataFormatError("no SMART records ('.I ID' lines) found.", path=path)
    return out


def _text(record: dict, field: str) -> str:
    # as ir_datasets keeps them: the lines as they are, joined, without surrounding blank space
    return "\n".join(record.get(field, ())).strip()


def read_docs(path: Path) -> Corpus:
    return Corpus((Document(r["id"], _text(r, "W"), _text(r, "T")) for r in parse_records(path)), source=str(path))


def read_queries(path: Path) -> tuple[Queries, list[str]]:
    """(the queries, notes): the text of ``.W`` on one line; a last ``.I 0`` with no text is CACM's sentinel."""
    records = parse_records(path)
    notes = []
    last = records[-1]
    if last["id"] == "0" and not any(_text(last, f) for f in FIELDS):
        records = records[:-1]
        notes.append(f"{path.name}: the last record '.I 0' (line {last['line']}) has no text: the end-of-file "
                     "sentinel, dropped")
    queries = []
    for r in records:
        text = " ".join(_text(r, "W").split())
        if not text:
            raise DataFormatError(f"query {r['id']!r} has no text ('.W' field); give it one or remove the record.",
                                  path=path, line=r["line"])
        queries.append(Query(r["id"], text))
    return Queries(queries, source=str(path)), notes


def parse_qrels(path: Path) -> list[tuple[str, str, int, int]]:
    """(query id, document id, code, line) of every judgement, in one of the three layouts (module docstring)."""
    rows = []
    for n, line in text_lines(path, columns=True):
        if not line.strip():
            continue
        if not _NUMBERS.match(line):
            raise DataFormatError(f"expected 3 or 4 numbers ('query document code', 'query document 0 0' or "
                                  f"'query 0 document relevance'), found {line.strip()[:60]!r}.", path=path, line=n)
        rows.append((line.split(), n))
    if not rows:
        raise DataFormatError("the qrels file is empty.", path=path)
    widths = {len(cols) for cols, _ in rows}
    if len(widths) != 1:
        raise DataFormatError(f"lines of {' and '.join(map(str, sorted(widths)))} columns mixed; a qrels file keeps "
                              "one layout.", path=path, line=next(n for c, n in rows if len(c) != len(rows[0][0])))
    trec = widths == {4} and all(cols[1] == "0" for cols, _ in rows)
    out = []
    for cols, n in rows:
        if widths == {3}:
            qid, did, code = cols
        elif trec:
            qid, _, did, code = cols
        else:
            (qid, did), code = cols[:2], "1"  # SMART's 'query document 0 0': the pair is relevant
        if not (_whole(qid) and _whole(did) and _whole(code)):
            raise DataFormatError(f"query and document ids and the code must be whole numbers, found "
                                  f"{line_of(cols)!r}.", path=path, line=n)
        if len(code.lstrip("-")) > 9:  # a grade of more digits is no grade (gapbench.types.MAX_GRADE bounds them)
            raise DataFormatError(f"the relevance code {code[:20]}{'...' if len(code) > 20 else ''} is not a grade; "
                                  "give a small whole number.", path=path, line=n)
        out.append((_numeric(qid, path, n), _numeric(did, path, n), int(code), n))
    return out


def _whole(text: str) -> bool:
    return re.fullmatch(r"-?[0-9]+", text, re.ASCII) is not None


def _numeric(text: str, path: Path, line: int) -> str:
    """A numeric id as written in ASCII digits, without its leading zeros (``001`` is ``1``), read as text: an id of
    thousands of digits is refused at the id length limit (:data:`gapbench.types.MAX_ID_LENGTH`), not passed to
    ``int()`` (which refuses more than 4,300 digits with a traceback)."""
    if len(text) > MAX_ID_LENGTH:
        raise DataFormatError(f"an id of {len(text):,} characters ({text[:20]}...); ids have at most "
                              f"{MAX_ID_LENGTH}.", path=path, line=line)
    digits = text.lstrip("-").lstrip("0") or "0"
    return "-" + digits if text.startswith("-") and digits != "0" else digits


def _record_id(rid: str, path: Path, line: int) -> str:
    """The id of a ``.I`` record: ASCII digits lose their leading zeros (``.I 001`` is ``1``); other ids are kept as
    written, so ``.I ١`` (an Arabic-Indic one) stays itself and is never read as ``1``."""
    if re.fullmatch(r"[0-9]+", rid, re.ASCII):
        return _numeric(rid, path, line)
    problem = id_problem(rid)
    if problem is not None:
        raise DataFormatError(f"record id {show_id(rid)} {problem}.", path=path, line=line)
    return rid


def line_of(cols: list[str]) -> str:
    return " ".join(cols)[:60]


def grade_mapping(codes: set[int]) -> dict[int, int] | None:
    """Cranfield's gains when every code is one of Cleverdon's (-1, 1..5) and some code is not 0/1; else None."""
    if codes <= set(CRANFIELD_GAINS) and not codes <= {0, 1}:
        return dict(CRANFIELD_GAINS)
    return None


def load(files: SmartFiles) -> TaskData:
    from gapbench.progress import say

    corpus = read_docs(files.docs)
    queries, notes = read_queries(files.queries)
    rows = parse_qrels(files.qrels)
    judged_ids = list(dict.fromkeys(q for q, _, _, _ in rows))
    file_ids = queries.ids()
    positions = {str(i) for i in range(1, len(file_ids) + 1)}
    if not set(judged_ids) <= set(file_ids) and set(judged_ids) <= positions:
        shown = ", ".join(file_ids[:4])
        notes.append(f"{files.qrels.name} numbers the queries by their position in {files.queries.name} (1 to "
                     f"{len(file_ids)}), which numbers them {shown}, ...: queries are named by position")
        queries = Queries((Query(str(i), q.text) for i, q in enumerate(queries.values(), 1)),
                          source=str(files.queries))
    codes = {code for _, _, code, _ in rows}
    mapping = grade_mapping(codes)
    if mapping is not None:
        notes.append(f"{files.qrels.name} grades 1 (best) to 4, -1 none (Cleverdon's codes): gains "
                     + ", ".join(f"{code} ({CRANFIELD_CODES[code]}) -> {gain}" for code, gain in mapping.items()
                                 if code in codes))
    judged: dict[str, dict[str, int]] = {}
    for qid, did, code, n in rows:
        if qid not in queries:
            raise DataFormatError(f"query {qid!r} is not in {files.queries.name} ({len(queries)} queries); give the "
                                  "qrels of these queries.", path=files.qrels, line=n)
        if did not in corpus:
            raise DataFormatError(f"document {did!r} is not in {files.docs.name} ({len(corpus)} documents); give the "
                                  "qrels of this collection.", path=files.qrels, line=n)
        if did in judged.get(qid, {}):
            raise DuplicateIdError(f"query {qid!r} and document {did!r} are judged twice.", path=files.qrels, line=n)
        gain = mapping[code] if mapping is not None else code
        if gain < 0:
            raise DataFormatError(f"relevance {code} is negative; a qrels file grades 0 (not relevant) and up.",
                                  path=files.qrels, line=n)
        judged.setdefault(qid, {})[did] = gain
    for note in notes:
        say(note)
    return TaskData(corpus, queries, Qrels(judged, source=str(files.qrels)))
