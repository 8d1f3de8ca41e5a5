"""A watch on a model's first answers: a model too weak for the job is stopped within its first calls, not after
the whole stage.

Each answer is judged once: ``ok``, ``null`` (empty, ``null``, or only placeholders), ``echo`` (it copies the prompt,
or the documents shown in it, back) or ``invalid`` (the stage cannot read it). The first ``window`` answers are
watched; as soon as ``threshold`` of them (rounded up) are not ``ok``, :class:`~gapbench.errors.ModelTooWeakError`
stops the command, naming the stage, the counts with an example of each, ``--llm-base-url`` / ``--llm-model`` and
what model can do the job. Answers already given stay in the LLM cache, so a re-run costs no call for them.

    with watching(llm, "obliq build: annotate", judge=annotation_judge):
        answers = llm.chat_many(requests)        # the first answers in small groups, each judged as it comes

The settings: ``window`` and ``threshold`` (defaults :data:`DEFAULT_WINDOW`, :data:`DEFAULT_THRESHOLD`), or the
environment variables ``$GAPBENCH_LLM_WATCH_WINDOW`` (0 turns the watch off) and ``$GAPBENCH_LLM_WATCH_THRESHOLD``.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigError, ModelTooWeakError
from .text import one_line

DEFAULT_WINDOW = 5  # answers watched
DEFAULT_THRESHOLD = 0.6  # share of them not usable that stops the command: 3 of the first 5
ENV_WINDOW = "GAPBENCH_LLM_WATCH_WINDOW"
ENV_THRESHOLD = "GAPBENCH_LLM_WATCH_THRESHOLD"
VERDICTS = ("ok", "null", "echo", "invalid")
CAPABLE = ("an instruction-following model of about 7B parameters or more (e.g. Qwen2.5-7B-Instruct or "
           "Llama-3.1-8B-Instruct served by vLLM, llama.cpp or Ollama) or an API model (e.g. gpt-4o-mini)")
_NULLS = {"", "null", "none", "n/a", "na", "nil", "{}", "[]", "\"\""}
_WORD = re.compile(r"[a-z0-9]+")
ECHO_NGRAM = 5  # words in a row copied from the prompt
ECHO_SHARE = 0.5  # share of an answer's word runs found in the prompt that makes it a copy

Judge = Callable[[str, str], str]  # (prompt, answer text) -> a verdict


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def copied(text: str, prompt: str, *, prompt_words: set[tuple[str, ...]] | None = None) -> bool:
    """Whether ``text`` (4 words or more) is a copy of part of ``prompt``: wholly inside it, or half or more of its
    runs of :data:`ECHO_NGRAM` words found in it."""
    w = words(text)
    if len(w) < 4:
        return False
    if " ".join(w) in " ".join(words(prompt)):
        return True
    if len(w) < ECHO_NGRAM:
        return False
    grams = prompt_words if prompt_words is not None else ngrams(words(prompt))
    own = ngrams(w)
    return sum(g in grams for g in own) >= ECHO_SHARE * len(own)


def ngrams(w: Sequence[str], n: int = ECHO_NGRAM) -> set[tuple[str, ...]]:
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def is_null(value: Any) -> bool:
    """None, an empty or ``null``-like string, or one with no letter or digit (a placeholder such as ``...``)."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip().lower() in _NULLS or not _WORD.search(value.lower())
    return False


def generic_verdict(prompt: str, text: str | None) -> str:
    """``null`` for an empty or null answer, ``echo`` for one that copies the prompt, else ``ok``."""
    if text is None or is_null(text):
        return "null"
    return "echo" if copied(text, prompt) else "ok"


def values_verdict(prompt: str, values: Sequence[Any]) -> str:
    """The verdict on an answer that gives ``values`` (one per item asked about): ``ok`` when one of them is usable
    (text that is neither null nor copied from the prompt), else ``echo`` when one was copied, else ``null``."""
    grams = ngrams(words(prompt))
    copies = 0
    for v in values:
        if is_null(v):
            continue
        if isinstance(v, str) and copied(v, prompt, prompt_words=grams):
            copies += 1
            continue
        return "ok"
    return "echo" if copies else "null"


_BRACKETED = re.compile(r"\[\s*\d+\s*\]")
_BARE = re.compile(r"\d+\s*>\s*\d+|^[\d\s,;>.\-]+$")


def listwise_verdict(prompt: str, text: str) -> str:
    """A listwise ranking's verdict: ``ok`` when it gives passage ids as rankings are read (``[2] > [1]``, ``[2]``,
    ``2 > 1``, or nothing but numbers), else ``invalid`` (prose without an id)."""
    return "ok" if _BRACKETED.search(text) or _BARE.search(text.strip()) else "invalid"


def ranking_verdict(prompt: str, text: str) -> str:
    """A verifier's answer: judged as a listwise ranking (:func:`listwise_verdict`) when its prompt numbers passages
    (``[1]``), else ``ok`` (only null and echoed answers count against another kind of verifier)."""
    return listwise_verdict(prompt, text) if "[1]" in prompt else "ok"


def synthesis_verdict(prompt: str, text: str) -> str:
    """An ARGUS synthesis answer (the Input Text rewritten with short entity descriptions): ``echo`` when it copies
    the instructions or the reference passages instead (half of its five-word runs found in the prompt outside the
    Input Text), ``invalid`` when it is not a rewrite of the Input Text (it keeps under half of that text's distinct
    words), else ``ok``. A copy of the Input Text itself is a rewrite: leaving it unchanged is allowed. A prompt without
    the ``### Input Text`` and ``### Augmented Text`` headings (a template of the user's) is judged ``ok``."""
    before, sep, rest = prompt.partition("### Input Text")
    document, sep2, _after = rest.partition("### Augmented Text")
    if not (sep and sep2):
        return "ok"
    own = ngrams(words(text))
    if own and sum(g in ngrams(words(before)) for g in own) >= ECHO_SHARE * len(own):
        return "echo"
    doc, kept = set(words(document)), set(words(text))
    if doc and len(doc & kept) < ECHO_SHARE * len(doc):
        return "invalid"
    return "ok"


synthesis_verdict.own_echo = True  # type: ignore[attr-defined]  # a rewrite copies its document: no generic check


def settings(window: int | None = None, threshold: float | None = None) -> tuple[int, float]:
    """(window, threshold): the ones given, else the environment's, else the defaults; bad values are refused."""
    if window is None:
        raw = os.environ.get(ENV_WINDOW, "").strip()
        try:
            window = int(raw) if raw else DEFAULT_WINDOW
        except ValueError:
            raise ConfigError(f"${ENV_WINDOW}={raw!r} is not accepted; give a whole number of answers >= 0 (0 turns "
                              f"the watch off; default {DEFAULT_WINDOW}).") from None
    if threshold is None:
        raw = os.environ.get(ENV_THRESHOLD, "").strip()
        try:
            threshold = float(raw) if raw else DEFAULT_THRESHOLD
        except ValueError:
            threshold = math.nan
        if not 0 < threshold <= 1:
            raise ConfigError(f"${ENV_THRESHOLD}={raw!r} is not accepted; give a share in (0, 1] of the watched "
                              f"answers (default {DEFAULT_THRESHOLD}).")
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigError(f"watch window {window!r} is not accepted; give a whole number of answers >= 0 (0: off).")
    if isinstance(threshold, bool) or not 0 < threshold <= 1:
        raise ConfigError(f"watch threshold {threshold!r} is not accepted; give a share in (0, 1].")
    return window, threshold


class CompetenceWatch:
    """The verdicts on the first ``window`` answers of one stage; raises
    :class:`~gapbench.errors.ModelTooWeakError` once ``ceil(threshold * window)`` of them are not ``ok``. Thread-safe:
    answers may come from several threads."""

    def __init__(self, stage: str, judge: Judge | None = None, *, window: int | None = None,
                 threshold: float | None = None, model: str = "", endpoint: str = "") -> None:
        self.stage, self.judge, self.model, self.endpoint = stage, judge, model, endpoint
        self.window, self.threshold = settings(window, threshold)
        self.need = max(1, math.ceil(self.threshold * self.window - 1e-9))
        self.counts: Counter = Counter()
        self.examples: dict[str, str] = {}
        self.calls_left: int | None = None  # set by the caller that knows: requests not sent when it stopped
        self.tripped = False  # once stopped, every later request of the stage is refused before it is sent
        self._lock = threading.Lock()

    @property
    def seen(self) -> int:
        return sum(self.counts.values())

    @property
    def bad(self) -> int:
        return self.seen - self.counts["ok"]

    @property
    def open(self) -> bool:
        """Whether answers are still being watched (a tripped watch stays open: it refuses every request)."""
        return self.tripped or (self.window > 0 and self.seen < self.window)

    def bind(self, client: Any) -> None:
        """Names ``client``'s model and endpoint in the message, when no client was named yet."""
        if not self.model:
            self.model = str(getattr(getattr(client, "config", None), "model", "") or "")
            self.endpoint = str(getattr(client, "endpoint", "") or "")

    def group(self, width: int) -> int:
        """How many requests to send next while the watch is open: no more than could be needed to decide."""
        return max(1, min(width, self.need - self.bad, self.window - self.seen))

    def verdict(self, prompt: str, text: str | None) -> str:
        if self.judge is not None and getattr(self.judge, "own_echo", False) and not is_null(text):
            return self.judge(prompt, text or "")  # the judge tells a copy from an answer itself
        out = generic_verdict(prompt, text)
        if out == "ok" and self.judge is not None:
            out = self.judge(prompt, text or "")
            if out not in VERDICTS:
                raise ValueError(f"a watch's judge answered {out!r}; it answers one of {', '.join(VERDICTS)}")
        return out

    def see(self, prompt: str, text: str | None) -> None:
        """Judges one answer (while the watch is open) and stops the command when the model is too weak."""
        if not self.open:
            return
        out = self.verdict(prompt, text)
        with self._lock:
            if self.tripped:
                raise self.error()
            if not self.open:
                return
            self.counts[out] += 1
            if out != "ok":
                self.examples.setdefault(out, one_line(text or "")[:100])
            tripped = self.tripped = self.tripped or self.bad >= self.need
        if tripped:
            raise self.error()

    def error(self) -> ModelTooWeakError:
        said = {"null": "null or empty", "echo": "copied the prompt back", "invalid": "could not be read"}
        parts = [f"{self.counts[v]} {said[v]} (e.g. {self.examples.get(v, '')!r})"
                 for v in ("null", "echo", "invalid") if self.counts[v]]
        who = f"the model {self.model!r}" if self.model else "the model"
        if self.endpoint:
            who += f" at {self.endpoint}"
        left = (f"; stopped with {self.calls_left:,} request{'' if self.calls_left == 1 else 's'} of the stage not "
                "sent" if self.calls_left else "")
        return ModelTooWeakError(
            f"{self.stage}: {who} cannot do this job: of its first {self.seen} answers, {'; '.join(parts)}, and "
            f"{self.counts['ok']} usable{left}. The answers given are cached, so a re-run repeats none of them. Give "
            f"a capable model with --llm-base-url and --llm-model (llm_base_url / llm_model in Python): {CAPABLE}. "
            f"(The watch stops at {self.need} unusable of the first {self.window} answers: ${ENV_WINDOW}, "
            f"${ENV_THRESHOLD}; see docs/llm.md.)", stage=self.stage, counts=dict(self.counts))


def prompt_text(messages: Any) -> str:
    """The text a request showed the model: its messages' contents, joined."""
    if isinstance(messages, str):
        return messages
    return "\n".join(str(m.get("content") or "") for m in messages if isinstance(m, dict))


def client_of(component: Any) -> Any:
    """The :class:`~gapbench.llm.client.LLMClient` of ``component``: itself, a LazyClient's, or its ``client``
    attribute's; None when it has none."""
    for candidate in (component, getattr(component, "client", None)):
        if candidate is None:
            continue
        if callable(getattr(candidate, "chat_many", None)) and hasattr(candidate, "config"):
            return candidate
        if callable(getattr(candidate, "get", None)) and hasattr(candidate, "made"):  # a LazyClient
            return candidate.get()
    return None


_ACTIVE: list[CompetenceWatch] = []  # the watch of every client, set by watching(None, ...)


def active() -> CompetenceWatch | None:
    """The watch set for every client (``watching(None, ...)``), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def watching(llm: Any, stage: str, judge: Judge | None = None, *, window: int | None = None,
             threshold: float | None = None) -> Iterator[CompetenceWatch | None]:
    """Inside the block, the first answers of ``llm``'s client (``llm``: a client, a LazyClient, or a component with
    a ``client``) are judged by a :class:`CompetenceWatch` for ``stage``; yields the watch. ``llm`` None: the
    answers of every client in this process (one made inside the block by a component, e.g. the gap's verifier)."""
    if llm is None:
        shared = CompetenceWatch(stage, judge, window=window, threshold=threshold)
        _ACTIVE.append(shared)
        try:
            yield shared
        finally:
            _ACTIVE.remove(shared)
        return
    client = client_of(llm)
    if client is None:
        yield None
        return
    config = getattr(client, "config", None)
    model = str(getattr(config, "model", "") or "")
    watch = CompetenceWatch(stage, judge, window=window, threshold=threshold, model=model,
                            endpoint=str(getattr(client, "endpoint", "")))
    before = getattr(client, "watch", None)
    client.watch = watch
    try:
        yield watch
    finally:
        client.watch = before
