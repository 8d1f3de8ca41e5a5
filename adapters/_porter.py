"""Martin Porter's stemmer in the form Lucene's ``PorterStemmer`` has (the one Anserini's default analyzer applies).

That form is Porter's own reference implementation rather than the 1980 paper, and differs from the paper (and from
Snowball's ``porter``, which PyStemmer ships) in three places, all checked against Lucene 9 on the 35,635 distinct
words of the Cranfield, CACM and ImpliRet texts (67 of them stem differently under PyStemmer):

- words of one or two characters are left as they are (PyStemmer: ``es`` -> ``e``);
- step 2 rewrites ``-bli`` to ``-ble`` where the paper has ``-abli`` to ``-able`` (``incredibly`` -> ``incred``);
- step 2 rewrites ``-logi`` to ``-log`` (``methodology`` -> ``methodolog``; the paper keeps ``methodologi``).

    >>> [stem(w) for w in ("caresses", "ponies", "relational", "generalizations", "methodology", "es")]
    ['caress', 'poni', 'relat', 'gener', 'methodolog', 'es']

Letters other than a, e, i, o, u and y count as consonants, as in Lucene (digits, accented letters).
"""

from __future__ import annotations

VOWELS = frozenset("aeiou")

# step 2 and 3: (suffix, replacement) tried in this order; the first suffix the word ends with decides, and is
# replaced only when the stem before it has a measure above 0
STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"), ("bli", "ble"),
    ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"),
    ("ator", "ate"), ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"),
    ("iviti", "ive"), ("biliti", "ble"), ("logi", "log"),
)
STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""))
# step 4: suffixes removed when the stem before them has a measure above 1 (-ion only after s or t)
STEP4 = ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism", "ate",
         "iti", "ous", "ive", "ize")


def _consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``stem`` ([C](VC)^m[V])."""
    m, i, n = 0, 0, len(stem)
    while i < n and _consonant(stem, i):
        i += 1
    while i < n:
        while i < n and not _consonant(stem, i):
            i += 1
        if i == n:
            break
        while i < n and _consonant(stem, i):
            i += 1
        m += 1
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (``hop``, not ``snow``)."""
    n = len(word)
    return (n >= 3 and _consonant(word, n - 1) and not _consonant(word, n - 2) and _consonant(word, n - 3)
            and word[-1] not in "wxy")


def _step1(w: str) -> str:
    if w.endswith("s"):
        if w.endswith("sses") or w.endswith("ies"):
            w = w[:-2]
        elif not w.endswith("ss"):
            w = w[:-1]
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[:-len(suffix)]):
                w = w[:-len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_consonant(w):
                    if w[-1] not in "lsz":
                        w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    return w


def _replace(w: str, table: tuple[tuple[str, str], ...]) -> str:
    for suffix, replacement in table:
        if w.endswith(suffix):
            stem = w[:-len(suffix)]
            return stem + replacement if _measure(stem) > 0 else w
    return w


def _step4(w: str) -> str:
    for suffix in STEP4:
        if w.endswith(suffix):
            stem = w[:-len(suffix)]
            if suffix == "ion" and not stem.endswith(("s", "t")):
                continue  # -ion not after s or t: -ou and the rest may still apply (none of them ends in n)
            return stem if _measure(stem) > 1 else w
    return w


def _step5(w: str) -> str:
    m = _measure(w[:-1]) if w.endswith("e") else 0
    if w.endswith("e") and (m > 1 or (m == 1 and not _cvc(w[:-1]))):
        w = w[:-1]
    if w.endswith("ll") and _measure(w[:-1]) > 1:
        w = w[:-1]
    return w


def stem(word: str) -> str:
    """The Porter stem of a lower-cased ``word``."""
    if len(word) <= 2:
        return word
    return _step5(_step4(_replace(_replace(_step1(word), STEP2), STEP3)))
