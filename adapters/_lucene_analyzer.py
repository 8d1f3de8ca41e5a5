"""Lucene's English analysis as Anserini runs it (``DefaultEnglishAnalyzer``, the analyzer of every Anserini BM25 index
unless told otherwise), without Java: StandardTokenizer -> EnglishPossessiveFilter -> LowerCaseFilter -> StopFilter
(``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``) -> PorterStemFilter.

    >>> analyze("The U.S.A.'s 3.14 state-of-the-art CAFÉS, don't they?")
    ['u.s.a', 's', '3.14', 'state', 'art', 'café', "don't"]

(``.'`` is two joiners in a row, which break: the ``s`` is a word of its own, and no possessive.)

The tokenizer follows the word boundaries of Unicode UAX #29 as Lucene's StandardTokenizer applies them, with one
regular expression over character classes taken from ``unicodedata``:

- a word is a run of letters (Word_Break ALetter), digits (Numeric) and connector punctuation (ExtendNumLet, ``_``),
  with at least one letter or digit; combining marks and format characters (Extend, Format, ZWJ: accents, the soft
  hyphen) stay inside the word they follow (rule WB4);
- ``.``, ``'``, ``’`` and ``:`` join two letters (``u.s.a``, ``don't``, ``a:b``; WB6/7); ``.``, ``,``, ``;`` and ``'``
  join two digits (``3.14``, ``1,000``; WB11/12); anything else (hyphens, slashes, ``@``, spaces) breaks;
- every Han ideograph and every Hiragana character is a token of its own; runs of Katakana, and runs of the scripts
  written without spaces (Thai, Lao, Myanmar, Khmer, ...), are one token each; emoji are tokens;
- a token longer than 255 characters is cut into pieces of 255 (Lucene's ``maxTokenLength``).

What is approximated (none of it occurs in the English test collections this was checked on, see
tests/test_bm25_lucene.py): the character classes are those of Python's Unicode version, not JFlex's; the Hebrew
quote rules (WB7a-c), regional-indicator pairs (WB15/16), emoji ZWJ sequences and Katakana joined to letters through
``_`` are not modelled; the emoji set is the pictograph blocks U+1F000-1FAFF.

Lower-casing is Java's ``Character.toLowerCase`` per code point (simple case mapping): Python's ``str.lower`` differs
from it only for ``İ`` (U+0130, to ``i`` plus a combining dot in Python) and a word-final ``Σ`` (``ς`` in Python),
which are mapped first. Porter stemming is Martin Porter's algorithm as Lucene's ``PorterStemmer`` implements it
(:mod:`gapbench.adapters._porter`).
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Callable

# EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (Lucene 9), the stop set of Anserini's default analyzer
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with".split()
)
MAX_TOKEN_LENGTH = 255  # StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH

# Word_Break classes of UAX #29 given as lists (Unicode 14); the large classes are derived in _classes()
MID_LETTER = "\u003a\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a"
MID_NUM_LET_Q = "\u002e\u2018\u2019\u2024\ufe52\uff07\uff0e\u0027"  # MidNumLet and Single_Quote
MID_NUM = "\u002c\u003b\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b"
EXTEND_NUM_LET = "\u005f\u202f\u203f\u2040\u2054\ufe33\ufe34\ufe4d\ufe4e\ufe4f\uff3f"

# (first, last) code points of scripts the tokenizer treats apart from letters
HAN = ((0x2E80, 0x2FDF), (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B), (0x3400, 0x4DBF),
       (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
HIRAGANA = ((0x3041, 0x309F), (0x1B001, 0x1B11F), (0x1F200, 0x1F200))
KATAKANA = ((0x3031, 0x3035), (0x309B, 0x309C), (0x30A0, 0x30FA), (0x30FC, 0x30FF), (0x31F0, 0x31FF),
            (0x32D0, 0x32FE), (0x3300, 0x3357), (0xFF66, 0xFF9D), (0x1B000, 0x1B000))
SOUTHEAST_ASIAN = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x1950, 0x19DF), (0x1A20, 0x1AAF),
                   (0xA9E0, 0xA9FF), (0xAA60, 0xAADF))
EMOJI = ((0x1F000, 0x1FAFF),)
CIRCLED_LETTERS = ((0x24B6, 0x24E9),)  # category So but Alphabetic, hence ALetter


def _in(ranges: tuple[tuple[int, int], ...], cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def _class(chars: list[int]) -> str:
    """A regex character class body for the code points ``chars`` (sorted), as escaped ranges."""
    parts, i = [], 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and chars[j + 1] == chars[j] + 1:
            j += 1
        lo, hi = chars[i], chars[j]
        parts.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
        i = j + 1
    return "".join(parts)


# blocks of one class each, left out of the per-character scan to keep it short: Han (HAN), Hangul syllables (added
# as letters whole), surrogates and private use, the unassigned planes 4-13 and the supplementary private use planes
SKIPPED = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xD800, 0xF8FF), (0x20000, 0xDFFFF),
           (0xF0000, 0x10FFFF))


def _scanned() -> list[int]:
    cps: list[int] = []
    start = 0
    for lo, hi in SKIPPED:
        cps.extend(range(start, lo))
        start = hi + 1
    cps.extend(range(start, sys.maxunicode + 1))
    return cps


@functools.cache
def _pattern() -> re.Pattern[str]:
    """The token pattern, built once per process from the code points' categories (a few tenths of a second)."""
    letter, digit, extend, sea = [], [], [], []
    for cp in _scanned():
        cat = unicodedata.category(chr(cp))
        if cat[0] not in "LNMCS":
            continue
        if _in(SOUTHEAST_ASIAN, cp) and cat[0] in "LM":
            sea.append(cp)
        elif cat == "Nd":
            digit.append(cp)
        elif cat in ("Mn", "Me", "Mc", "Cf") and cp != 0x200B or 0x1F3FB <= cp <= 0x1F3FF or cp in (0xFF9E, 0xFF9F):
            extend.append(cp)
        elif (cat[0] == "L" or cat == "Nl" or _in(CIRCLED_LETTERS, cp)) and not (
                _in(HAN, cp) or _in(HIRAGANA, cp) or _in(KATAKANA, cp)):
            letter.append(cp)

    letter = sorted(letter + list(range(0xAC00, 0xD7A4)))

    def ranges(spans: tuple[tuple[int, int], ...]) -> str:
        return "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in spans)

    L, N, E, X = f"[{_class(letter)}]", f"[{_class(digit)}]", f"[{_class(extend)}]", f"[{re.escape(EXTEND_NUM_LET)}]"
    mid_letter = f"[{re.escape(MID_LETTER + MID_NUM_LET_Q)}]"
    mid_num = f"[{re.escape(MID_NUM + MID_NUM_LET_Q)}]"
    # a letter may be followed by a MidLetter that a letter follows (WB6/7), a digit by a MidNum before a digit
    # (WB11/12)
    unit = f"(?:{L}{E}*(?:{mid_letter}{E}*(?={L}))?|{N}{E}*(?:{mid_num}{E}*(?={N}))?)"
    word = f"(?:{X}{E}*)*{unit}(?:{unit}|{X}{E}*)*"
    katakana = f"[{ranges(KATAKANA)}]{E}*(?:[{ranges(KATAKANA)}{re.escape(EXTEND_NUM_LET)}]{E}*)*"
    single = f"[{ranges(HAN)}{ranges(HIRAGANA)}{ranges(EMOJI)}]{E}*"
    southeast_asian = f"[{_class(sea)}](?:[{_class(sea)}]|{E})*"
    return re.compile(f"{word}|{katakana}|{single}|{southeast_asian}")


def lower(text: str) -> str:
    """Java's per-code-point ``Character.toLowerCase`` of ``text``."""
    return text.replace("\u0130", "i").replace("\u03a3", "\u03c3").lower()


def tokenize(text: str) -> list[str]:
    """StandardTokenizer's tokens of ``text``, case kept."""
    tokens = _pattern().findall(text)
    if any(len(t) > MAX_TOKEN_LENGTH for t in tokens):
        tokens = [t[i:i + MAX_TOKEN_LENGTH] for t in tokens for i in range(0, len(t), MAX_TOKEN_LENGTH)]
    return tokens


def strip_possessive(token: str) -> str:
    """EnglishPossessiveFilter: a trailing ``'s`` (apostrophe, right single quote or fullwidth apostrophe) removed."""
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in "'\u2019\uff07":
        return token[:-2]
    return token


class Analyzer:
    """Anserini's ``DefaultEnglishAnalyzer``: ``Analyzer()(text)`` -> terms. ``stem=False`` leaves Porter out
    (Anserini's ``-stemmer none``); ``stopwords=False`` keeps every word (``-keepStopwords``). Stems are memoised per
    analyzer: a corpus repeats its words."""

    def __init__(self, stem: bool = True, stopwords: bool = True) -> None:
        from gapbench.adapters._porter import stem as porter

        self._stem: Callable[[str], str] | None = porter if stem else None
        self._stop = STOPWORDS if stopwords else frozenset()
        self._memo: dict[str, str] = {}

    def __call__(self, text: str) -> list[str]:
        # lower-casing the text first gives the tokens lower-casing each token would: the case mappings keep every
        # character in its class and, with the two mapped in lower(), keep the length
        stop, memo, stem = self._stop, self._memo, self._stem
        out = []
        for token in tokenize(lower(text)):
            token = strip_possessive(token)
            if token in stop or not token:
                continue
            if stem is not None:
                stemmed = memo.get(token)
                if stemmed is None:
                    stemmed = memo[token] = stem(token)
                token = stemmed
            out.append(token)
        return out


def analyze(text: str) -> list[str]:
    """The terms Anserini indexes for ``text`` (a fresh analyzer each call; keep an :class:`Analyzer` for many)."""
    return Analyzer()(text)
