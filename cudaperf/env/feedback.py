"""Feedback for the next turn, from one evaluation (PAPER-SPEC §5): the trimmed compiler error, or one failing
case, or the speedup with the kernel/copy time split; always the eleven structural feature values.

The failing case names the test's sizes and the first differing element (expected against got) of a hidden test
that is never used again: every evaluation draws fresh hidden inputs, so what the feedback reveals does not help
the next answer pass the next evaluation's tests.

The summary of earlier turns ([FEEDBACK_HISTORY]) is made by a policy call (the paper's "separate LLM call",
:func:`summary_request`) or, as an option and for tests, by :func:`template_summary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cudaperf.harness.result import EvaluationResult, FailureKind
from cudaperf.policy.base import Request

MAX_COMPILE_LINES = 25
MAX_COMPILE_CHARS = 2000
MAX_MESSAGE_CHARS = 600


@dataclass(frozen=True)
class FeedbackSettings:
    max_compile_lines: int = MAX_COMPILE_LINES
    """Lines of the compiler's log shown (errors first)."""
    max_compile_chars: int = MAX_COMPILE_CHARS
    max_message_chars: int = MAX_MESSAGE_CHARS
    """Characters of a run failure's message shown."""
    summary_max_new_tokens: int = 256


def trim_compile_log(log: str, s: FeedbackSettings = FeedbackSettings()) -> str:
    """The compiler's errors first (lines naming ``error``), then the rest, cut to the limits."""
    lines = [ln for ln in (log or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    rest = [ln for ln in lines if ln not in errors]
    kept = (errors + rest)[: s.max_compile_lines]
    text = "\n".join(kept)
    if len(text) > s.max_compile_chars:
        text = text[: s.max_compile_chars] + "\n..."
    elif len(lines) > len(kept):
        text += f"\n... ({len(lines) - len(kept)} more lines)"
    return text


def _num(x: Any) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def failed_case(result: EvaluationResult, s: FeedbackSettings = FeedbackSettings()) -> str:
    """One failing case: its sizes, the first differing element and the error over the output."""
    bad = [t for t in result.tests if not t.passed]
    if not bad:
        msg = result.failure.message if result.failure else "the outputs were wrong"
        return msg[: s.max_message_chars]
    t = bad[0]
    sizes = ", ".join(f"{k} = {v}" for k, v in t.config.items()) or "the task's sizes"
    passed = sum(x.passed for x in result.tests)
    head = f"test {t.index + 1} of {len(result.tests)} failed ({passed} passed); sizes: {sizes}"
    m = t.mismatch
    if m is None:
        return f"{head}\n{(t.message or (result.failure.message if result.failure else ''))[: s.max_message_chars]}"
    return (f"{head}\noutput {m.output}, element {m.index}: expected {_num(m.expected)}, got {_num(m.got)}; "
            f"{m.n_bad} of {m.n_total} elements differ (max abs err {m.max_abs_err:.3g}, max rel err "
            f"{m.max_rel_err:.3g})")


def features_line(features: dict[str, float | None]) -> str:
    return ", ".join(f"{k} = {'n/a' if v is None else f'{v:.3g}'}" for k, v in features.items())


def feedback_text(result: EvaluationResult, features: dict[str, float | None],
                  s: FeedbackSettings = FeedbackSettings()) -> str:
    """The [FEEDBACK] block's content for the turn that produced ``result``."""
    f = result.failure
    kind = f.kind if f else None
    if result.status == "unscored":
        body = ("The harness could not judge your previous answer (a fault of the evaluation, not of your code): "
                f"{(f.message if f else '')[: s.max_message_chars]}")
    elif kind == FailureKind.NO_CODE:
        body = "No code was found in your previous answer: put the whole program inside <OUTPUT_CUDA></OUTPUT_CUDA>."
    elif kind == FailureKind.STATIC_CHECK:
        body = ("[COMPILE_ERROR]\nYour previous answer was rejected before compiling: "
                f"{'; '.join(result.static_check_reasons) or (f.message if f else '')}\n[/COMPILE_ERROR]")
    elif kind in (FailureKind.COMPILE_ERROR, FailureKind.LINK_ERROR):
        log = trim_compile_log(f.message if f else (result.compile.log if result.compile else ""), s)
        body = f"[COMPILE_ERROR]\n{log}\n[/COMPILE_ERROR]"
    elif kind == FailureKind.NO_GPU_WORK:
        body = ("Your previous answer's outputs were not computed on the GPU: the work must be done by CUDA kernels "
                f"and the outputs copied back from the device. ({(f.message if f else '')[: s.max_message_chars]})")
    elif kind == FailureKind.TIMER_MISMATCH:
        body = ("Your previous answer was correct, but its timing record disagreed with the harness's clock, so it "
                "got no credit: do not touch the timer or the driver's memory.")
    elif kind is not None and not result.correct:
        label = {FailureKind.WRONG_OUTPUT: "wrong output", FailureKind.TIMING_RECHECK: "wrong output while timed",
                 FailureKind.CRASH: "crash", FailureKind.TIMEOUT: "time limit", FailureKind.CUDA_ERROR: "CUDA error"}
        body = (f"Your previous answer compiled but failed ({label.get(kind, kind.value)}).\n[FAILED_CASE]\n"
                f"{failed_case(result, s)}\n[/FAILED_CASE]")
    elif result.correct and result.speedup is not None:
        c, b, ev = result.candidate_timing, result.baseline_timing, result.gpu_evidence
        body = (f"Your previous answer was correct on all {len(result.tests)} hidden tests and ran "
                f"{result.speedup:.2f}x as fast as the sequential baseline")
        if c and b:
            body += f" ({c.median_ms:.3f} ms against {b.median_ms:.3f} ms per call)"
        body += "."
        if ev and ev.kernel_ms is not None and ev.memcpy_ms is not None:
            gpu = ev.kernel_ms + ev.memcpy_ms
            share = 100 * ev.memcpy_ms / gpu if gpu > 0 else 0.0
            body += (f" GPU time per call: kernels {ev.kernel_ms:.3f} ms, copies {ev.memcpy_ms:.3f} ms "
                     f"({share:.0f} % copies). Make it faster.")
    elif result.correct:
        body = f"Your previous answer was correct on all {len(result.tests)} hidden tests (not timed)."
    else:
        body = f"Your previous answer got to stage {result.stage.value} and stopped there."
    return f"{body}\n[FEATURES] {features_line(features)} [/FEATURES]"


def outcome_line(result: EvaluationResult) -> str:
    """One line per turn, for the template summary."""
    if result.status == "unscored":
        return "not judged (harness fault)"
    if result.correct:
        return f"correct, {result.speedup:.2f}x" if result.speedup is not None else "correct"
    f = result.failure
    return f"{f.kind.value}" if f else f"stopped at {result.stage.value}"


def template_summary(previous: str, turn: int, result: EvaluationResult, features: dict[str, float | None]) -> str:
    """The deterministic summary: one line per earlier turn (its outcome and the features that moved)."""
    feats = ", ".join(f"{k} {v:.3g}" for k, v in features.items() if v is not None and k in
                      ("tpb", "coal", "kernels", "syncthreads", "atomics", "xfer"))
    line = f"turn {turn + 1}: {outcome_line(result)}" + (f" ({feats})" if feats else "")
    return (previous.strip() + "\n" + line).strip()


SUMMARY_INSTRUCTION = ("Summarize, in at most 120 words, what the CUDA attempts so far changed and what their "
                       "results were, so that the next attempt can avoid the same mistakes. Output only the summary.")


def summary_request(task_id: str, sample: int, turn: int, previous: str, code: str | None, feedback: str) -> Request:
    """The policy call that folds turn ``turn`` into the summary of earlier turns."""
    content = (f"[PREVIOUS_SUMMARY]\n{previous.strip() or '(none)'}\n[/PREVIOUS_SUMMARY]\n"
               f"[ATTEMPT]\n{(code or '(no code)').strip()[:4000]}\n[/ATTEMPT]\n[RESULT]\n{feedback.strip()}\n"
               f"[/RESULT]\n{SUMMARY_INSTRUCTION}")
    return Request(messages=({"role": "user", "content": content},), task_id=task_id, sample=sample, turn=turn,
                   purpose="summary")
