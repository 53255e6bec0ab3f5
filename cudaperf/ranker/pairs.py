"""Training and evaluation pairs from measured variants (PAPER-SPEC §3).

Per task, valid candidates are sorted by speedup; the top quartile is "strong", the bottom quartile "weak"
(quartile size ``max(1, n // 4)``); a pair (y+, y-) joins a strong and a weak candidate with
speedup(y+) > speedup(y-). Pairs never cross tasks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Sequence


@dataclass(frozen=True)
class Item:
    """One valid measured candidate: its id, task and speedup."""

    candidate_id: str
    task_id: str
    speedup: float


def by_task(items: Sequence[Item]) -> dict[str, list[Item]]:
    out: dict[str, list[Item]] = {}
    for it in items:
        if it.speedup > 0 and math.isfinite(it.speedup):
            out.setdefault(it.task_id, []).append(it)
    return out


def quartile_pairs(items: Sequence[Item], min_per_task: int = 4) -> list[tuple[Item, Item]]:
    """(strong, weak) pairs per task; tasks with fewer than ``min_per_task`` valid candidates give none."""
    pairs = []
    for task, its in sorted(by_task(items).items()):
        if len(its) < min_per_task:
            continue
        ranked = sorted(its, key=lambda i: (-i.speedup, i.candidate_id))
        q = max(1, len(ranked) // 4)
        for s in ranked[:q]:
            for w in ranked[-q:]:
                if s.speedup > w.speedup:
                    pairs.append((s, w))
    return pairs


def ordered_pairs(items: Sequence[Item], min_ratio: float = 1.0) -> list[tuple[Item, Item]]:
    """Every (faster, slower) pair within each task whose speedups differ by more than ``min_ratio``."""
    pairs = []
    for task, its in sorted(by_task(items).items()):
        for a, b in combinations(its, 2):
            hi, lo = (a, b) if a.speedup >= b.speedup else (b, a)
            if hi.speedup > lo.speedup * min_ratio:
                pairs.append((hi, lo))
    return pairs
