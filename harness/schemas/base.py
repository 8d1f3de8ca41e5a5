"""The base of every schema: the text rules of submissions and boards, ``Model`` (unknown fields are errors, JSON
types are not coerced), and the annotated field types the models share."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from ..contract import Finite

# ---------------------------------------------------------------- text rules of submissions (and of what boards show)
# The submission validator (gapbench.products.submissions) applies these same rules, field by field, with its own
# messages; they live here, in the core, so that every layer can validate through the models.

MAX_PER_QUERY = 1000  # documents per query in a run
MAX_TASKS = 100  # tasks in one submission
MAX_PROBLEMS_PER_FILE = 20  # also the cap on the models a submission lists
MAX_RESAMPLES = 10_000

SYSTEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=:@-]{0,127}(?:/[A-Za-z0-9][A-Za-z0-9._+=:@-]{0,127})*")
URL = re.compile(r"https?://[A-Za-z0-9._~:/?#@!$&'*+,;=%-]{1,292}")
ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
ISO_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
                          r"(?:T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})?)?")
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!-]{0,31}")
PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FINGERPRINT = re.compile(r"[A-Za-z0-9:._-]{1,128}")
_BAD_CHAR_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}

# submission.json field -> (accepted types, required, description)
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "format_version": ((int,), True, "the integer 1"),
    "system": ((str,), True, "a system name of 1-64 letters, digits and . _ + -, starting with a letter or digit"),
    "description": ((str,), True, "one or two sentences on one line (at most 1000 characters)"),
    "suite": ((str,), True, "a registered suite name (see `gapbench tasks`)"),
    "gapbench_version": ((str,), True, "the gapbench version that made the runs, e.g. \"0.1.0\""),
    "models": ((list,), True, "a list of {\"name\", \"revision\"} objects ([] for lexical systems)"),
    "adapter": ((dict,), True, "an object {\"name\", \"config\"[, \"fingerprint\"]}"),
    "contact": ((str,), True, "a name with an e-mail address or a URL, on one line (at most 200 characters)"),
    "tasks": ((dict,), True, "an object task name -> {\"revision\", \"run\", \"sha256\"}"),
    "url": ((str,), False, "an http(s):// link to code or paper"),
    "date": ((str,), False, "an ISO date, YYYY-MM-DD"),
    "k": ((int,), False, "documents per query in the runs"),
}
# free-text field -> (pattern it must match, or None for one line of printable text; length cap)
TEXT_RULES: dict[str, tuple[re.Pattern | None, int]] = {
    "system": (SYSTEM_NAME, 64), "description": (None, 1000), "suite": (SYSTEM_NAME, 64),
    "gapbench_version": (VERSION, 32), "contact": (None, 200), "url": (URL, 300), "date": (ISO_DATE, 10),
}


def text_problem(value: str, pattern: re.Pattern | None, cap: int) -> str | None:
    """Why ``value`` may not appear on a board or in a file name, or None when it may."""
    if len(value) > cap:
        return f"is {len(value):,} characters long; at most {cap} are accepted"
    for ch in value:
        if unicodedata.category(ch) in _BAD_CHAR_CATEGORIES:
            return f"contains the control or invisible character U+{ord(ch):04X}"
    if value != value.strip():
        return "has leading or trailing spaces"
    if pattern is not None and not pattern.fullmatch(value):
        return "has characters that are not accepted"
    return None


def run_file_name(task: str) -> str:
    """``impliret/multispeaker/wknow`` -> ``impliret__multispeaker__wknow`` (the file stem of its run)."""
    return task.replace("/", "__")


# ---------------------------------------------------------------- models

Number = float  # an int is accepted where a float is declared; a bool is not (strict mode); NaN is (coverage's "none")
# the numbers of files users give (results, manifests, submissions' scores): NaN and the infinities refused
FiniteNumber = Finite


def _ordered(pair: list[float]) -> list[float]:
    if pair[0] > pair[1]:
        raise ValueError("its low end is above its high end (an interval is [low, high])")
    return pair


# an interval, low <= high, of finite ends
Pair = Annotated[list[Finite], Field(min_length=2, max_length=2), AfterValidator(_ordered)]
# a format version: the integer 1 (Literal[1] would also take true, since True == 1)
One = Annotated[int, Field(ge=1, le=1, json_schema_extra={"const": 1})]


class Model(BaseModel):
    """Base of every schema: unknown fields are errors, and JSON types are not coerced ("1" is not an int)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def dump(self) -> dict[str, Any]:
        """The document this model is on disk and on stdout (``--json``): JSON types, fields under their file names
        (``class``, not ``class_``), and only the fields that were set, so that a file read back is written back the
        same and a field added later is absent from older documents rather than invented."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


@dataclass(frozen=True)
class TextRule:
    """Submission text, as ``Annotated[str, TextRule(pattern, cap, what)]``: checked by :func:`text_problem` (as the
    submission validator checks it), and described in the JSON Schema by its pattern and length cap (the exported
    schema cannot state "no control characters"). ``what`` ends each refusal: what to give instead."""

    pattern: re.Pattern[str] | None
    cap: int
    what: str

    def check(self, value: str) -> str:
        if not value.strip():
            raise ValueError(f"is empty; give {self.what}")
        why = text_problem(value, self.pattern, self.cap)
        if why:
            raise ValueError(f"{why}; give {self.what}")
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        described = handler(schema)
        described["maxLength"] = self.cap
        if self.pattern is not None:
            described["pattern"] = f"^(?:{self.pattern.pattern})$"
        return described


def _rule(key: str) -> TextRule:
    """The rule of a submission.json text field (:data:`TEXT_RULES`, described as :data:`FIELDS` describes it)."""
    pattern, cap = TEXT_RULES[key]
    return TextRule(pattern, cap, FIELDS[key][2])


# submission.json's text fields
SystemText = Annotated[str, _rule("system")]
DescriptionText = Annotated[str, _rule("description")]
SuiteText = Annotated[str, _rule("suite")]
VersionText = Annotated[str, _rule("gapbench_version")]
ContactText = Annotated[str, _rule("contact")]
UrlText = Annotated[str, _rule("url")]
DateText = Annotated[str, _rule("date")]
# the texts of the models a submission names, of its adapter and of scores.json
ModelName = Annotated[str, TextRule(MODEL_NAME, 193, "the model identifier such as org/model")]
ModelRevision = Annotated[str, TextRule(REVISION, 256, "the model revision (commit or version)")]
AdapterName = Annotated[str, TextRule(SYSTEM_NAME, 64, "letters, digits and . _ + -, at most 64 characters")]
AdapterFingerprint = Annotated[str, TextRule(FINGERPRINT, 128, "letters, digits and : . _ -, at most 128 characters")]
ScoringVersion = Annotated[str, TextRule(VERSION, 40, "the gapbench version that scored it")]
ScoringDate = Annotated[str, TextRule(ISO_DATETIME, 40, "an ISO date or date and time")]
PackageName = Annotated[str, TextRule(PACKAGE, 64, "a package name")]
PackageVersion = Annotated[str, TextRule(VERSION, 64, "a version")]
