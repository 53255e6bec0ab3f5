"""The paper's prompt (PAPER-SPEC §6, appendix A.17), its few-shot examples and its public inputs.

Blocks, in the paper's order::

    [FEWSHOT] k x ([EXAMPLE] [SEQ_CODE]..[/SEQ_CODE] [CUDA]..[/CUDA] [INPUTS]..[/INPUTS] [SPEEDUP]..[/SPEEDUP]
    [/EXAMPLE]) [/FEWSHOT]
    [FEEDBACK_HISTORY] summary of earlier turns [/FEEDBACK_HISTORY]
    [FEEDBACK] latest feedback [/FEEDBACK]
    Instruction ...
    [SEQ_CODE] target program [/SEQ_CODE] [INPUTS] public example inputs [/INPUTS]

One user message holds them all (the paper gives no system prompt; a task kind's contract — what the CUDA unit
must define — is part of the instruction). Variants per task kind:

* ``c_function``: the C function; the answer defines it with C linkage over host pointers.
* ``c_program``: the whole program; the answer is a whole CUDA program reading stdin and writing stdout.
* ``cuda_kernel`` (BabelTower): the C function and the host wrapper that will launch the answer's kernel; the
  answer defines only the ``__global__`` kernel.
* text (:class:`cudaperf.tasks.text.TextTask`, Text2CUDA): ``[DESCRIPTION]`` and ``[INTERFACE]`` (and the spec
  turn's ``[SPEC]``) in place of ``[SEQ_CODE]``; the C reference is never shown.
* ``pytorch``: the module's source; the answer is the fast-path unit (``kernel_forward``, the default) or, with
  ``PromptSettings.pytorch_style = "modelnew"``, KernelBench's ``ModelNew`` module.

Few-shot examples (PAPER-SPEC §5): D_k = 50 items sampled from the built-in dataset's **training** tasks (those in
the training part of both the task split and the family split, so no example comes from a held-out task or a
held-out family, whichever split a run evaluates), the 20 fastest kept (by their best valid variant's measured
speedup), 5 drawn at random; all seeded by (seed, target task id). Examples of the target's kind family (C for
C kinds, PyTorch for PyTorch) are preferred. The examples are dropped one at a time, last first, until the prompt
plus the completion budget fits the policy's context (counted with its tokenizer).

``[INPUTS]`` shows public example inputs only: for a ``c_function`` task one case at its smallest size
configuration drawn with :func:`public_seed` (a fixed seed derived from the task id, never used by the hidden
tests, which draw fresh 63-bit seeds from ``os.urandom`` per evaluation); for a BabelTower task no test values
at all (its tests are fixed, so any shown would be a hidden one), only the call shape; for ``c_program`` and
PyTorch tasks, where the inputs come from the trusted source shown, a description.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from cudaperf.policy.base import Message
from cudaperf.tasks.schema import CFunctionTask, CProgramTask, CudaKernelTask, Task

PYTORCH_STYLES = ("fast", "modelnew")


@dataclass(frozen=True)
class PromptSettings:
    fewshot_k: int = 5
    """Examples in the prompt (the paper's k = 5)."""
    fewshot_sample: int = 50
    """D_k: dataset items sampled for the pool (the paper's 50)."""
    fewshot_keep: int = 20
    """N: the fastest of those kept (the paper's 20)."""
    max_input_values: int = 8
    """Values of each public input array shown in [INPUTS]."""
    max_example_chars: int = 6000
    """An example whose code is longer than this is not used (a prompt of a few long examples crowds out the
    task)."""
    pytorch_style: str = "fast"
    """``fast``: the fast-path unit (``kernel_forward``); ``modelnew``: KernelBench's ``ModelNew`` module."""

    def __post_init__(self) -> None:
        if self.pytorch_style not in PYTORCH_STYLES:
            raise ValueError(f"pytorch_style must be one of {PYTORCH_STYLES}, not {self.pytorch_style!r}")
        if not 0 <= self.fewshot_k <= self.fewshot_keep <= self.fewshot_sample:
            raise ValueError("need 0 <= fewshot_k <= fewshot_keep <= fewshot_sample")


@dataclass(frozen=True)
class FewShotExample:
    task_id: str
    seq_code: str
    cuda: str
    inputs: str
    speedup: float


def public_seed(task_id: str) -> int:
    """The seed of a task's public example inputs: fixed, derived from the id (hidden tests draw fresh seeds)."""
    return int.from_bytes(hashlib.sha256(f"public-inputs:{task_id}".encode()).digest()[:8], "little") >> 1


# --------------------------------------------------------------------------------------------------- the target

def seq_code(task: Task) -> str:
    """The sequential program the prompt shows (for a text task, its description: its reference is never shown)."""
    if getattr(task, "framing", None) == "text":
        return task.description.strip() + "\n"
    if isinstance(task, CudaKernelTask):
        return task.reference_c.strip() + "\n"
    if getattr(task, "kind", None) == "pytorch":
        return task.source.strip() + "\n"
    return task.reference_c.strip() + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v)


def public_inputs(task: Task, settings: PromptSettings = PromptSettings()) -> str:
    """The [INPUTS] block's text for ``task`` (see the module docstring for what is shown per kind)."""
    if isinstance(task, CFunctionTask):
        from cudaperf.tasks.inputs import generate_case

        small = min(range(len(task.size_configs)), key=lambda i: sum(task.size_configs[i].values()))
        case = generate_case(task, small, public_seed(task.id))
        sizes = ", ".join(f"{k} = {v}" for k, v in case.config.items())
        lines = [f"one example call (sizes: {sizes}; the hidden tests use other values and sizes, up to "
                 f"{', '.join(f'{k} = {v}' for k, v in task.size_configs[task.timing_config].items())} when timed):"]
        for a in task.args:
            v = case.values[a.name]
            if a.role == "scalar":
                lines.append(f"  {a.name} ({a.ctype}) = {_fmt(v)}")
            elif a.role == "out":
                lines.append(f"  {a.name}: {a.ctype}[{len(v)}], output")
            else:
                arr = np.asarray(v)
                shown = ", ".join(_fmt(x) for x in arr[: settings.max_input_values])
                more = ", ..." if arr.size > settings.max_input_values else ""
                lines.append(f"  {a.name}: {a.ctype}[{arr.size}]{' (in/out)' if a.role == 'inout' else ''} = "
                             f"[{shown}{more}]")
        return "\n".join(lines) + "\n"
    if isinstance(task, CudaKernelTask):
        return (f"the tests call {task.function_name} through the wrapper above with small arrays; their values "
                "are hidden\n")
    if isinstance(task, CProgramTask):
        return ("stdin holds one test input in the format the program reads; the hidden tests use "
                f"{task.n_configs} size configurations\n")
    return "the forward arguments are the tensors get_inputs() returns; the module is built with get_init_inputs()\n"


def instruction(task: Task, settings: PromptSettings = PromptSettings()) -> str:
    """The paper's instruction, with the contract of the task's kind."""
    common = ("Convert the sequential program below into an efficient CUDA C++ program with the same output on the "
              "given hardware (an NVIDIA GPU). Try to optimize memory coalescing, arithmetic intensity and operation "
              "count, occupancy (threads per block), control divergence, synchronization, atomics and data-transfer "
              "overhead. Use the EXAMPLE blocks as references and the FEEDBACK block, when there is one, to improve "
              "your previous answer. ")
    if getattr(task, "framing", None) == "text":
        common = ("Implement the function described in the DESCRIPTION block, with the INTERFACE below, as an "
                  "efficient CUDA C++ program for the given hardware (an NVIDIA GPU); no program is given, only "
                  "the description. " + common[common.index("Try to optimize"):])
    if isinstance(task, CFunctionTask):
        contract = (f"Define `extern \"C\" {task.signature}` with exactly this signature: it is called with host "
                    "pointers and must return with the outputs in host memory, so allocate device memory, copy, "
                    "launch your __global__ kernel(s) and copy back inside it. The work must be done by GPU "
                    "kernels. ")
    elif isinstance(task, CudaKernelTask):
        contract = (f"Write only the kernel `__global__ void {task.kernel_name}(...)`, with the parameters the "
                    "wrapper below passes; the wrapper allocates, copies and launches it:\n[WRAPPER]\n"
                    f"{task.wrapper.strip()}\n[/WRAPPER]\n")
    elif isinstance(task, CProgramTask):
        contract = ("Write a whole CUDA program: it reads the same input from stdin and prints the same output to "
                    "stdout; its main work must be done by GPU kernels. ")
    elif settings.pytorch_style == "modelnew":
        contract = ("Write a Python module defining `class ModelNew(torch.nn.Module)` with the same constructor "
                    "arguments and forward signature as Model, whose forward computes the result with your own "
                    "CUDA kernels (compiled with torch.utils.cpp_extension.load_inline), not with torch "
                    "operators. ")
    else:
        contract = ("Write one CUDA translation unit defining `extern \"C\" int kernel_forward(const TensorArg* "
                    "inputs, int n_inputs, TensorArg* outputs, int n_outputs, cudaStream_t stream)`. TensorArg is "
                    "declared for you: `{void* data; int32_t dtype; int32_t ndim; int64_t numel; int64_t shape[8]; "
                    "int64_t strides[8];}` (device pointers, strides in elements, dtype 0 = float32). inputs are "
                    "forward's arguments followed by the module's parameters and buffers in named_parameters() then "
                    "named_buffers() order; outputs are allocated for you with the reference's shapes and dtypes. "
                    "Launch your kernels on `stream` and return 0. ")
    fmt = ("Output only the code, which nvcc compiles as a single translation unit, inside "
           "<OUTPUT_CUDA></OUTPUT_CUDA>." if not (getattr(task, "kind", None) == "pytorch"
                                                 and settings.pytorch_style == "modelnew")
           else "Output only the Python module, inside <OUTPUT_CUDA></OUTPUT_CUDA>.")
    return common + contract + fmt


# --------------------------------------------------------------------------------------------------- few-shot

def _kind_group(kind: str) -> str:
    return "pytorch" if kind == "pytorch" else "c"


class FewShotPool:
    """The training tasks' fastest measured variants, from the built-in dataset (or another)."""

    def __init__(self, dataset_dir=None, settings: PromptSettings = PromptSettings()) -> None:
        from cudaperf.dataset.build import dataset_tasks
        from cudaperf.dataset.measure import candidate_summary, task_filter
        from cudaperf.dataset.store import Dataset, default_dataset_dir

        self.settings = settings
        ds = Dataset.load(dataset_dir or default_dataset_dir())
        summary = candidate_summary(ds)
        verdict = task_filter(ds, summary)
        train = {t["id"] for t in ds.tasks if t["split_task"] == "train" and t["split_family"] == "train"
                 and verdict.get(t["id"]) == "kept"}
        tasks = dataset_tasks(ds)
        best: dict[str, tuple[float, str]] = {}
        for c in ds.candidates:
            s = summary.get(c["candidate_id"])
            if c["task_id"] not in train or not s or not s["valid"] or not math.isfinite(s["speedup"]):
                continue
            if len(c["code"]) > settings.max_example_chars:
                continue
            if c["task_id"] not in best or s["speedup"] > best[c["task_id"]][0]:
                best[c["task_id"]] = (s["speedup"], c["code"])
        self.items: dict[str, list[tuple[str, float, str]]] = {"c": [], "pytorch": []}
        self._tasks = tasks
        for tid in sorted(best):
            sp, code = best[tid]
            self.items[_kind_group(tasks[tid].kind)].append((tid, sp, code))
        self.train_task_ids = frozenset(train)

    def examples(self, task: Task, seed: int) -> list[FewShotExample]:
        """k examples for ``task``: D_k sampled, the N fastest kept, k drawn; seeded by (seed, task id)."""
        s = self.settings
        pool = [it for it in self.items[_kind_group(task.kind)] if it[0] != task.id]
        if s.fewshot_k == 0 or not pool:
            return []
        rng = random.Random(f"fewshot:{seed}:{task.id}")
        sampled = rng.sample(pool, min(s.fewshot_sample, len(pool)))
        kept = sorted(sampled, key=lambda it: (-it[1], it[0]))[: s.fewshot_keep]
        drawn = rng.sample(kept, min(s.fewshot_k, len(kept)))
        out = []
        for tid, sp, code in drawn:
            t = self._tasks[tid]
            out.append(FewShotExample(task_id=tid, seq_code=seq_code(t), cuda=code.strip() + "\n",
                                      inputs=public_inputs(t, s), speedup=sp))
        return out


# --------------------------------------------------------------------------------------------------- the prompt

def render_prompt(task: Task, examples: Sequence[FewShotExample], feedback_history: str, feedback: str,
                  settings: PromptSettings = PromptSettings(), spec: str | None = None) -> str:
    parts = []
    if examples:
        parts.append("[FEWSHOT]")
        for ex in examples:
            parts.append(f"[EXAMPLE]\n[SEQ_CODE]\n{ex.seq_code}[/SEQ_CODE]\n[CUDA]\n{ex.cuda}[/CUDA]\n"
                         f"[INPUTS]\n{ex.inputs}[/INPUTS]\n[SPEEDUP]{ex.speedup:.2f}x[/SPEEDUP]\n[/EXAMPLE]")
        parts.append("[/FEWSHOT]")
    if feedback_history.strip():
        parts.append(f"[FEEDBACK_HISTORY]\n{feedback_history.strip()}\n[/FEEDBACK_HISTORY]")
    if feedback.strip():
        parts.append(f"[FEEDBACK]\n{feedback.strip()}\n[/FEEDBACK]")
    parts.append(instruction(task, settings))
    if getattr(task, "framing", None) == "text":  # Text2CUDA: the description and interface, never the reference
        from cudaperf.env.text2cuda import text_blocks

        parts.append(text_blocks(task, spec))
        parts.append(f"[INPUTS]\n{public_inputs(task, settings)}[/INPUTS]")
    else:
        parts.append(f"[SEQ_CODE]\n{seq_code(task)}[/SEQ_CODE]\n[INPUTS]\n{public_inputs(task, settings)}[/INPUTS]")
    return "\n".join(parts) + "\n"


def build_messages(task: Task, examples: Sequence[FewShotExample], feedback_history: str = "", feedback: str = "",
                   *, settings: PromptSettings = PromptSettings(),
                   count_tokens: Callable[[Sequence[Message]], int] | None = None,
                   context_tokens: int | None = None, max_new_tokens: int = 0,
                   spec: str | None = None) -> tuple[Message, ...]:
    """The chat for one turn. With ``count_tokens`` and ``context_tokens``, examples are dropped one at a time
    (last first) until prompt + ``max_new_tokens`` fits; the prompt without any example is returned even when it
    does not fit (the policy then truncates or fails, and the run records it). ``spec``: a text task's
    specification from its spec turn (shown in a [SPEC] block; :mod:`cudaperf.env.text2cuda`)."""
    exs = list(examples)
    while True:
        msgs = ({"role": "user", "content": render_prompt(task, exs, feedback_history, feedback, settings, spec)},)
        if count_tokens is None or context_tokens is None or not exs:
            return msgs
        if count_tokens(msgs) + max_new_tokens <= context_tokens:
            return msgs
        exs.pop()

