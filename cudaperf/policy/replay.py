"""Policies that answer from records, not from a model: recorded completions (replay) and the dataset's own
measured CUDA variants (oracle).

``ReplayPolicy(path)`` reads a JSONL file, one completion a line: ``{"task_id": str, "completion": str,
"sample": int?, "turn": int?}``. A request is answered by, in order:

1. the row with its ``(task_id, sample, turn)``;
2. a row with its ``(task_id, sample)``: the one with no ``turn`` if there is one, else the first in the file;
3. the task's rows in file order, round-robin by sample (``rows[sample % len(rows)]``).

``extra["replay"]`` says which (``exact``, ``sample``, ``round_robin``) and ``extra["line"]`` the line used. A task
with no rows gives an error Generation (``no recorded completion for ...``). The file is checked whole at load:
a line that is not a JSON object, lacks ``task_id`` or ``completion``, has a ``sample`` or ``turn`` that is not a
non-negative integer, or repeats another row's ``(task_id, sample, turn)`` fails with ``file:line``. A row with
``"purpose": "spec"`` answers only a Text2CUDA spec request (``purpose == "spec"``) of its task and sample (no
``sample``: any sample); a spec request without such a row gets an error Generation.

``OraclePolicy(dataset=None, split=None)`` answers sample ``i`` of a task with its ``i``-th valid variant in
descending measured speedup (:func:`cudaperf.dataset.measure.candidate_summary`), cycling, wrapped as
``<OUTPUT_CUDA>\\n{code}\\n</OUTPUT_CUDA>``; the turn does not change the answer. Ties and unmeasured speedups
(NaN, last) are broken by candidate id, so the order is stable. ``split`` limits it to the tasks of one split:
``train``, ``val`` or ``test`` of the task split, or ``family:train`` / ``family:test`` of the family split; a task
outside it, or with no valid variant, gives an error Generation.

Both answer ``purpose == "summary"`` requests with :func:`cudaperf.policy.common.summary_text` (they are not
recorded completions), and count tokens as whitespace-separated words (of all message contents for the prompt, of
the text for the completion): neither has a tokenizer, and a word count is exact and reproducible. Neither has a
context limit. ``latency_s`` is 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from cudaperf.jsonl import json_objects
from cudaperf.policy.base import Generation, Message, PolicyError, Request, SamplingParams
from cudaperf.policy.common import messages_word_count, summary_text, word_count

TASK_SPLITS = ("train", "val", "test")
FAMILY_SPLITS = ("family:train", "family:test")


def _summary(request: Request) -> Generation:
    text = summary_text(request.messages)
    return Generation(text=text, prompt_tokens=messages_word_count(request.messages),
                      completion_tokens=word_count(text), extra={"summary": "first words of the last user message"})


def _answer(request: Request, text: str, extra: dict[str, Any]) -> Generation:
    return Generation(text=text, prompt_tokens=messages_word_count(request.messages),
                      completion_tokens=word_count(text), finish_reason="stop", extra=extra)


def _fail(request: Request, message: str) -> Generation:
    return Generation(text="", prompt_tokens=messages_word_count(request.messages), completion_tokens=0,
                      finish_reason="error", error=message)


def _index(value: Any, field: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {field!r} must be a non-negative integer, got {value!r}")
    return value


class ReplayPolicy:
    """Recorded completions from a JSONL file (see the module docstring for the lookup)."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            raise PolicyError(f"replay file {self.path} does not exist: give a JSONL file of "
                              '{"task_id", "completion", "sample"?, "turn"?} rows')
        self.name = f"replay:{self.path}"
        self._exact: dict[tuple[str, int, int], tuple[str, int]] = {}
        self._by_sample: dict[tuple[str, int], tuple[str, int]] = {}
        self._by_task: dict[str, list[tuple[str, int]]] = defaultdict(list)
        seen_no_turn: set[tuple[str, int]] = set()
        self._spec: dict[tuple[str, int | None], tuple[str, int]] = {}
        for n, row in json_objects(self.path):
            where = f"{self.path}:{n}"
            task, completion = row.get("task_id"), row.get("completion")
            if not isinstance(task, str) or not task:
                raise ValueError(f"{where}: 'task_id' must be a non-empty string")
            if not isinstance(completion, str):
                raise ValueError(f"{where}: 'completion' must be a string")
            sample = _index(row.get("sample"), "sample", where)
            turn = _index(row.get("turn"), "turn", where)
            purpose = row.get("purpose", "candidate")
            if purpose not in ("candidate", "spec"):
                raise ValueError(f"{where}: 'purpose' must be 'candidate' or 'spec', got {purpose!r}")
            if purpose == "spec":  # a Text2CUDA spec turn's answer: by (task, sample), else the task's sampleless row
                if (task, sample) in self._spec:
                    raise ValueError(f"{where}: repeats the spec row of task {task!r} sample {sample}")
                self._spec[(task, sample)] = (completion, n)
                continue
            if turn is not None and sample is None:
                raise ValueError(f"{where}: a row with a 'turn' needs a 'sample'")
            entry = (completion, n)
            if sample is not None and turn is not None:
                if (task, sample, turn) in self._exact:
                    first = self._exact[(task, sample, turn)][1]
                    raise ValueError(f"{where}: repeats task {task!r} sample {sample} turn {turn} "
                                     f"(first at line {first})")
                self._exact[(task, sample, turn)] = entry
                self._by_sample.setdefault((task, sample), entry)
            elif sample is not None:
                if (task, sample) in seen_no_turn:
                    raise ValueError(f"{where}: repeats task {task!r} sample {sample} (a row without a turn)")
                seen_no_turn.add((task, sample))
                self._by_sample[(task, sample)] = entry  # a row without a turn wins over the first turned one
            self._by_task[task].append(entry)
        self.rows = sum(len(v) for v in self._by_task.values())

    @property
    def context_tokens(self) -> int | None:
        return None

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return messages_word_count(messages)

    def lookup(self, request: Request) -> tuple[str, int, str] | None:
        """(completion, line, how) for a request, None when the task has no rows."""
        hit = self._exact.get((request.task_id, request.sample, request.turn))
        if hit:
            return hit[0], hit[1], "exact"
        hit = self._by_sample.get((request.task_id, request.sample))
        if hit:
            return hit[0], hit[1], "sample"
        rows = self._by_task.get(request.task_id)
        if rows:
            completion, line = rows[request.sample % len(rows)]
            return completion, line, "round_robin"
        return None

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[Generation]:
        out = []
        for r in requests:
            if r.purpose == "summary":
                out.append(_summary(r))
                continue
            if r.purpose == "spec":
                spec = self._spec.get((r.task_id, r.sample)) or self._spec.get((r.task_id, None))
                out.append(_answer(r, spec[0], {"replay": "spec", "line": spec[1]}) if spec else
                           _fail(r, f"no recorded spec for task {r.task_id!r} (sample {r.sample}) in {self.path}"))
                continue
            hit = self.lookup(r)
            if hit is None:
                out.append(_fail(r, f"no recorded completion for task {r.task_id!r} (sample {r.sample}, turn "
                                    f"{r.turn}) in {self.path}"))
            else:
                out.append(_answer(r, hit[0], {"replay": hit[2], "line": hit[1]}))
        return out

    def close(self) -> None:
        pass


class OraclePolicy:
    """The built-in dataset's valid variants of each task, fastest first (see the module docstring)."""

    def __init__(self, dataset: Any = None, split: str | None = None):
        from cudaperf.dataset.measure import candidate_summary
        from cudaperf.dataset.store import Dataset, DatasetError, default_dataset_dir

        if split is not None and split not in TASK_SPLITS + FAMILY_SPLITS:
            raise ValueError(f"unknown split {split!r}: use one of {', '.join(TASK_SPLITS + FAMILY_SPLITS)}")
        if dataset is None or isinstance(dataset, (str, Path)):
            root = Path(dataset).expanduser() if dataset is not None else default_dataset_dir()
            try:
                ds = Dataset.load(root)
            except DatasetError as e:
                raise PolicyError(f"the oracle policy cannot read the dataset at {root}: {e}") from e
        else:
            ds = dataset
        self.dataset = ds
        self.split = split
        self.name = "oracle" + (f":{split}" if split else "")
        if split is None:
            self.tasks = {t["id"] for t in ds.tasks}
        elif split.startswith("family:"):
            self.tasks = {t["id"] for t in ds.tasks if t["split_family"] == split.split(":", 1)[1]}
        else:
            self.tasks = {t["id"] for t in ds.tasks if t["split_task"] == split}
        summary = candidate_summary(ds)
        variants: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
        for c in ds.candidates:
            s = summary.get(c["candidate_id"])
            if s and s["valid"] and c["task_id"] in self.tasks:
                sp = s["speedup"]
                key = -sp if sp is not None and not math.isnan(sp) else math.inf
                variants[c["task_id"]].append((key, c["candidate_id"], c["code"]))
        self._variants = {t: [(cid, code, -k) for k, cid, code in sorted(v)] for t, v in variants.items()}

    @property
    def context_tokens(self) -> int | None:
        return None

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return messages_word_count(messages)

    def variants(self, task_id: str) -> list[str]:
        """The candidate ids the oracle gives for ``task_id``, in sample order."""
        return [cid for cid, _, _ in self._variants.get(task_id, [])]

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[Generation]:
        out = []
        for r in requests:
            if r.purpose == "summary":
                out.append(_summary(r))
                continue
            if r.task_id not in self.tasks:
                where = f"the {self.split} split of the dataset" if self.split else "the dataset"
                out.append(_fail(r, f"no recorded completion for task {r.task_id!r}: it is not in {where}"))
                continue
            vs = self._variants.get(r.task_id)
            if not vs:
                out.append(_fail(r, f"no recorded completion for task {r.task_id!r}: it has no valid measured "
                                    "variant in the dataset"))
                continue
            cid, code, speedup = vs[r.sample % len(vs)]
            text = f"<OUTPUT_CUDA>\n{code.strip(chr(10))}\n</OUTPUT_CUDA>"
            out.append(_answer(r, text, {"candidate_id": cid,
                                         "speedup": None if math.isinf(speedup) else speedup}))
        return out

    def close(self) -> None:
        pass
