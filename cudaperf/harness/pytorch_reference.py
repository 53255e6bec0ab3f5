"""The trusted side of a PyTorch task's evaluation: hidden trials from the reference, and output comparison.

:func:`prepare_pytorch` runs the problem's ``Model`` (trusted code) under the pinned precision policy (TF32 off
for matmul and cuDNN) on several trials, each with inputs drawn from a fresh seed, and keeps the expected outputs
in the harness. Where the problem sizes its inputs with a module-level integer ``batch_size`` (KernelBench's
convention), every other trial uses a second size, ``batch_size // 2 + 1``, so that a candidate built for one
shape fails. The model's parameters and buffers, in ``named_parameters()`` then ``named_buffers()`` order, are
what the fast path passes after the forward inputs.

:func:`compare_outputs` is the verdict on one trial: the same number of outputs, each with the reference's dtype
and shape, and values within the task's per-dtype tolerance, ``|got - expected| <= atol + rtol * |expected|``
(integers and booleans exactly). A NaN or infinity passes only where the reference has the same one.
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from cudaperf.tasks.pytorch import PRECISION_POLICY, PyTorchTask, problem_namespace

INIT_SEED = 1234
"""The seed under which ``Model(*get_init_inputs())`` is built (the candidate's module is built under it too)."""


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class PyTorchTrial:
    seed: int
    config: dict[str, int]
    """The sizes that differ between trials (``{"batch_size": n}``), empty when the problem fixes its shapes."""
    inputs: tuple[Any, ...]
    """Forward arguments, tensors on the CPU (the candidate gets copies)."""
    expected: tuple[Any, ...]
    """Reference outputs, on the CPU; they never leave the harness."""

    @property
    def specs(self) -> tuple[TensorSpec, ...]:
        """Shapes and dtypes of the expected outputs: what the harness allocates for a fast-path candidate."""
        return tuple(TensorSpec(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in self.expected)


@dataclass(frozen=True)
class PreparedPyTorch:
    task: PyTorchTask
    init_inputs: tuple[Any, ...]
    parameters: tuple[tuple[str, Any], ...]
    trials: tuple[PyTorchTrial, ...]
    precision: str
    device: str
    sizes_note: str
    _inputs: "_SharedInputs" = field(default_factory=lambda: _SharedInputs(), compare=False, repr=False)
    _model: "_ModelHolder" = field(default_factory=lambda: _ModelHolder(), compare=False, repr=False)

    def inputs_fd(self) -> int:
        """The trials' inputs, parameters and init inputs in one sealed memory file (the pack format of
        :mod:`cudaperf.harness.native.tensor_pack`), written once per preparation: every candidate run of the task
        inherits this descriptor and maps it copy-on-write instead of getting a copy (6.4 GB a tensor for
        KernelBench's largest problems), and no run can change what the next one reads (sealed against writes).
        Closed when the preparation is collected."""
        return self._inputs.get(self)


    def perturbs(self) -> bool:
        """Whether timed calls see perturbed inputs (some forward input is a floating-point tensor)."""
        import torch

        return any(isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() >= 2
                   for t in self.trials for x in t.inputs)

    def expected_perturbed(self, k: int, seed: int) -> tuple[Any, ...]:
        """What a timed call on trial ``k``'s inputs perturbed by ``seed`` must return: the reference run on the
        same perturbation (:func:`cudaperf.harness.native.tensor_pack.perturb`) on ``device``, outputs on the CPU.
        The reference model is built once per preparation and kept."""
        import torch

        from cudaperf.harness.native.tensor_pack import perturb

        trial = self.trials[k]
        if not seed or not self.perturbs():
            return trial.expected
        inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in trial.inputs]
        perturb(inputs, seed)
        model = self._model.get(self)
        pin_precision()
        with torch.no_grad():
            out = _as_tuple(model(*[x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]))
        return tuple(o.detach().cpu() for o in out)


class _ModelHolder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None

    def get(self, prepared: PreparedPyTorch):
        import torch

        with self._lock:
            if self._model is None:
                ns = problem_namespace(prepared.task)
                pin_precision()
                torch.manual_seed(INIT_SEED)
                self._model = ns["Model"](*prepared.init_inputs).to(prepared.device).eval()
            return self._model


class _SharedInputs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None

    def get(self, prepared: PreparedPyTorch) -> int:
        with self._lock:
            if self._fd is None:
                self._fd = self.write(prepared.task.id, [list(t.inputs) for t in prepared.trials],
                                      [p for _, p in prepared.parameters], list(prepared.init_inputs))
            return self._fd

    def write(self, task_id: str, trials: list, params: list, init: list) -> int:
        """The sealed pack of the inputs (closed when this holder is collected)."""
        from cudaperf.harness.native.tensor_pack import memory_file, seal, write_pack

        fd = memory_file(f"cudaperf-inputs-{task_id}"[:200])
        try:
            write_pack(fd, {"trials": trials, "params": params, "init": init})
            seal(fd, writes=True)
        except BaseException:
            os.close(fd)
            raise
        weakref.finalize(self, os.close, fd)
        self._fd = fd
        return fd


def pin_precision() -> None:
    """The precision policy, for reference and candidate alike: no TF32 in matmul or cuDNN."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def prepare_pytorch(task: PyTorchTask, seed: int, *, n_trials: int = 3, device: str = "cpu",
                    step_context: Callable[[], AbstractContextManager] | None = None) -> PreparedPyTorch:
    """Trials for ``task``: trial ``k`` draws its inputs with seed ``seed + k``, alternating two sizes where the
    problem has a module-level ``batch_size``. The reference runs on ``device``; inputs and outputs are kept on
    the CPU. ``step_context``: entered around the model's set-up and around each trial (for example
    ``HOST.background``, so that a preparation overlapping other work never overlaps a timed run by more than
    one step)."""
    import torch

    step = step_context or nullcontext

    if n_trials < 2:
        raise ValueError("n_trials must be >= 2 (outputs of two different inputs are compared)")
    ns = problem_namespace(task)
    pin_precision()
    with step():
        torch.manual_seed(INIT_SEED)
        init_inputs = tuple(ns["get_init_inputs"]())
        model = ns["Model"](*init_inputs).to(device).eval()
        params = tuple((n, p.detach().cpu().clone()) for n, p in model.named_parameters()) + tuple(
            (n, b.detach().cpu().clone()) for n, b in model.named_buffers())
    base = ns.get("batch_size")
    sizes = [base, base // 2 + 1] if isinstance(base, int) and not isinstance(base, bool) and base > 1 else [None]
    trials = []
    for k in range(n_trials):
        size = sizes[k % len(sizes)]
        if size is not None:
            ns["batch_size"] = size  # get_inputs reads the module global when it is called
        with step():
            torch.manual_seed(seed + k)
            inputs = tuple(ns["get_inputs"]())
            with torch.no_grad():
                out = _as_tuple(model(*[x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]))
            trials.append(PyTorchTrial(seed=seed + k, config={"batch_size": size} if size is not None else {},
                                       inputs=tuple(x.cpu() if isinstance(x, torch.Tensor) else x for x in inputs),
                                       expected=tuple(o.detach().cpu() for o in out)))
    if base is not None and len(sizes) == 2:
        note = f"two sizes: batch_size {sizes[0]} and {sizes[1]}"
    else:
        note = "one size: the problem fixes its shapes (no module-level batch_size)"
    # The inputs go into the pack the runs share, and the trials keep views of its pages (copy-on-write) rather
    # than a second copy: KernelBench's largest problems hold 16 GB of inputs over three trials.
    shared = _SharedInputs()
    with step():
        fd = shared.write(task.id, [list(t.inputs) for t in trials], [p for _, p in params], list(init_inputs))
        from cudaperf.harness.native.tensor_pack import read_pack

        views = read_pack(fd)["trials"]
    trials = [replace(t, inputs=tuple(views[k])) for k, t in enumerate(trials)]
    return PreparedPyTorch(task=task, init_inputs=init_inputs, parameters=params, trials=tuple(trials),
                           precision=PRECISION_POLICY, device=device, sizes_note=note, _inputs=shared)


def _tolerance(task: PyTorchTask, dtype) -> tuple[float, float]:
    import torch

    tol = task.tolerance
    if dtype == torch.float16:
        return tol.fp16
    if dtype == torch.bfloat16:
        return tol.bf16
    return tol.fp32


def compare_outputs(task: PyTorchTask, expected: Sequence[Any], got: Sequence[Any],
                    device: str | None = None) -> str | None:
    """None when ``got`` matches ``expected``; else what is wrong, for the candidate's feedback.

    ``device``: where the values are compared, a chunk at a time (both sides copied there; the harness's own GPU
    in a run: KernelBench's largest outputs took 47 s a candidate on the H200's CPU in session 20). The
    comparison is the same float64 arithmetic on either; a GPU that runs out of memory leaves it to the CPU."""
    import torch

    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for k, (e, g) in enumerate(zip(expected, got)):
        if not isinstance(g, torch.Tensor):
            return f"output {k}: a {getattr(g, 'type_name', type(g).__name__)}, expected a tensor"
        if g.dtype != e.dtype:
            return f"output {k}: dtype {str(g.dtype).removeprefix('torch.')}, expected " \
                   f"{str(e.dtype).removeprefix('torch.')}"
        if tuple(g.shape) != tuple(e.shape):
            return f"output {k}: shape {tuple(g.shape)}, expected {tuple(e.shape)}"
        g = g.detach()
        on_gpu = device is not None and str(device).startswith("cuda") and torch.cuda.is_available()
        if on_gpu:
            try:
                bad = _compare_values(task, k, e, g, device)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                on_gpu = device = None  # this output and the rest on the CPU
        if not on_gpu:
            bad = _compare_values(task, k, e, g.cpu())
        if bad is not None:
            return bad
    return None


COMPARE_CHUNK = 1 << 24
"""Elements compared at a time: the comparison's float64 temporaries stay near 1 GiB however large the output
(KernelBench's largest are 1.6 billion elements)."""


def _compare_values(task: PyTorchTask, k: int, e: Any, g: Any, device: str | None = None) -> str | None:
    """Output ``k``'s values (same dtype and shape) within the task's tolerance, compared a chunk at a time
    (on ``device`` when given: each chunk of both sides copied there)."""
    import torch

    ef, gf = e.reshape(-1), g.reshape(-1)
    n = ef.numel()
    floating = torch.is_floating_point(e)
    atol, rtol = _tolerance(task, e.dtype) if floating else (0.0, 0.0)
    first: tuple[int, float, float] | None = None
    n_bad, max_abs, any_finite = 0, 0.0, False
    for lo in range(0, n, COMPARE_CHUNK):
        ec, gc = ef[lo:lo + COMPARE_CHUNK], gf[lo:lo + COMPARE_CHUNK]
        if device is not None:
            ec, gc = ec.to(device), gc.to(device)
        if not floating:
            bad = (gc != ec)
            if bool(bad.any()):
                i = int(bad.nonzero()[0])
                if first is None:
                    first = (lo + i, ec[i].item(), gc[i].item())
                n_bad += int(bad.sum())
            continue
        e64, g64 = ec.double(), gc.double()
        diff = (g64 - e64).abs()
        ok = (diff <= atol + rtol * e64.abs()) & torch.isfinite(g64)
        ok |= ~torch.isfinite(e64) & ((torch.isnan(e64) & torch.isnan(g64)) | (e64 == g64))
        if not bool(ok.all()):
            i = int((~ok).nonzero()[0])
            if first is None:
                first = (lo + i, ec[i].item(), gc[i].item())
            n_bad += int((~ok).sum())
        finite = torch.isfinite(diff)
        if bool(finite.any()):
            any_finite = True
            max_abs = max(max_abs, float(diff[finite].max()))
    if first is None:
        return None
    i, ev, gv = first
    if not floating:
        return f"output {k}[{i}]: {ev!r} expected, got {gv!r} ({n_bad} of {n} elements differ)"
    return (f"output {k}[{i}]: {ev:.6g} expected, got {gv:.6g} ({n_bad} of {n} elements outside atol {atol:g} + "
            f"rtol {rtol:g}; max abs err {max_abs if any_finite else math.inf:.3g})")


def time_reference(prepared: PreparedPyTorch, *, compiled: bool = False, min_reps: int = 5, max_reps: int = 100,
                   budget_ms: float = 2000.0, cv_target: float = 0.02, warmup: int = 3,
                   l2_flush_bytes: int | None = None,
                   warmup_context: Callable[[], AbstractContextManager] | None = None,
                   timing_context: Callable[[], AbstractContextManager] | None = None):
    """The eager (or ``torch.compile``) baseline on the GPU, timed as candidates are: calls rotating over the
    trials' inputs, fresh copies and an L2 flush before each call (untimed), CUDA events with a device-wide
    synchronize before the end mark. Returns :class:`~cudaperf.harness.result.TimingStats` in ms.

    ``warmup_context`` / ``timing_context``: entered around the warm-up calls (which include ``torch.compile``'s
    compilation) and around the timed calls, e.g. ``HOST.background`` and ``HOST.timing`` in a batch."""
    import time

    import torch

    from cudaperf.harness.result import TimingStats

    if not torch.cuda.is_available():
        raise RuntimeError("the PyTorch baselines are timed on a CUDA device; none is visible")
    pin_precision()
    ns = problem_namespace(prepared.task)
    torch.manual_seed(INIT_SEED)
    model = ns["Model"](*prepared.init_inputs).cuda().eval()
    fn = torch.compile(model) if compiled else model
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(l2_flush_bytes or 2 * int(getattr(props, "L2_cache_size", 60 << 20)), dtype=torch.uint8,
                        device="cuda")
    n = len(prepared.trials)

    def one(k: int) -> float:
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prepared.trials[k].inputs]
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            start.record()
            fn(*inputs)
            torch.cuda.synchronize()
            end.record()
        end.synchronize()
        return start.elapsed_time(end)

    with (warmup_context or nullcontext)():
        for w in range(max(1, warmup)):
            one(w % n)
    samples: list[float] = []
    with (timing_context or nullcontext)():
        begin = time.monotonic()
        while len(samples) < max_reps:
            samples.append(one(len(samples) % n))
            if len(samples) >= max(min_reps, n):
                st = TimingStats.from_samples_ms(samples)
                if st.cv < cv_target or (time.monotonic() - begin) * 1000 > budget_ms:
                    break
    return TimingStats.from_samples_ms(samples)
