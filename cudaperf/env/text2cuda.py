"""Text2CUDA's turn framing (our reading of CUDA-Harness, docs/TEXT2CUDA.md), apart from the refinement loop.

* Intermediate-structured generation: a text task's trajectory opens with a *spec turn*: the policy writes a
  structured specification inside ``<SPEC>...</SPEC>`` (inputs and outputs with shapes and dtypes, the math, a
  parallelization plan); the kernel turns then show it in a ``[SPEC]`` block. The spec turn is recorded
  (``phase = "spec"``) and never judged by the harness; a missing spec gives the kernel turns a note instead.
* Progressive validation: :func:`staged_validation` orders the harness's hidden-test outcomes into stages (the
  harness runs all its tests in one process; the stages are a reading of them by size): compile, tiny (the
  smallest test size), edge cases (the test sizes between, in the built-in families the odd, non-aligned ones),
  large randomized (the largest test size), timing (the timing size); it names the first stage that failed.
* Feedback-adaptive evolution (``--strategy evolve``): :func:`evolve_accepts` keeps the best correct candidate
  and accepts a new one only when it is correct and faster by a margin; optimization turns show the best so far
  (:func:`best_block`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from cudaperf.eval.records import TurnRecord
from cudaperf.harness.result import EvaluationResult
from cudaperf.policy.base import Generation, Message, Request

SPEC_MAX_CHARS = 6000
"""A longer spec is cut (it is shown in every kernel turn's prompt)."""

SPEC_INSTRUCTION = (
    "Do not write code yet. First write a structured specification of the function described above, inside "
    "<SPEC></SPEC>, with three parts: (1) Inputs and outputs: every argument with its C type, whether it is read, "
    "written or both, and its element count as an expression of the size parameters; the return value if any. "
    "(2) Math: exactly what each output element (and the return value) is, as formulas over the inputs, with the "
    "order of accumulation and the edge cases (empty ranges, borders, ties). (3) Parallelization plan for a CUDA "
    "GPU: what one thread and one block compute, how reductions or dependencies are handled, the memory access "
    "pattern, and the kernel launches. The next turn writes the CUDA code from this specification.")

MISSING_SPEC_NOTE = ("(no specification: the spec turn gave no <SPEC>...</SPEC> block; work from the description "
                     "and the interface)")

_SPEC_RE = re.compile(r"<SPEC>(.*?)</SPEC>", re.S | re.I)


def text_blocks(task: Any, spec: str | None = None) -> str:
    """The [DESCRIPTION] and [INTERFACE] blocks of a text task (and [SPEC] when given): never its reference."""
    out = f"[DESCRIPTION]\n{task.description.strip()}\n[/DESCRIPTION]\n[INTERFACE]\n{task.interface.strip()}\n" \
          "[/INTERFACE]"
    if spec is not None:
        out += f"\n[SPEC]\n{spec.strip()}\n[/SPEC]"
    return out


def spec_messages(task: Any) -> tuple[Message, ...]:
    """The spec turn's chat: the description, the interface, the public example inputs, the instruction."""
    from cudaperf.env.prompt import public_inputs

    content = (f"{text_blocks(task)}\n[INPUTS]\n{public_inputs(task)}[/INPUTS]\n{SPEC_INSTRUCTION}\n")
    return ({"role": "user", "content": content},)


def spec_request(task: Any, sample: int) -> Request:
    return Request(messages=spec_messages(task), task_id=task.id, sample=sample, turn=0, purpose="spec")


def parse_spec(text: str) -> str | None:
    """The text of the first non-empty <SPEC> block, cut to :data:`SPEC_MAX_CHARS`; None when there is none."""
    for m in _SPEC_RE.finditer(text or ""):
        body = m.group(1).strip()
        if body:
            return body[:SPEC_MAX_CHARS]
    return None


def spec_record(task: Any, sample: int, gen: Generation, spec: str | None,
                meta: Mapping[str, str | None] | None = None) -> TurnRecord:
    """The record of a spec turn: not judged (status ``unscored``, stage ``none``), its text kept."""
    meta = meta or {}
    note = "" if spec is not None else MISSING_SPEC_NOTE
    return TurnRecord(
        task_id=task.id, task_kind="text", sample=sample, turn=0, candidate_id=f"s{sample}-spec",
        family=meta.get("family"), level=meta.get("level"), status="unscored", stage="none", compiled=False,
        correct=False, failure_kind=None if gen.error is None else "policy_error",
        failure_message=None if gen.error is None else gen.error[:2000], speedup=None, candidate_cv=None,
        baseline_cv=None, kernel_ms=None, memcpy_ms=None, reward=None, reward_terms={}, features={},
        prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens, finish_reason=gen.finish_reason,
        latency_s=round(gen.latency_s, 4), feedback=note, gen_error=gen.error, phase="spec", gen_batch=gen.batch_size,
        spec=spec if spec is not None else (gen.text[:SPEC_MAX_CHARS] if gen.error is None else None))


# --------------------------------------------------------------------------------------------------- stages

STAGES = ("compile", "tiny", "edge cases", "large randomized", "timing")


def _cfg_key(cfg: Mapping[str, int]) -> tuple:
    return tuple(sorted(cfg.items()))


def _sizes(cfg: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in cfg.items()) or "the task's sizes"


def validation_stages(result: EvaluationResult, timing_config: Mapping[str, int] | None = None
                      ) -> list[tuple[str, str, str]]:
    """(stage, sizes, verdict) in order; verdict ``passed``, ``FAILED ...``, ``not reached`` or ``not run ...``."""
    f = result.failure
    compiled = result.compile is not None and result.compile.ok
    out: list[tuple[str, str, str]] = []
    if not compiled:
        why = f.kind.value if f else "not compiled"
        out.append(("compile", "", f"FAILED ({why})"))
        return out + [(s, "", "not reached") for s in STAGES[1:]]
    out.append(("compile", "", "passed"))
    groups: dict[tuple, list] = {}
    for t in result.tests:
        groups.setdefault(_cfg_key(t.config), []).append(t)
    order = sorted(groups, key=lambda k: (sum(v for _, v in k), k))
    if not order:
        if result.status == "unscored":
            msg = f"not run ({(f.message if f else 'harness')[:160]})"
            return out + [(s, "", msg) for s in STAGES[1:]]
        why = f"FAILED ({f.kind.value}: {f.message[:160]})" if f else "FAILED"
        return out + [("tiny", "", why)] + [(s, "", "not reached") for s in STAGES[2:]]
    named = {order[0]: "tiny"}
    if len(order) > 1:
        named[order[-1]] = "large randomized"
    for k in order[1:-1]:
        named[k] = "edge cases"
    failed_before = False
    for stage in STAGES[1:4]:
        keys = [k for k in order if named[k] == stage]
        if not keys:
            out.append((stage, "", "no test of its own at these sizes"))
            continue
        tests = [t for k in keys for t in groups[k]]
        sizes = "; ".join(_sizes(dict(k)) for k in keys)
        bad = [t for t in tests if not t.passed]
        verdict = (f"passed ({len(tests)} tests)" if not bad else
                   f"FAILED ({len(bad)} of {len(tests)} tests wrong or not returned)")
        failed_before = failed_before or bool(bad)
        out.append((stage, sizes, verdict))
    tsizes = _sizes(timing_config) if timing_config else ""
    if failed_before:
        out.append(("timing", tsizes, "not reached"))
    elif result.correct and result.speedup is not None:
        out.append(("timing", tsizes, f"passed ({result.speedup:.2f}x the sequential baseline)"))
    elif result.correct:
        out.append(("timing", tsizes, "not timed"))
    elif result.status == "unscored":
        out.append(("timing", tsizes, f"not run ({(f.message if f else 'harness')[:160]})"))
    else:
        out.append(("timing", tsizes, f"FAILED ({f.kind.value if f else 'not credited'})"))
    return out


def first_failing_stage(stages: list[tuple[str, str, str]]) -> str | None:
    return next((s for s, _, v in stages if v.startswith("FAILED")), None)


def staged_validation(result: EvaluationResult, timing_config: Mapping[str, int] | None = None) -> str:
    """The [VALIDATION] block: each stage with its sizes and verdict, then the first failing stage."""
    stages = validation_stages(result, timing_config)
    lines = ["[VALIDATION]"]
    for i, (stage, sizes, verdict) in enumerate(stages, 1):
        lines.append(f"{i} {stage}{f' ({sizes})' if sizes else ''}: {verdict}")
    first = first_failing_stage(stages)
    lines.append(f"first failing stage: {first}" if first else "no stage failed")
    lines.append("[/VALIDATION]")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------- evolve

STRATEGIES = ("refine", "evolve")
DEFAULT_EVOLVE_MARGIN = 0.02


def evolve_accepts(best: EvaluationResult | None, new: EvaluationResult, margin: float = DEFAULT_EVOLVE_MARGIN
                   ) -> bool:
    """Whether evolution takes ``new`` as its best candidate: it must be scored and correct; with a best already
    kept, also timed and faster than it by ``margin`` (``new.speedup > best.speedup * (1 + margin)``)."""
    if new.status != "scored" or not new.correct:
        return False
    if best is None:
        return True
    if new.speedup is None or best.speedup is None:
        return False
    return new.speedup > best.speedup * (1.0 + margin)


def best_block(code: str, result: EvaluationResult, turn: int, margin: float) -> str:
    """The optimization turn's view of the best candidate so far."""
    speed = f"{result.speedup:.2f}x the sequential baseline" if result.speedup is not None else "untimed"
    return (f"[BEST_SO_FAR]\nThe best correct answer so far (turn {turn + 1}, {speed}) is below. Make it faster: a "
            f"new answer replaces it only if it is correct and at least {100 * margin:g} % faster.\n"
            f"{code.strip()}\n[/BEST_SO_FAR]")

