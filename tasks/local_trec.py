"""A local task from TREC-style files: topics, qrels and a JSONL corpus.

* Topics: the classic TREC SGML format (``<top>``, ``<num> Number: 301``, ``<title>``, ``<desc> Description:``,
  ``<narr> Narrative:``, ``</top>``; closing tags such as ``</title>`` are accepted too), or a tab-separated file with
  one ``query_id<TAB>text`` per line.
* Qrels: TREC (``query_id iteration doc_id relevance``) or BEIR (``query-id<TAB>corpus-id<TAB>score``, header optional).
* Corpus: TREC ``<DOC><DOCNO>..</DOCNO>..</DOC>`` files (plain or gzipped, one file or a folder of them; the text of
  the tags chosen with ``doc_tags=TEXT+HEADLINE``, by default all but DOCNO and DOCHDR), TSV (``doc_id<TAB>text`` or
  ``doc_id<TAB>title<TAB>text``) or JSONL with ``_id`` (or ``doc_id``/``id``), ``text`` and an optional ``title``
  (:mod:`gapbench.tasks.trec_corpus`).

>>> task = trec_files_task("topics.301-350", "qrels.301-350", "disk45/", doc_tags="TEXT+HEADLINE")  # doctest: +SKIP

From the command line: ``gapbench run local/trec:topics=T,qrels=Q,corpus=C --retriever bm25``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from gapbench.errors import ConfigError, DataFormatError, DuplicateIdError
from gapbench.formats import judged_ids_check, read_qrels, text_lines
from gapbench.task import TASKS, Task
from gapbench.tasks.trec_corpus import parse_doc_tags, read_corpus
from gapbench.types import Queries, Query, TaskData, id_problem, show_id

FIELDS = ("title", "desc", "narr")
_TAG = re.compile(r"<\s*(/?)\s*(top|num|title|desc|narr)\s*>", re.IGNORECASE)
# the labels TREC puts after the opening tags ("<num> Number: 301", "<desc> Description:")
_LABELS = {"num": re.compile(r"^\s*number\s*:\s*", re.IGNORECASE),
           "desc": re.compile(r"^\s*description\s*:\s*", re.IGNORECASE),
           "narr": re.compile(r"^\s*narrative\s*:\s*", re.IGNORECASE),
           "title": re.compile(r"^\s*topic\s*:\s*", re.IGNORECASE)}


def _lines(path: Path) -> list[str]:
    # read once into memory: both parsers and the format sniff use these lines, and a pipe cannot be read twice
    return [line.rstrip("\r\n") for _, line in text_lines(path)]


def _is_sgml(lines: list[str]) -> bool:
    for line in lines:
        if line.strip():
            return line.lstrip().startswith("<")
    return False


def parse_sgml_topics(path: str | Path, lines: list[str] | None = None) -> list[dict]:
    """Records ``{"num", "title", "desc", "narr", "line"}`` from a classic TREC topics file, in file order."""
    path = Path(path)
    topics: list[dict] = []
    current: dict | None = None
    field: str | None = None
    for n, line in enumerate(_lines(path) if lines is None else lines, 1):
        pos = 0
        for m in _TAG.finditer(line):
            _append(current, field, line[pos:m.start()], path, n)
            closing, tag = m.group(1) == "/", m.group(2).lower()
            pos = m.end()
            if tag == "top":
                if not closing:
                    if current is not None:
                        raise DataFormatError(
                            f"<top> opened again before the topic begun on line {current['line']} was closed; "
                            "add </top>.", path=path, line=n)
                    current, field = {"line": n, **{f: "" for f in ("num", *FIELDS)}}, None
                else:
                    if current is None:
                        raise DataFormatError("</top> without an opening <top>.", path=path, line=n)
                    topics.append(_finish(current, path, n))
                    current, field = None, None
            elif current is None:
                raise DataFormatError(f"<{tag}> outside a <top> ... </top> block.", path=path, line=n)
            else:
                field = None if closing else tag
        _append(current, field, line[pos:], path, n)
    if current is not None:
        raise DataFormatError(f"the topic begun on line {current['line']} is never closed; add </top>.", path=path)
    if not topics:
        raise DataFormatError("no <top> ... </top> topics found.", path=path)
    return topics


def _append(current: dict | None, field: str | None, text: str, path: Path, n: int) -> None:
    if not text.strip():
        return
    if current is None:
        raise DataFormatError(f"text outside a <top> ... </top> block: {text.strip()[:60]!r}.", path=path, line=n)
    if field is None:
        raise DataFormatError(f"text outside any field tag (<num>, <title>, <desc>, <narr>): {text.strip()[:60]!r}.",
                              path=path, line=n)
    current[field] = f"{current[field]} {text.strip()}" if current[field] else text.strip()


def _finish(topic: dict, path: Path, n: int) -> dict:
    out = dict(topic)
    for tag, label in _LABELS.items():
        out[tag] = label.sub("", out[tag]).strip()
    if not out["num"]:
        raise DataFormatError(f"the topic begun on line {topic['line']} has no <num>.", path=path, line=n)
    if len(out["num"].split()) != 1:
        raise DataFormatError(f"topic number {out['num']!r} (topic begun on line {topic['line']}) is not a single "
                              "token; write <num> Number: 301.", path=path, line=topic["line"])
    return out


def parse_tsv_topics(path: str | Path, lines: list[str] | None = None) -> list[dict]:
    """Records ``{"num", "title", "line"}`` from ``query_id<TAB>text`` lines."""
    path = Path(path)
    topics = []
    for n, line in enumerate(_lines(path) if lines is None else lines, 1):
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        if not tab:
            raise DataFormatError(
                f"expected 'query_id<TAB>text' (or TREC SGML topics starting with <top>), found {line.strip()[:60]!r}.",
                path=path, line=n)
        if not qid.strip() or not text.strip():
            raise DataFormatError("empty query id or text.", path=path, line=n)
        topics.append({"num": qid.strip(), "title": text.strip(), "desc": "", "narr": "", "line": n})
    if not topics:
        raise DataFormatError("the topics file is empty.", path=path)
    return topics


def read_topics(path: str | Path, field: str = "title") -> Queries:
    """Queries from a TREC SGML or ``qid<TAB>text`` topics file; ``field`` picks the SGML field used as query text."""
    if field not in FIELDS:
        raise ConfigError(f"topics field {field!r}: choose one of {', '.join(FIELDS)}.")
    path = Path(path)
    lines = _lines(path)
    sgml = _is_sgml(lines)
    topics = parse_sgml_topics(path, lines) if sgml else parse_tsv_topics(path, lines)
    seen: dict[str, int] = {}
    queries = []
    for t in topics:
        if t["num"] in seen:
            raise DuplicateIdError(f"topic {t['num']!r} appears twice (first on line {seen[t['num']]}).",
                                   path=path, line=t["line"])
        seen[t["num"]] = t["line"]
        problem = id_problem(t["num"])
        if problem is not None:
            raise DataFormatError(f"topic number {show_id(t['num'])} {problem}.", path=path, line=t["line"])
        text = t[field] if sgml else t["title"]
        if not text:
            raise DataFormatError(f"topic {t['num']!r} has an empty <{field}>.", path=path, line=t["line"])
        queries.append(Query(t["num"], text))
    return Queries(queries, source=str(path))


def load(topics: str | Path, qrels: str | Path, corpus: str | Path, field: str = "title",
         doc_tags: str | tuple[str, ...] | None = None) -> TaskData:
    queries = read_topics(topics, field)
    docs = read_corpus(corpus, doc_tags)
    known = judged_ids_check(queries, docs, qrels, query="topic", queries_file=topics, corpus_file=corpus,
                             add_query="give the matching topics file or drop its judgements")
    return TaskData(docs, queries, read_qrels(qrels, known))


def trec_files_task(topics: str | Path, qrels: str | Path, corpus: str | Path, name: str | None = None,
                    field: str = "title", doc_tags: str | tuple[str, ...] | None = None) -> Task:
    """A :class:`Task` over local TREC topics, qrels and a corpus file or folder (read when the task is loaded)."""
    paths = {"topics": topics, "qrels": qrels, "corpus": corpus}
    for key, value in paths.items():
        # any readable non-directory will do: named pipes and /dev/stdin are read once, front to back; the corpus
        # may also be a folder of TREC files
        if not Path(value).expanduser().exists() or (Path(value).expanduser().is_dir() and key != "corpus"):
            raise ConfigError(f"local/trec: {key}={value} is not a file; give the path of the {key} file"
                              + (" or folder." if key == "corpus" else "."))
    tags = parse_doc_tags(doc_tags)
    topics, qrels, corpus = (Path(v).expanduser().resolve() for v in paths.values())
    if field not in FIELDS:
        raise ConfigError(f"local/trec: field={field!r}; choose one of {', '.join(FIELDS)}.")
    return Task(
        name=name or f"local/trec/{topics.name}",
        loader=functools.partial(load, topics, qrels, corpus, field, tags),
        source=f"local TREC files: topics {topics}, qrels {qrels}, corpus {corpus}",
        revision="local",
        split="test",
        license="unknown (local data)",
        description=f"Local TREC topics ({field}) with qrels over a corpus of TREC, TSV or JSONL documents.",
        # how to make this task again (absolute files); its identity is its content (gapbench.identity)
        spec=f"local/trec:topics={topics},qrels={qrels},corpus={corpus},field={field}"
             + (f",name={name}" if name else "") + (f",doc_tags={'+'.join(tags)}" if tags else ""),
    )


@TASKS.register("local/trec")
def local_trec(topics: str | None = None, qrels: str | None = None, corpus: str | None = None,
               name: str | None = None, field: str = "title", doc_tags: str | None = None) -> Task:
    missing = [k for k, v in (("topics", topics), ("qrels", qrels), ("corpus", corpus)) if not v]
    usage = ("local/trec:topics=PATH,qrels=PATH,corpus=PATH[,field=title|desc|narr][,doc_tags=TEXT+HEADLINE]"
             "[,name=NAME]")
    if topics and qrels and corpus:  # none missing
        return trec_files_task(topics, qrels, corpus, name=name, field=field, doc_tags=doc_tags)
    message = f"local/trec needs the option(s) {', '.join(missing)}: {usage}."
    if len(missing) < 3:
        raise ConfigError(message)

    def unconfigured() -> TaskData:
        raise ConfigError(message)

    # without any option it is the template `gapbench tasks` lists; it fails when loaded, naming what to give
    return Task(name="local/trec", loader=unconfigured, source="local TREC files", revision="local",
                license="unknown (local data)",
                description=f"Local TREC topics, qrels and a TREC, TSV or JSONL corpus: {usage}.")
