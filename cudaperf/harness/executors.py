"""One executor interface, three backends: where a batch of candidates is checked, compiled and run.

Every caller of the harness (``cudaperf eval`` through :class:`cudaperf.env.evaluator.Evaluator`, ``cudaperf
dataset measure``, ``cudaperf train``'s rewards) hands an :class:`Executor` tasks, jobs and a result store, and gets
back a :class:`~cudaperf.harness.executor.BatchSummary`; the results are appended to the store as they complete
and are the same :class:`~cudaperf.harness.result.EvaluationResult` records whichever backend judged them.

* ``local`` (:class:`LocalExecutor`): :func:`cudaperf.harness.executor.run_batch`, a CPU compile pool and one worker
  per visible GPU of this machine.
* ``compile-only`` (:class:`CompileOnlyExecutor`): extraction, static checks and nvcc only, for machines without a
  GPU. A candidate that compiles gets an ``unscored`` result whose message starts ``compile-only run:`` (it was not
  run); one that does not compile is a scored failure.
* ``ray`` (:class:`RayExecutor`, needs ``pip install 'cudaperf[ray]'``): a Ray cluster. Candidates are checked and
  compiled by CPU worker actors (the compile step of the local pool, or the compile-only step); the executables
  travel to GPU worker actors, one per GPU of the cluster, each of which runs the local pool's own worker code
  (:func:`run_batch` on its one GPU, every build a cache hit) one task at a time. A worker that dies is restarted
  by Ray (``max_restarts``); the call it had is sent again, at most ``max_retries`` times, and after that each of
  its candidates is recorded as an ``unscored`` harness failure: never a silent 0, never the candidate's fault.

:func:`make_executor` turns a spec (``local``, ``compile-only``, ``ray``, ``ray:auto``, ``ray://HOST:PORT``) into
one.
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from cudaperf.harness.executor import BatchSummary, Job, ProgressFn, run_batch
from cudaperf.harness.result import EvaluationResult, Stage
from cudaperf.harness.settings import HarnessSettings
from cudaperf.harness.store import ResultStore
from cudaperf.tasks.schema import Task

COMPILE_ONLY_MESSAGE = "compile-only run: the candidate compiled and was not run (no GPU asked for)"
COMPILE_ONLY_PREFIX = "compile-only run:"

EXECUTOR_SPECS = ("local", "compile-only", "ray", "ray:auto", "ray://HOST:PORT")
EXECUTOR_HELP = ("Where candidates are judged: 'local' (this machine's CPU pool and GPUs; default), 'compile-only' "
                 "(static checks and nvcc, no GPU), 'ray' (a Ray cluster: RAY_ADDRESS's, or a local one), "
                 "'ray:auto' (the cluster this node belongs to) or 'ray://HOST:PORT' (Ray Client). Ray needs "
                 "pip install 'cudaperf[ray]'.")
RAY_MISSING = "the ray executor needs Ray: pip install 'cudaperf[ray]'"


class ExecutorError(ValueError):
    """An executor spec that names no backend, or a backend that cannot start (Ray missing, no cluster)."""


def is_compile_only_verdict(r: EvaluationResult) -> bool:
    """A compile-only run's own "compiled, not run" result (unscored, but final for a compile-only run)."""
    return (r.status == "unscored" and r.failure is not None
            and r.failure.message.startswith(COMPILE_ONLY_PREFIX))


class Executor(ABC):
    """Judges jobs into a result store. ``compile_only``: results of candidates that compiled are "not run"
    verdicts (:data:`COMPILE_ONLY_MESSAGE`), final for this executor."""

    name: str = "executor"
    compile_only: bool = False

    @abstractmethod
    def evaluate(self, tasks: Sequence[Task], jobs: Sequence[Job], store: ResultStore | str | Path, *,
                 settings: HarnessSettings | None = None, progress: ProgressFn | None = None,
                 **options: Any) -> BatchSummary:
        """Evaluate ``jobs`` (skipping those already final in ``store``), appending each result to ``store`` as it
        completes. ``options``: :func:`run_batch`'s (``prepare_ahead``, ``prepare_workers``, ``seed_of``,
        ``max_seconds``, ``overlap_compile``, ``compile_baseline``); a backend ignores those it has no use for."""

    def final(self, r: EvaluationResult) -> bool:
        """A stored result this executor does not judge again."""
        return r.status == "scored" or (self.compile_only and is_compile_only_verdict(r))

    def close(self) -> None:
        """Release what the backend holds (a Ray connection it opened); the local backends hold nothing."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _open_store(store: ResultStore | str | Path) -> ResultStore:
    s = store if isinstance(store, ResultStore) else ResultStore(store)
    s.check_writable()
    return s


def _validate(tasks: Sequence[Task], jobs: Sequence[Job]) -> dict[str, Task]:
    by_id = {t.id: t for t in tasks}
    missing = sorted({j.task_id for j in jobs} - set(by_id))
    if missing:
        raise ValueError(f"jobs name unknown tasks: {missing[:5]}")
    keys = [(j.task_id, j.candidate_id) for j in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("two jobs share a (task_id, candidate_id) key")
    return by_id


# --------------------------------------------------------------------------------------------------- local

class LocalExecutor(Executor):
    """This machine: :func:`cudaperf.harness.executor.run_batch` (CPU compile pool, one worker per GPU)."""

    name = "local"

    def __init__(self, gpus: Sequence[int] | None = None, compile_workers: int | None = None) -> None:
        self.gpus = gpus
        self.compile_workers = compile_workers

    def evaluate(self, tasks, jobs, store, *, settings=None, progress=None, **options) -> BatchSummary:
        return run_batch(tasks, jobs, store, settings=settings, gpus=self.gpus, compile_workers=self.compile_workers,
                         progress=progress, **options)


# --------------------------------------------------------------------------------------------------- compile only

def compile_only_result(task: Task, job: Job, settings: HarnessSettings) -> EvaluationResult:
    """One candidate through extraction, static checks and nvcc (no GPU): its result. A build failure is the
    candidate's (scored); a missing toolchain is the harness's (unscored); a build that succeeded is a "not run"
    verdict (unscored, :data:`COMPILE_ONLY_MESSAGE`). PyTorch tasks: their static checks and extension build."""
    from cudaperf.harness.compile import ToolchainError
    from cudaperf.harness.evaluate import build_candidate, check_candidate
    from cudaperf.harness.records import base_result, compile_failure, unscored

    if getattr(task, "kind", None) == "pytorch":
        return _pytorch_compile_only(task, job, settings)
    checked = check_candidate(task, job.completion, job.candidate_id, settings)
    if checked.result is not None:
        return checked.result
    base = replace(base_result(task, job.candidate_id, checked.code, settings, None), stage=Stage.CHECKED)
    try:
        build = build_candidate(task, checked.code, settings)
    except ToolchainError as exc:
        return unscored(base, f"ToolchainError: {exc}")
    base = replace(base, compile=build.info, static_check_reasons=build.reasons,
                   durations_s={"compile_s": build.info.seconds})
    if build.stage != "ok":
        return replace(base, failure=compile_failure(build, task))
    return unscored(replace(base, stage=Stage.COMPILED), COMPILE_ONLY_MESSAGE)


def _pytorch_compile_only(task, job: Job, settings: HarnessSettings) -> EvaluationResult:
    from cudaperf.harness.records import base_result, unscored
    from cudaperf.harness.extract import extract_code
    from cudaperf.harness.run_pytorch import check_and_build

    code = extract_code(job.completion).code
    res, finished, modelnew, _ = check_and_build(task, code, base_result(task, job.candidate_id, code, settings, None),
                                                 settings)
    if finished:
        return res
    if modelnew:
        return unscored(res, COMPILE_ONLY_MESSAGE.replace("compiled", "passed the static checks"))
    return unscored(res, COMPILE_ONLY_MESSAGE)


def _through_nvcc(r: EvaluationResult) -> bool:
    return r.compile is not None


class CompileOnlyExecutor(Executor):
    """Static checks and nvcc on a CPU thread pool; nothing runs on a GPU."""

    name = "compile-only"
    compile_only = True

    def __init__(self, compile_workers: int | None = None) -> None:
        self.compile_workers = compile_workers

    def evaluate(self, tasks, jobs, store, *, settings=None, progress=None, **options) -> BatchSummary:
        settings = settings or HarnessSettings()
        store = _open_store(store)
        by_id = _validate(tasks, jobs)
        latest = store.latest()
        todo = [j for j in jobs if not ((j.task_id, j.candidate_id) in latest
                                        and self.final(latest[(j.task_id, j.candidate_id)]))]
        results: list[EvaluationResult] = []
        lock = threading.Lock()
        t0 = time.monotonic()

        def one(job: Job) -> None:
            res = compile_only_result(by_id[job.task_id], job, settings)
            store.append(res)
            with lock:
                results.append(res)
                n = len(results)
            if progress:
                progress("compile", n, len(todo))

        if todo:
            workers = self.compile_workers or max(1, os.cpu_count() or 1)
            with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
                list(pool.map(one, todo))
        return BatchSummary(n_jobs=len(jobs), n_skipped=len(jobs) - len(todo),
                            n_compiled=sum(_through_nvcc(r) for r in results), compile_wall_s=time.monotonic() - t0,
                            run_wall_s=0.0, n_run=0, gpus=(), results=tuple(results))


# --------------------------------------------------------------------------------------------------- ray

@dataclass(frozen=True)
class Fault:
    """A fault drill for the Ray backend's workers: the worker handling task ``task_id`` (compile or GPU stage, as
    ``stage`` says) ends its process with ``os._exit(1)`` the first ``times`` times, counted by marker files in
    ``marker_dir`` (shared by the restarted worker). For tests of restarts and retries; never set in a real run."""

    task_id: str
    times: int
    marker_dir: str
    stage: str = "any"
    """``compile``, ``run`` or ``any``."""

    def maybe_die(self, stage: str, task_ids: Sequence[str]) -> None:
        if self.stage not in ("any", stage) or self.task_id not in task_ids:
            return
        d = Path(self.marker_dir)
        d.mkdir(parents=True, exist_ok=True)
        if len(list(d.glob("died-*"))) >= self.times:
            return
        (d / f"died-{len(list(d.glob('died-*')))}-{os.getpid()}").write_text(stage)
        os._exit(1)


@dataclass(frozen=True)
class Artifact:
    """A successful build in the compile cache, carried to the node of a GPU worker: the executable's bytes and
    its metadata, under the cache key (``exe``'s file name)."""

    key: str
    exe: bytes
    meta: str
    info: Any = None
    """The :class:`~cudaperf.harness.result.CompileInfo` of the CPU worker's build (its time, cached or not): the
    result records it, as the local pool's does, not the GPU worker's cache hit."""

    @staticmethod
    def of(exe: Path, info: Any = None) -> "Artifact":
        return Artifact(key=exe.name, exe=exe.read_bytes(), meta=(exe.parent / f"{exe.name}.json").read_text(),
                        info=info)

    def install(self) -> None:
        """Put the build into this node's compile cache (unless it is there), as :mod:`compile` stores one."""
        import uuid

        from cudaperf.harness.compile import cache_dir

        d = cache_dir() / self.key[:2]
        if (d / self.key).exists() and (d / f"{self.key}.json").exists():
            return
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{self.key}.{uuid.uuid4().hex}.tmp"
        tmp.write_bytes(self.exe)
        os.chmod(tmp, 0o755)
        os.replace(tmp, d / self.key)
        tmpm = d / f".{self.key}.{uuid.uuid4().hex}.json.tmp"
        tmpm.write_text(self.meta)
        os.replace(tmpm, d / f"{self.key}.json")


def compile_stage(task: Task, job: Job, settings: HarnessSettings, compile_only: bool
                  ) -> tuple[EvaluationResult | None, Artifact | None]:
    """The compile step of a job on a CPU worker: (its final result, None) when it ends here (no code, static
    checks, a build failure, a missing toolchain; compile-only: every job), else (None, the build to carry to a GPU
    worker). The results are those of :func:`run_batch`'s compile step and of :func:`compile_only_result`."""
    from cudaperf.harness.compile import ToolchainError
    from cudaperf.harness.evaluate import build_candidate, check_candidate
    from cudaperf.harness.records import base_result, compile_failure, unscored

    if compile_only:
        return compile_only_result(task, job, settings), None
    if getattr(task, "kind", None) == "pytorch":  # built where it runs (the extension loads in the runner)
        return None, None
    checked = check_candidate(task, job.completion, job.candidate_id, settings)
    if checked.result is not None:
        return checked.result, None
    base = replace(base_result(task, job.candidate_id, checked.code, settings, None), stage=Stage.CHECKED)
    try:
        build = build_candidate(task, checked.code, settings)
    except ToolchainError as exc:
        return unscored(base, f"ToolchainError: {exc}"), None
    if build.stage != "ok":
        base = replace(base, compile=build.info, static_check_reasons=build.reasons)
        return replace(base, failure=compile_failure(build, task), durations_s={"compile_s": build.info.seconds}), None
    return None, Artifact.of(build.exe, build.info)


class CompileWorker:
    """A Ray actor on one CPU: checks and compiles one job per call (:func:`compile_stage`)."""

    def __init__(self, fault: Fault | None = None) -> None:
        self.fault = fault

    def ping(self) -> int:
        return os.getpid()

    def compile(self, task: Task, job: Job, settings: HarnessSettings, compile_only: bool):
        if self.fault is not None:
            self.fault.maybe_die("compile", [job.task_id])
        return compile_stage(task, job, settings, compile_only)

    def arch(self) -> str:
        from cudaperf.harness.compile import default_arch

        return default_arch()


class GpuWorker:
    """A Ray actor holding one GPU: runs tasks one at a time with the local pool's worker code (:func:`run_batch`
    on its GPU), the builds carried from the CPU workers put in its compile cache first."""

    def __init__(self, fault: Fault | None = None) -> None:
        import ray

        from cudaperf.harness import environment

        self.fault = fault
        ids = ray.get_gpu_ids()
        # Ray names the GPU it gave this actor in CUDA_VISIBLE_DEVICES; the harness pins every candidate process
        # itself, by nvidia-smi index, as the local pool does on a machine of its own.
        self.gpu = int(ids[0]) if ids else 0
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        environment.gpu_inventory.cache_clear()
        import tempfile

        self.tmp = Path(tempfile.mkdtemp(prefix="cudaperf-gpu-worker-"))
        self.calls = 0

    def ping(self) -> int:
        return os.getpid()

    def where(self) -> tuple[str, int, str]:
        import socket

        from cudaperf.harness.compile import default_arch

        return socket.gethostname(), self.gpu, default_arch()

    def run(self, tasks: Sequence[Task], jobs: Sequence[Job], artifacts: Sequence[Artifact],
            settings: HarnessSettings, seeds: dict[str, int] | None, max_seconds: float | None,
            options: dict[str, Any]) -> tuple[list[EvaluationResult], dict[str, Any]]:
        if self.fault is not None:
            self.fault.maybe_die("run", [t.id for t in tasks])
        for a in artifacts:
            a.install()
        self.calls += 1
        store = ResultStore(self.tmp / f"call-{self.calls}.jsonl")
        seed_of = seeds.__getitem__ if seeds is not None else None
        s = run_batch(tasks, jobs, store, settings=settings, gpus=[self.gpu], compile_workers=1, seed_of=seed_of,
                      max_seconds=max_seconds, overlap_compile=False, **options)
        store.path.unlink(missing_ok=True)
        return list(s.results), {"n_compiled": s.n_compiled, "n_run": s.n_run, "run_wall_s": s.run_wall_s,
                                 "n_not_started": s.n_not_started}


def _ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError(RAY_MISSING) from None
    return ray


class RayExecutor(Executor):
    """A Ray cluster: CPU worker actors compile, one GPU worker actor per GPU runs (see the module's docstring).

    ``address``: None (``ray.init()``'s own choice: ``RAY_ADDRESS``, else a new local cluster), ``"auto"`` or
    ``"ray://HOST:PORT"``; an already initialised Ray is used as it is. ``compile_workers``: CPU worker actors
    (default: the cluster's CPUs less one per GPU worker). ``gpus``: GPU workers (default: every GPU of the
    cluster). ``max_retries``: times a call whose worker died is sent again before its candidates are recorded
    unscored. ``max_restarts``: restarts Ray gives each worker. Every node needs this package (and nvcc) installed,
    as the local backend does."""

    name = "ray"

    def __init__(self, address: str | None = None, *, compile_only: bool = False, compile_workers: int | None = None,
                 gpus: int | None = None, max_retries: int = 2, max_restarts: int = 8, fault: Fault | None = None,
                 init_options: dict[str, Any] | None = None) -> None:
        if max_retries < 0:
            raise ExecutorError("max_retries must be >= 0")
        self.address = address
        self.compile_only = compile_only
        self.name = "ray:compile-only" if compile_only else "ray"
        self.compile_workers = compile_workers
        self.n_gpus = gpus
        self.max_retries = max_retries
        self.max_restarts = max_restarts
        self.fault = fault
        self.init_options = dict(init_options or {})
        self._owns_ray = False
        self._compile_actors: list[Any] = []
        self._gpu_actors: list[Any] = []
        self.restarts_seen = 0
        """Calls that failed because their worker died (each was retried or recorded unscored)."""

    # -- the cluster
    def _connect(self):
        ray = _ray()
        if not ray.is_initialized():
            opts = {"include_dashboard": False, "log_to_driver": False, **self.init_options}
            try:
                ray.init(address=self.address, **opts)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ExecutorError(f"ray: cannot reach the cluster at {self.address or 'RAY_ADDRESS / local'}: "
                                    f"{exc}") from exc
            self._owns_ray = True
        return ray

    def _actors(self, ray, n_jobs: int):
        res = ray.cluster_resources()
        n_gpu = int(res.get("GPU", 0)) if not self.compile_only else 0
        if self.n_gpus is not None:
            n_gpu = min(n_gpu, self.n_gpus)
        if not self.compile_only and n_gpu == 0:
            raise ExecutorError("ray: the cluster has no GPU for the GPU workers (use --executor ray with "
                                "--compile-only to check and compile only)")
        n_cpu = max(1, int(res.get("CPU", 1)) - n_gpu)
        # never more actors than the cluster can place: a call sent to one that never starts would wait forever
        n_compile = max(1, min(self.compile_workers or n_cpu, n_cpu, n_jobs))
        gpu_cpus = 1 if int(res.get("CPU", 1)) > n_gpu else 0  # the GPU workers' preparation and processes
        opts = {"max_restarts": self.max_restarts, "max_task_retries": 0}
        cw = ray.remote(CompileWorker)
        while len(self._compile_actors) < n_compile:
            self._compile_actors.append(cw.options(num_cpus=1, **opts).remote(self.fault))
        gw = ray.remote(GpuWorker)
        while len(self._gpu_actors) < n_gpu:
            self._gpu_actors.append(gw.options(num_gpus=1, num_cpus=gpu_cpus, **opts).remote(self.fault))
        return self._compile_actors, self._gpu_actors

    def close(self) -> None:
        if not (self._compile_actors or self._gpu_actors or self._owns_ray):
            return
        ray = _ray()
        if ray.is_initialized():
            for a in self._compile_actors + self._gpu_actors:
                ray.kill(a, no_restart=True)
            if self._owns_ray:
                ray.shutdown()
        self._compile_actors, self._gpu_actors, self._owns_ray = [], [], False

    # -- a batch
    def evaluate(self, tasks, jobs, store, *, settings=None, progress=None, **options) -> BatchSummary:
        settings = settings or HarnessSettings()
        store = _open_store(store)
        by_id = _validate(tasks, jobs)
        latest = store.latest()
        todo = [j for j in jobs if not ((j.task_id, j.candidate_id) in latest
                                        and self.final(latest[(j.task_id, j.candidate_id)]))]
        if not todo:
            return BatchSummary(n_jobs=len(jobs), n_skipped=len(jobs), n_compiled=0, compile_wall_s=0.0,
                                run_wall_s=0.0, n_run=0, gpus=())
        ray = self._connect()
        compile_actors, gpu_actors = self._actors(ray, len(todo))
        if gpu_actors and settings.arch is None:  # compile for the GPUs' architecture, not this node's guess
            settings = replace(settings, arch=ray.get(gpu_actors[0].where.remote())[2])
        return _RayBatch(self, ray, by_id, todo, len(jobs), store, settings, progress, options,
                         compile_actors, gpu_actors).run()


class _RayBatch:
    """One :meth:`RayExecutor.evaluate`: the driver's loop over the workers' calls."""

    def __init__(self, ex: RayExecutor, ray, by_id, todo: list[Job], n_jobs: int, store: ResultStore,
                 settings: HarnessSettings, progress, options: dict[str, Any], compile_actors, gpu_actors) -> None:
        self.ex, self.ray, self.by_id, self.todo, self.n_jobs = ex, ray, by_id, todo, n_jobs
        self.store, self.settings, self.progress = store, settings, progress
        seed_of: Callable[[str], int] | None = options.pop("seed_of", None)
        self.max_seconds: float | None = options.pop("max_seconds", None)
        for k in ("prepare_ahead", "prepare_workers", "overlap_compile"):  # the GPU workers' own choices
            options.pop(k, None)
        self.options = options
        self.seeds = {t: seed_of(t) for t in {j.task_id for j in todo}} if seed_of is not None else None
        self.compile_actors, self.gpu_actors = compile_actors, gpu_actors
        self.results: list[EvaluationResult] = []
        self.t0 = time.monotonic()

    def emit(self, r: EvaluationResult) -> None:
        self.store.append(r)
        self.results.append(r)

    def failed(self, jobs: Sequence[Job], stage: str, attempts: int, exc: BaseException) -> None:
        """A call's worker died ``attempts`` times: each of its candidates is recorded unscored (the harness's)."""
        from cudaperf.harness.records import base_result, code_sha256, unscored
        from cudaperf.harness.extract import extract_code

        why = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        for job in jobs:
            task = self.by_id[job.task_id]
            code = extract_code(job.completion).code
            base = base_result(task, job.candidate_id, None, self.settings, None)
            base = replace(base, code_sha256=code_sha256(code) if code is not None else None,
                           stage=Stage.COMPILED if stage == "run" else Stage.NONE)
            self.emit(unscored(base, f"ray worker lost: the {stage} worker died {attempts} times on this "
                                     f"candidate's call ({type(exc).__name__}{': ' + why if why else ''}); not "
                                     "judged, retried by a later run"))

    def revive(self, actor, lost) -> bool:
        """Wait until a worker whose call failed answers again (Ray restarts it), so that the next call is not sent
        to the dead process and counted against an innocent candidate; False: it does not come back."""
        t_end = time.monotonic() + 120
        while time.monotonic() < t_end:
            try:
                self.ray.get(actor.ping.remote(), timeout=30)
                return True
            except lost:
                time.sleep(0.2)
            except self.ray.exceptions.GetTimeoutError:
                continue
        return False

    def out_of_time(self) -> bool:
        return self.max_seconds is not None and time.monotonic() - self.t0 > self.max_seconds

    def run(self) -> BatchSummary:
        ray = self.ray
        lost = tuple(getattr(ray.exceptions, n) for n in ("RayActorError", "ActorUnavailableError",
                                                           "WorkerCrashedError", "ObjectLostError")
                     if hasattr(ray.exceptions, n))
        order = list(dict.fromkeys(j.task_id for j in self.todo))
        per_task: dict[str, list[Job]] = {t: [] for t in order}
        for j in self.todo:
            per_task[j.task_id].append(j)
        compile_left = {t: len(js) for t, js in per_task.items()}
        built: dict[str, list[tuple[Job, Artifact | None]]] = {t: [] for t in order}
        pending_compile = [(j, 1) for j in self.todo]  # (job, attempt)
        ready_tasks: list[tuple[str, int]] = []  # (task id, attempt), in job order
        inflight: dict[Any, tuple] = {}
        busy_cpu = {i: 0 for i in range(len(self.compile_actors))}
        busy_gpu: set[int] = set()
        dead_cpu: set[int] = set()
        dead_gpu: set[int] = set()
        rr = [0]
        per_cpu = 2  # calls in flight per CPU worker (one compiling, one queued)
        n_compiled = n_run = 0
        compile_done_at = self.t0
        n_compile_done = 0
        t_run0: float | None = None
        run_wall = 0.0
        deadline_hit = False

        def next_cpu() -> int | None:
            n = len(self.compile_actors)
            for k in range(n):
                i = (rr[0] + k) % n
                if i not in dead_cpu and busy_cpu[i] < per_cpu:
                    rr[0] = i + 1
                    return i
            return None

        def submit():
            nonlocal deadline_hit, t_run0
            while pending_compile and not deadline_hit:
                if self.out_of_time():
                    deadline_hit = True
                    break
                i = next_cpu()
                if i is None:
                    break
                job, attempt = pending_compile.pop(0)
                ref = self.compile_actors[i].compile.remote(self.by_id[job.task_id], job, self.settings,
                                                            self.ex.compile_only)
                inflight[ref] = ("compile", i, job, attempt)
                busy_cpu[i] += 1
            free = [g for g in range(len(self.gpu_actors)) if g not in busy_gpu and g not in dead_gpu]
            while ready_tasks and free:
                if self.out_of_time():
                    deadline_hit = True
                    break
                tid, attempt = ready_tasks.pop(0)
                g = free.pop(0)
                items = built[tid]
                left = None if self.max_seconds is None else max(0.0, self.max_seconds -
                                                                 (time.monotonic() - self.t0))
                ref = self.gpu_actors[g].run.remote(
                    [self.by_id[tid]], [j for j, _ in items], [a for _, a in items if a is not None], self.settings,
                    {tid: self.seeds[tid]} if self.seeds is not None else None, left, dict(self.options))
                inflight[ref] = ("run", g, tid, attempt)
                busy_gpu.add(g)
                if t_run0 is None:
                    t_run0 = time.monotonic()

        submit()
        while inflight:
            done, _ = ray.wait(list(inflight), num_returns=1)
            ref = done[0]
            kind, worker, what, attempt = inflight.pop(ref)
            if kind == "compile":
                busy_cpu[worker] -= 1
                job = what
                try:
                    final, artifact = ray.get(ref)
                except lost as exc:
                    self.ex.restarts_seen += 1
                    if not self.revive(self.compile_actors[worker], lost):
                        dead_cpu.add(worker)
                    if attempt <= self.ex.max_retries and len(dead_cpu) < len(self.compile_actors):
                        pending_compile.append((job, attempt + 1))
                    else:
                        self.failed([job], "compile", attempt, exc)
                        compile_left[job.task_id] -= 1
                    final, artifact = None, None
                    job = None
                if job is not None:
                    n_compile_done += 1
                    compile_done_at = time.monotonic()
                    compile_left[job.task_id] -= 1
                    if final is not None:
                        n_compiled += final.compile is not None
                        self.emit(final)
                    else:
                        n_compiled += artifact is not None
                        built[job.task_id].append((job, artifact))
                    if self.progress:
                        self.progress("compile", n_compile_done, len(self.todo))
                tid = what.task_id
                if compile_left[tid] == 0 and built[tid]:
                    ready_tasks.append((tid, 1))
            else:
                busy_gpu.discard(worker)
                tid = what
                try:
                    results, stats = ray.get(ref)
                except lost as exc:
                    self.ex.restarts_seen += 1
                    if not self.revive(self.gpu_actors[worker], lost):
                        dead_gpu.add(worker)
                    if attempt <= self.ex.max_retries and len(dead_gpu) < len(self.gpu_actors):
                        ready_tasks.insert(0, (tid, attempt + 1))
                    else:
                        self.failed([j for j, _ in built[tid]], "run", attempt, exc)
                else:
                    infos = {(j.task_id, j.candidate_id): a.info for j, a in built[tid]
                             if a is not None and a.info is not None}
                    for r in results:
                        info = infos.get((r.task_id, r.candidate_id))
                        if info is not None and r.compile is not None:  # the CPU worker's build, as locally
                            r = replace(r, compile=info, durations_s={**r.durations_s, "compile_s": info.seconds})
                        self.emit(r)
                    n_run += stats["n_run"]
                    run_wall = time.monotonic() - (t_run0 or self.t0)
                    if self.progress:
                        self.progress("run", n_run, sum(len(b) for b in built.values()))
            submit()
            for _ in range(2):  # compile jobs left with no worker, then tasks left with no GPU worker
                if inflight:
                    break
                self.orphans(pending_compile, ready_tasks, compile_left, built, deadline_hit)
                submit()
        return BatchSummary(n_jobs=self.n_jobs, n_skipped=self.n_jobs - len(self.todo), n_compiled=n_compiled,
                            compile_wall_s=compile_done_at - self.t0, run_wall_s=run_wall, n_run=n_run,
                            gpus=tuple(range(len(self.gpu_actors))), results=tuple(self.results),
                            n_not_started=len(self.todo) - len(self.results))

    def orphans(self, pending_compile, ready_tasks, compile_left, built, deadline_hit: bool) -> None:
        """Nothing in flight and work left: its stage has no live worker (or the time is up). Compile jobs with no
        worker are the harness's failures (their tasks' other builds still run); tasks with no GPU worker too; tasks
        left by the time limit stay out of the store, for a rerun."""
        err = RuntimeError("no live worker left")
        if pending_compile and not deadline_hit:
            for job, attempt in pending_compile:
                self.failed([job], "compile", attempt - 1, err)
                compile_left[job.task_id] -= 1
                if compile_left[job.task_id] == 0 and built[job.task_id]:
                    ready_tasks.append((job.task_id, 1))
            pending_compile.clear()
            return
        if ready_tasks and not deadline_hit:
            for tid, attempt in ready_tasks:
                self.failed([j for j, _ in built[tid]], "run", attempt - 1, err)
            ready_tasks.clear()
        if deadline_hit:
            pending_compile.clear()
            ready_tasks.clear()


# --------------------------------------------------------------------------------------------------- specs

def make_executor(spec: str | Executor | None = "local", *, compile_only: bool = False,
                  gpus: Sequence[int] | None = None, compile_workers: int | None = None,
                  **ray_options: Any) -> Executor:
    """The executor a spec names: ``local``, ``compile-only``, ``ray``, ``ray:auto``, ``ray://HOST:PORT``.
    ``compile_only`` (``--compile-only``) turns ``local`` into ``compile-only`` and a Ray executor into its
    compile-only form. ``gpus``: the local GPUs (local) or the number of GPU workers (ray: its length).
    ``ray_options``: :class:`RayExecutor`'s keywords. Raises :class:`ExecutorError` for a bad spec or a missing
    Ray."""
    if isinstance(spec, Executor):
        if compile_only and not spec.compile_only:
            raise ExecutorError(f"executor {spec.name} is not compile-only, but a compile-only run was asked for")
        return spec
    s = (spec or "local").strip()
    if s == "local":
        return CompileOnlyExecutor(compile_workers) if compile_only else LocalExecutor(gpus, compile_workers)
    if s == "compile-only":
        return CompileOnlyExecutor(compile_workers)
    if s == "ray" or s.startswith("ray:"):
        address: str | None
        if s == "ray":
            address = None
        elif s == "ray:auto":
            address = "auto"
        elif s.startswith("ray://"):
            host, sep, port = s[len("ray://"):].rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ExecutorError(f"executor {s!r}: give ray://HOST:PORT (the Ray Client port, 10001 by default)")
            address = s
        else:
            raise ExecutorError(f"executor {s!r}: a Ray executor is 'ray', 'ray:auto' or 'ray://HOST:PORT'")
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ExecutorError(RAY_MISSING)
        return RayExecutor(address, compile_only=compile_only, compile_workers=compile_workers,
                           gpus=len(gpus) if gpus is not None else None, **ray_options)
    raise ExecutorError(f"unknown executor {s!r}: use one of {', '.join(EXECUTOR_SPECS)}")
