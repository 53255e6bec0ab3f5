"""Evaluation runs of a policy over a task set: the run directory's records (:mod:`cudaperf.eval.records`), the
metrics (:mod:`cudaperf.eval.metrics`: pass@k, speedup@k, fast_p@k) and the report (:mod:`cudaperf.eval.report`:
metrics.json, report.html, the terminal summary).

Only the light modules are imported here; the report (matplotlib, rich) is imported where it is used.
"""

from cudaperf.eval.metrics import (
    MetricSettings,
    NoiseMargin,
    SampleOutcome,
    Summary,
    expected_best_at_k,
    pass_at_k,
    speedup_at_k,
    summarize,
)
from cudaperf.eval.records import RunHeader, TurnRecord

__all__ = [
    "MetricSettings", "NoiseMargin", "RunHeader", "SampleOutcome", "Summary", "TurnRecord", "expected_best_at_k",
    "pass_at_k", "speedup_at_k", "summarize",
]
