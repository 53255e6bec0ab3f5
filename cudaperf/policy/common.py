"""Small helpers the policies share: per-request seeds, whitespace token counts, the canned summary text.

Decisions:

* A request's seed is derived from the base seed and :attr:`Request.key` with SHA-256 (never Python's ``hash``,
  which is salted per process), so sample 3 of a task gets the same seed in every run, on every machine, whatever
  else is in the batch. Without a base seed each request gets a fresh random seed, recorded in
  ``Generation.extra["seed"]`` so that the sample can be reproduced.
* Policies without a tokenizer (replay, oracle) count tokens as whitespace-separated words: an exact, documented
  count of something, never a guess dressed as a tokenizer's.
* Replay and oracle policies answer ``purpose == "summary"`` requests with :func:`summary_text`: the first words
  of the request's last user message, deterministic, so that a replayed multi-turn run rebuilds the same context.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Sequence

from cudaperf.policy.base import Message, Request

SEED_BITS = 31
"""Derived seeds fit a signed 32-bit integer: what every server and ``torch.Generator`` accepts."""

SUMMARY_WORDS = 64
"""The most words of the last user message that :func:`summary_text` keeps."""


def derive_seed(base: int | None, request: Request) -> int:
    """The seed of one request: a stable hash of ``base`` and ``request.key`` (a random one when ``base`` is None)."""
    if base is None:
        return secrets.randbits(SEED_BITS)
    digest = hashlib.sha256(f"{int(base)}|{request.key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (1 << SEED_BITS)


def word_count(text: str) -> int:
    """Whitespace-separated words of ``text``."""
    return len(text.split())


def messages_word_count(messages: Sequence[Message]) -> int:
    """Whitespace-separated words over the contents of ``messages`` (roles not counted)."""
    return sum(word_count(str(m.get("content") or "")) for m in messages)


def last_user_message(messages: Sequence[Message]) -> str:
    """The content of the last ``user`` message ("" when there is none)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            return str(m.get("content") or "")
    return ""


def summary_text(messages: Sequence[Message], max_words: int = SUMMARY_WORDS) -> str:
    """A deterministic short summary of a chat: ``Summary of earlier turns:`` and the first ``max_words`` words of
    its last user message (whitespace collapsed, ``...`` when cut)."""
    words = last_user_message(messages).split()
    body = " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")
    return f"Summary of earlier turns: {body}".rstrip()
