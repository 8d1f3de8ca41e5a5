"""The records of one chat call: :class:`ChatRequest` (a prompt or OpenAI messages, a tag, per-request parameters)
and :class:`ChatResponse` (the answer, its token counts, and whether it came from the cache)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

Message = Mapping[str, str]


def _messages(value: str | Sequence[Message]) -> tuple[dict[str, str], ...]:
    if isinstance(value, str):
        return ({"role": "user", "content": value},)
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ConfigError(f"chat message #{i} is {m!r}; each message is a mapping with string 'role' and "
                              "'content', e.g. {'role': 'user', 'content': '...'}, or pass one prompt string.")
        out.append({"role": m["role"], "content": m["content"]})
    if not out:
        raise ConfigError("a chat request has no messages; pass a prompt string or a non-empty list of messages.")
    return tuple(out)


@dataclass(frozen=True)
class ChatRequest:
    """One chat call: a prompt string or OpenAI messages, a ``tag`` (e.g. the query id) for the counters, and
    per-request parameters that override the config (``temperature``, ``max_tokens``, ``stop``, ...)."""

    messages: str | Sequence[Message]
    tag: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatResponse:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    model: str = ""
    truncated: bool = False  # cut by its token budget even after the re-ask with a larger one

    def to_cache(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "model": self.model, "truncated": self.truncated}

    @classmethod
    def from_cache(cls, data: Mapping[str, Any]) -> ChatResponse:
        return cls(data["text"], data.get("finish_reason"), int(data.get("prompt_tokens", 0)),
                   int(data.get("completion_tokens", 0)), True, data.get("model", ""), bool(data.get("truncated")))
