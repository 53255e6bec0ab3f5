"""The policy interface: chat messages in, text out, with token counts, finish reason and latency.

Every policy (an OpenAI-compatible endpoint, a local transformers model, the embedded model, a replay of
recorded completions) implements :class:`Policy`. The environment and the evaluation loop know nothing else of
it. A policy that cannot answer one request (an endpoint down after its retries) returns a :class:`Generation`
with ``error`` set and empty text: the caller records it as a policy failure, never as the candidate's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

Message = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    """The paper samples at temperatures in [0.2, 0.7]; 0 means greedy."""
    top_p: float = 0.9
    """Nucleus sampling (the paper's p = 0.9)."""
    max_new_tokens: int = 1536
    """The paper's cap on new tokens."""
    seed: int | None = None
    """Base seed; a policy that can seed derives each request's seed from it and the request's key."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")


@dataclass(frozen=True)
class Request:
    """One generation request: the chat, and who it is for (replay policies look completions up by it)."""

    messages: tuple[Message, ...]
    task_id: str = ""
    sample: int = 0
    turn: int = 0
    purpose: str = "candidate"
    """``candidate`` (a CUDA answer) or ``summary`` (the FEEDBACK_HISTORY summary of earlier turns)."""

    @property
    def key(self) -> str:
        return f"{self.task_id}/s{self.sample}/t{self.turn}/{self.purpose}"


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    """``stop`` (ended by itself), ``length`` (hit max_new_tokens), ``error`` (no answer: see ``error``)."""
    latency_s: float = 0.0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_size(self) -> int | None:
        """How many answers the generate call that made this one made at once (``extra["batch"]``, which local
        models set; their ``latency_s`` is that call's wall), else None."""
        b = self.extra.get("batch")
        return b if isinstance(b, int) and not isinstance(b, bool) and b >= 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "finish_reason": self.finish_reason, "latency_s": self.latency_s, "error": self.error,
                "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Generation":
        return cls(text=d.get("text") or "", prompt_tokens=d.get("prompt_tokens"),
                   completion_tokens=d.get("completion_tokens"), finish_reason=d.get("finish_reason") or "stop",
                   latency_s=float(d.get("latency_s") or 0.0), error=d.get("error"), extra=dict(d.get("extra") or {}))


class PolicyError(RuntimeError):
    """A policy that cannot start at all (a model directory that does not exist, no embedded model installed):
    raised before anything is generated, with a message that says what to do."""


@runtime_checkable
class Policy(Protocol):
    name: str
    """What the run records, e.g. ``openai:gpt-x@http://localhost:8000/v1`` or ``embedded:SmolLM2-135M-Instruct``."""

    @property
    def context_tokens(self) -> int | None:
        """The most prompt + completion tokens the policy takes (None: unknown, no limit applied)."""

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of ``messages`` as the policy would see them (its tokenizer and chat template, or an
        estimate where it has none)."""

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[Generation]:
        """One generation per request, in order. Never raises for one failed request (its Generation carries
        ``error``); raises :class:`PolicyError` only when the policy cannot work at all."""

    def close(self) -> None:
        """Free what the policy holds (GPU memory, HTTP clients)."""
