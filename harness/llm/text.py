"""Small text helpers shared by the LLM layer's messages: every error names what it got on one line."""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(text.split())


def clause(text: str) -> str:
    """``text`` ready to be followed by a full stop of ours."""
    return text.rstrip(" .")


def short(text: str) -> str:
    """``text`` cut to 60 characters, for quoting a user's value in a message."""
    return text if len(text) <= 60 else text[:57] + "..."
