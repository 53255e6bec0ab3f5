"""A throughput model of the batch executor: where 1 to 8 GPUs, and many nodes, stop scaling.

The executor (:mod:`cudaperf.harness.executor`; :mod:`cudaperf.harness.executors` for the Ray backend) is a
pipeline of four stages. Per candidate and per task they cost, measured on the H200 machines (docs/BENCHMARKS.md):

* **compile**: ``compile_s`` CPU-seconds per candidate (static checks and nvcc in the sandbox), on a pool of the
  node's cores less those the GPU workers keep (``reserved_cores_per_gpu``);
* **prepare**: ``prepare_s`` CPU-seconds per task (hidden inputs, the reference's outputs), on the same cores, ahead
  of the GPUs (``prepare_ahead`` tasks at most waiting);
* **run**: ``run_s`` GPU-seconds per candidate (the sandboxed process: tests, timing, exit) plus ``baseline_s``
  GPU-worker seconds per task (the sequential baseline, timed just before the task's candidates), one task at a
  time per GPU;
* **store**: ``store_s`` seconds per appended result, one writer (the driver's store, fsynced per line).

:func:`closed_form` gives the steady-state rate, the minimum of the stages' capacities, and which stage binds;
:func:`simulate` is a discrete-event simulation of the scheduler itself (tasks with candidate groups, the CPU pool,
G GPU workers taking whole tasks in order, prepare-ahead, the single store writer), whose rate the closed form
must match once the pipeline's fill and drain are small against the run (``tests/test_scaling.py``). Both are
models: the figures they give are predictions from measured stage costs, not measurements.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class StageCosts:
    compile_s: float
    """CPU-seconds to check and compile one candidate on one core."""
    run_s: float
    """GPU-seconds of one candidate's run (its sandboxed process: tests, timing, exit)."""
    baseline_s: float = 0.0
    """GPU-worker seconds per task before its candidates (the sequential baseline's timing)."""
    prepare_s: float = 0.0
    """CPU-seconds per task to prepare it (hidden inputs, reference outputs), off the GPU."""
    store_s: float = 0.0
    """Seconds to append one result to the store (one writer)."""
    candidates_per_task: int = 8

    def __post_init__(self) -> None:
        if min(self.compile_s, self.run_s, self.baseline_s, self.prepare_s, self.store_s) < 0:
            raise ValueError("stage costs must be >= 0")
        if self.candidates_per_task < 1:
            raise ValueError("candidates_per_task must be >= 1")


@dataclass(frozen=True)
class Cluster:
    nodes: int = 1
    cores_per_node: int = 16
    gpus_per_node: int = 1
    reserved_cores_per_gpu: int = 2
    """Cores a GPU worker keeps for its own processes (the local pool leaves two per GPU to nvcc's pool)."""

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.cores_per_node < 1 or self.gpus_per_node < 0 or self.reserved_cores_per_gpu < 0:
            raise ValueError("nodes, cores_per_node >= 1; gpus_per_node, reserved_cores_per_gpu >= 0")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def cpu_cores(self) -> int:
        """Cores of the compile and prepare pool, over all nodes."""
        per = max(1, self.cores_per_node - self.reserved_cores_per_gpu * self.gpus_per_node)
        return self.nodes * per


@dataclass(frozen=True)
class Prediction:
    rate_per_s: float
    """Candidates per second in steady state."""
    bottleneck: str
    """``cpu`` (compile and prepare), ``gpu`` or ``store``."""
    capacities_per_s: dict
    """Each stage's rate alone, candidates per second."""

    @property
    def rate_per_min(self) -> float:
        return 60 * self.rate_per_s

    def makespan_s(self, n_tasks: int, costs: StageCosts, cluster: Cluster) -> float:
        """Predicted wall time of ``n_tasks`` tasks: the work at the binding rate, plus the pipeline's fill (the
        first task's preparation and compiles) and drain (the last task's GPU time and its last append)."""
        k = costs.candidates_per_task
        fill = costs.prepare_s + math.ceil(k / cluster.cpu_cores) * costs.compile_s
        drain = costs.baseline_s + k * costs.run_s + costs.store_s
        return n_tasks * k / self.rate_per_s + fill + drain if self.rate_per_s > 0 else math.inf


def closed_form(costs: StageCosts, cluster: Cluster) -> Prediction:
    """The steady-state rate: min over the stages of what each can do alone. Per task of k candidates the CPU pool
    does ``k compile_s + prepare_s`` core-seconds, each GPU ``baseline_s + k run_s``, the store ``k store_s``."""
    k = costs.candidates_per_task
    cpu_work = k * costs.compile_s + costs.prepare_s
    gpu_work = k * costs.run_s + costs.baseline_s
    caps = {
        "cpu": cluster.cpu_cores * k / cpu_work if cpu_work > 0 else math.inf,
        "gpu": cluster.gpus * k / gpu_work if gpu_work > 0 else math.inf,
        "store": 1 / costs.store_s if costs.store_s > 0 else math.inf,
    }
    if cluster.gpus == 0:
        caps["gpu"] = 0.0
    name = min(caps, key=lambda n: caps[n])
    return Prediction(rate_per_s=caps[name], bottleneck=name, capacities_per_s=caps)


@dataclass(frozen=True)
class SimResult:
    makespan_s: float
    n_candidates: int
    cpu_busy_frac: float
    gpu_busy_frac: float
    store_busy_frac: float

    @property
    def rate_per_s(self) -> float:
        return self.n_candidates / self.makespan_s if self.makespan_s > 0 else math.inf

    @property
    def rate_per_min(self) -> float:
        return 60 * self.rate_per_s


def simulate(costs: StageCosts, cluster: Cluster, n_tasks: int, *, prepare_ahead: int = 2, jitter: float = 0.0,
             seed: int = 0) -> SimResult:
    """Discrete-event simulation of the scheduler on ``cluster`` for ``n_tasks`` tasks of
    ``costs.candidates_per_task`` candidates.

    * The CPU pool (``cluster.cpu_cores`` servers) takes work in order: a task's preparation first when fewer than
      ``prepare_ahead`` prepared tasks wait for a GPU (prepare-ahead), else the next compile in task order.
    * A task is ready once it is prepared and all its candidates compiled. Each of the ``cluster.gpus`` GPU workers
      takes the next ready task in task order and holds it for ``baseline_s + k run_s``; each candidate's result
      goes to the store as its run ends.
    * The store is one writer, ``store_s`` a result, first come first served.

    ``jitter``: each duration is drawn uniformly from ``[1 - jitter, 1 + jitter]`` times its cost (seeded).
    """
    if n_tasks < 1:
        raise ValueError("n_tasks must be >= 1")
    if cluster.gpus < 1:
        raise ValueError("the simulation needs at least one GPU")
    rng = random.Random(seed)
    k = costs.candidates_per_task

    def dur(x: float) -> float:
        return x * (1 + rng.uniform(-jitter, jitter)) if jitter else x

    events: list[tuple[float, int, str, tuple]] = []
    seq = [0]

    def push(t: float, kind: str, data: tuple = ()) -> None:
        seq[0] += 1
        heapq.heappush(events, (t, seq[0], kind, data))

    free_cores = cluster.cpu_cores
    next_prepare = 0  # next task to prepare
    next_compile = 0  # next candidate to compile, over all tasks (task i, candidate j) = i * k + j
    prepared = [False] * n_tasks
    compiled = [0] * n_tasks
    next_gpu_task = 0  # tasks are started in order
    started = [False] * n_tasks
    free_gpus = cluster.gpus
    store_free_at = 0.0
    busy = {"cpu": 0.0, "gpu": 0.0, "store": 0.0}
    last_append = 0.0
    n_waiting_prepared = 0  # prepared, not started on a GPU

    def dispatch_cpu(now: float) -> None:
        nonlocal free_cores, next_prepare, next_compile
        while free_cores > 0:
            if next_prepare < n_tasks and n_waiting_prepared + _preparing[0] < prepare_ahead:
                d = dur(costs.prepare_s)
                _preparing[0] += 1
                push(now + d, "prepared", (next_prepare,))
                next_prepare += 1
            elif next_compile < n_tasks * k:
                d = dur(costs.compile_s)
                push(now + d, "compiled", (next_compile // k,))
                next_compile += 1
            else:
                return
            busy["cpu"] += d
            free_cores -= 1

    _preparing = [0]

    def dispatch_gpu(now: float) -> None:
        nonlocal free_gpus, next_gpu_task, n_waiting_prepared
        while free_gpus > 0 and next_gpu_task < n_tasks and next_gpu_task in ready_set:
            i = next_gpu_task
            ready_set.discard(i)
            started[i] = True
            next_gpu_task += 1
            n_waiting_prepared -= 1
            free_gpus -= 1
            t = now + dur(costs.baseline_s)
            for _ in range(k):
                t += dur(costs.run_s)
                push(t, "ran", (i,))
            busy["gpu"] += t - now
            push(t, "gpu_free", (i,))

    ready_set: set[int] = set()

    def maybe_ready(i: int) -> None:
        if prepared[i] and compiled[i] == k and not started[i]:
            ready_set.add(i)

    dispatch_cpu(0.0)
    while events:
        now, _, kind, data = heapq.heappop(events)
        if kind == "prepared":
            (i,) = data
            prepared[i] = True
            _preparing[0] -= 1
            n_waiting_prepared += 1
            free_cores += 1
            maybe_ready(i)
        elif kind == "compiled":
            (i,) = data
            compiled[i] += 1
            free_cores += 1
            maybe_ready(i)
        elif kind == "ran":
            start = max(now, store_free_at)
            d = dur(costs.store_s)
            store_free_at = start + d
            busy["store"] += d
            last_append = max(last_append, store_free_at)
        elif kind == "gpu_free":
            free_gpus += 1
        dispatch_gpu(now)
        dispatch_cpu(now)
    makespan = last_append
    return SimResult(makespan_s=makespan, n_candidates=n_tasks * k,
                     cpu_busy_frac=busy["cpu"] / (cluster.cpu_cores * makespan),
                     gpu_busy_frac=busy["gpu"] / (cluster.gpus * makespan),
                     store_busy_frac=busy["store"] / makespan)


# --------------------------------------------------------------------------------------------------- the figures

EVAL_COSTS = StageCosts(compile_s=2.07, run_s=0.64, baseline_s=1.0, prepare_s=1.0, store_s=0.002,
                        candidates_per_task=16)
"""``cudaperf eval``'s defaults (30 timed calls at most), from docs/BENCHMARKS.md session 14 on one H200 with 16
cores: 16 compiles took 33.1 CPU-s with the new sandbox (2.07 s each); a candidate's process 0.62 s on the GPU
(0.27 start and tests, 0.20 timing, 0.15 exit; 10.2 s for 16). ``baseline_s`` and ``prepare_s`` (1 s each) are
assumptions of this model, not measured figures; ``store_s`` is an fsynced append of a 5 kB line on a local
disk (a few ms; this project's 2-core machine measures about 1 ms)."""

MEASURE_COSTS = StageCosts(compile_s=2.07, run_s=1.7, baseline_s=2.0, prepare_s=1.0, store_s=0.002,
                           candidates_per_task=8)
"""``cudaperf dataset measure`` (0.4 s budget, 3 interleaved windows): 1.7 to 1.9 s per candidate per GPU and 10 to
15 % of each GPU's time outside task groups with burst preparation (docs/BENCHMARKS.md sessions 3, 4 and 11); about
8 candidates per task (252 of 32 tasks). ``baseline_s`` (2 s: the baseline's windows) is read off that 10-15 %."""


def curve(costs: StageCosts, cores_per_node: int, gpus: range | list[int] = range(1, 9), nodes: int = 1,
          reserved_cores_per_gpu: int = 2) -> list[tuple[int, Prediction]]:
    """The closed form for each GPU count per node."""
    return [(g, closed_form(costs, Cluster(nodes=nodes, cores_per_node=cores_per_node, gpus_per_node=g,
                                           reserved_cores_per_gpu=reserved_cores_per_gpu)))
            for g in gpus]


def table(costs: StageCosts = EVAL_COSTS, cores: tuple[int, ...] = (16, 128)) -> str:
    """A markdown table of :func:`curve` for 1-8 GPUs on one node with each core count (the docs' table)."""
    rows = ["| GPUs | " + " | ".join(f"{c} cores: /min (bound)" for c in cores) + " |",
            "|---|" + "---|" * len(cores)]
    curves = {c: dict(curve(costs, c)) for c in cores}
    for g in range(1, 9):
        cells = [f"{curves[c][g].rate_per_min:.0f} ({curves[c][g].bottleneck})" for c in cores]
        rows.append(f"| {g} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
