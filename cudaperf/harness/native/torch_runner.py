"""Run one fast-path PyTorch candidate in the sandbox: hidden trials, then timing on command.

Copied into the candidate's private directory and run there by the harness's Python (it imports torch only, not
cudaperf). Files in the directory:

    job.json        {"mode": "fast" | "modelnew", "n_trials", "specs": [[{"shape", "dtype"}, ...] per trial],
                     "l2_flush_bytes", "inputs_fd", "outputs_fd", "outputs_bytes",
                     "slots": [[byte offset of output i] per trial], "ext": "ext" | null, "gate": bool,
                     "quick_exit": bool}
    tensor_pack.py  the memory-file format (cudaperf.harness.native.tensor_pack, copied here)
    candidate.so    the built fast-path library (mode fast), or
    candidate.py    a KernelBench-style module defining ModelNew (mode modelnew), built under the reference's
                    init seed from the same init inputs
    ext/            (mode modelnew, when its extensions were built ahead: cudaperf.harness.modelnew_build) the
                    built tree, copied to TORCH_EXTENSIONS_DIR before the module runs

Tensors travel in two inherited descriptors, memory files rather than files on disk (KernelBench's largest
problems hold 6.4 GB a tensor):

    inputs_fd       {"trials": [[forward inputs of trial k] ...], "params": [parameters and buffers],
                     "init": get_init_inputs()}: a sealed pack, mapped copy-on-write (CPU tensors, no copy)
    outputs_fd      the outputs' memory file, sized and allocated by the harness: an output with the expected
                    dtype and shape is copied from the GPU into its slot; of any other output only its dtype and
                    shape (or its type) is reported, which is already a wrong answer

Protocol (as the C driver's): with ``"gate": true`` in job.json (a runner started ahead, beside another
candidate's run) it waits after its probe line for ``load`` on stdin before any candidate code. Once set up
(torch imported, the CUDA context made, the library loaded or the module built) it reports ``ready`` on the descriptor given as ``argv[1]`` and waits for ``go`` on stdin, so that
a harness running several candidates of one task on one GPU lets only one of them use the GPU at a time. After
the trials it has stored each trial's outputs in their slots and writes ``trials.json`` (per trial: an error,
inputs it modified, what each output is and whether it was stored), reports ``tests_done``, and reads commands
on stdin. ``time MIN MAX BUDGET_MS CV WARMUP SECRET`` times calls rotating over the
trials' inputs with CUDA events: fresh copies of the inputs, perturbed by the call's seed of SECRET (the window's
K-th call, warm-up calls first, gets ``call_seed(SECRET, K)``: inputs that never repeat, so outputs cached by
input values are stale), the fast path's poisoned output tensors and an L2
flush (a memset of ``l2_flush_bytes``) before each call, outside the timed region (the eager reference pays for
no poison either); the end mark follows a device-wide synchronize, so work left on
other streams counts. It writes ``timing.json`` and reports ``timing_done``. Anything else stores the last timed
outputs of each trial in the same slots (the trials' were judged before timing began), writes ``timed.json``
(what each of them is) and ``evidence.json`` (the GPU kernels that one
profiled call ran, and their GPU time), reports ``stopped`` (its GPU work is over) and waits for the harness (a
line or the end of stdin) before it ends (with ``"quick_exit"``, by ``os._exit``: no exit handler of the
candidate's runs at all). The harness reads each record while the runner waits (the outputs and
``trials.json`` at ``tests_done``, ``timing.json`` at ``timing_done``, the others at ``stopped``), so what the
candidate's exit handlers or static destructors write afterwards is never read. Before any candidate code it tries
the profiler on a trusted op and reports ``probe 1`` (works) or ``probe 0 WHY`` between ``gpu_ok`` and ``ready``.
"""

import ctypes
import json
import mmap
import os
import statistics
import sys
import time
import traceback

import torch

import tensor_pack

EXIT_NO_GPU = 5
INIT_SEED = 1234  # as the reference's Model is built (cudaperf.harness.pytorch_reference.INIT_SEED)
MAX_DIMS = 8
DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool", "int8", "uint8")


class TensorArg(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("numel", ctypes.c_int64), ("shape", ctypes.c_int64 * MAX_DIMS),
                ("strides", ctypes.c_int64 * MAX_DIMS)]


def arg(t):
    a = TensorArg()
    a.data = t.data_ptr()
    a.dtype = DTYPES.index(str(t.dtype).replace("torch.", ""))
    a.ndim = t.dim()
    a.numel = t.numel()
    for i, (n, s) in enumerate(zip(t.shape, t.stride())):
        a.shape[i] = n
        a.strides[i] = s
    return a


def poisoned(spec, device):
    dtype = getattr(torch, spec["dtype"])
    if dtype.is_floating_point:
        return torch.full(spec["shape"], float("nan"), dtype=dtype, device=device)
    return torch.full(spec["shape"], 0x5A if dtype != torch.bool else 1, dtype=dtype, device=device)


def poison_pool(nbytes, device):
    """Fill and free a block, so that memory the caching allocator hands out next holds no stale results."""
    if nbytes > 0:
        block = torch.empty(nbytes, dtype=torch.uint8, device=device)
        block.fill_(0xFF)
        del block


def precision_flags() -> dict:
    """The precision settings as torch reports them, legacy and new API alike (a read that raises, as the legacy
    getters do once the new API switched TF32 on, is recorded as such): read once after the runner pins them,
    before any candidate code, and again after the candidate's last call; the harness compares the two."""
    out = {}
    for key, read in (("matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                      ("cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
                      ("float32_matmul_precision", torch.get_float32_matmul_precision),
                      ("matmul.fp32_precision", lambda: torch.backends.cuda.matmul.fp32_precision),
                      ("cudnn.fp32_precision", lambda: torch.backends.cudnn.fp32_precision),
                      ("fp32_precision", lambda: torch.backends.fp32_precision),
                      ("cudnn.conv.fp32_precision", lambda: torch.backends.cudnn.conv.fp32_precision),
                      ("cudnn.rnn.fp32_precision", lambda: torch.backends.cudnn.rnn.fp32_precision),
                      ("matmul.allow_fp16_reduced_precision_reduction",
                       lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
                      ("matmul.allow_bf16_reduced_precision_reduction",
                       lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)):
        try:
            value = read()
            out[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
        except AttributeError:  # an API this torch lacks: nothing to compare
            continue
        except Exception as exc:
            out[key] = f"raised {type(exc).__name__}"
    return out


def main():
    ctl = int(sys.argv[1])
    if not torch.cuda.is_available():
        print("cudaperf torch runner: no CUDA device is usable here", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)
    os.write(ctl, b"gpu_ok\n")  # before any candidate code: an EXIT_NO_GPU after this is the candidate's own
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    pinned_flags = precision_flags()
    job = json.load(open("job.json"))
    data = tensor_pack.read_pack(job["inputs_fd"])  # copy-on-write views of the harness's pages
    out_map = mmap.mmap(job["outputs_fd"], job["outputs_bytes"], flags=mmap.MAP_SHARED,
                        prot=mmap.PROT_READ | mmap.PROT_WRITE)

    def store(k, outs):
        """Trial k's outputs into their slots (those with the expected dtype and shape); what each one is."""
        descs = []
        for i, o in enumerate(outs):
            d = tensor_pack.describe_output(o)
            spec = job["specs"][k][i] if i < len(job["specs"][k]) else None
            if spec is not None and d.get("dtype") == spec["dtype"] and d.get("shape") == list(spec["shape"]):
                tensor_pack.slot_tensor(out_map, job["slots"][k][i], spec["shape"], spec["dtype"]).copy_(o.detach())
                d["stored"] = True
            descs.append(d)
        return descs
    trials_in, params, init_inputs = data["trials"], data["params"], data["init"]
    device = torch.device("cuda")
    # The profiler, tried on a trusted op before any candidate code (its first session takes seconds to set up:
    # done now, not in the GPU turn). "probe 1": it works, so a failed profiled call later is the candidate's.
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.zeros(1, device=device).add_(1)
            torch.cuda.synchronize()
        seen = any(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events())
        os.write(ctl, b"probe 1\n" if seen else b"probe 0 no kernel seen\n")
    except Exception as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}" if tb is not None else ""
        why = f"{type(exc).__name__}: {exc}{where}".replace("\n", " ")
        os.write(ctl, f"probe 0 {why}".encode()[:240] + b"\n")
    if job.get("gate") and sys.stdin.readline().strip() != "load":
        return  # prestarted: the candidate's code loads only once the harness says so (the previous one is gone)
    if job.get("mode", "fast") == "fast":
        lib = ctypes.CDLL(os.path.abspath("candidate.so"), mode=ctypes.RTLD_LOCAL)
        fn = lib.kernel_forward
        fn.argtypes = [ctypes.POINTER(TensorArg), ctypes.c_int, ctypes.POINTER(TensorArg), ctypes.c_int,
                       ctypes.c_void_p]
        fn.restype = ctypes.c_int
        dev_params = [p.to(device) for p in params]

        def make_outs(k):  # poisoned: a skipped or partial write shows
            return [poisoned(s, device) for s in job["specs"][k]]

        def call(inputs, outs):
            ins = list(inputs) + dev_params
            a = (TensorArg * max(1, len(ins)))(*[arg(t) for t in ins])
            b = (TensorArg * max(1, len(outs)))(*[arg(t) for t in outs])
            return fn(a, len(ins), b, len(outs), torch.cuda.current_stream().cuda_stream), outs
    else:  # KernelBench style: candidate.py defines ModelNew (its extension builds when the module runs)
        root = os.environ.get("TORCH_EXTENSIONS_DIR")
        if job.get("ext") and root and not os.path.exists(root):  # built ahead at this path: ninja finds it up
            import shutil                                          # to date, so load_inline only loads it

            shutil.copytree(job["ext"], root)
        ns = {"__name__": "cudaperf_candidate"}
        exec(compile(open("candidate.py").read(), "candidate.py", "exec"), ns)
        torch.manual_seed(INIT_SEED)
        model = ns["ModelNew"](*init_inputs).to(device).eval()

        def make_outs(k):  # the module allocates its outputs, as the reference does
            return None

        def call(inputs, outs):
            with torch.no_grad():
                out = model(*inputs)
            return 0, list(out) if isinstance(out, (tuple, list)) else [out]

    def invoke(inputs, k):
        return call(inputs, make_outs(k))

    torch.cuda.synchronize()
    os.write(ctl, b"ready\n")
    if sys.stdin.readline().strip() != "go":
        return
    reports = []
    for k, inputs in enumerate(trials_in):
        dev_in = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
        out_bytes = sum(2 * torch.Size(s["shape"]).numel() * 8 for s in job["specs"][k])
        poison_pool(2 * sum(x.numel() * x.element_size() for x in dev_in if isinstance(x, torch.Tensor))
                    + out_bytes + (1 << 20), device)
        rep = {"error": None, "mutated_inputs": []}
        outs = []
        try:
            rc, outs = invoke(dev_in, k)
            torch.cuda.synchronize()
            if rc != 0:
                rep["error"] = f"kernel_forward returned {rc}"
        except Exception as exc:  # a CUDA error raised by torch's synchronize
            rep["error"] = f"{type(exc).__name__}: {exc}"[:500]
        if rep["error"] is None:
            try:  # on the GPU: a 6.4 GB input copied back would need as much host memory
                rep["mutated_inputs"] = [i for i, (d, h) in enumerate(zip(dev_in, inputs))
                                         if isinstance(h, torch.Tensor) and not torch.equal(d, h.to(device))]
                rep["outputs"] = store(k, outs)
            except Exception as exc:  # a CUDA error surfacing in the copies
                rep["error"] = f"{type(exc).__name__}: {exc}"[:500]
        del outs
        reports.append(rep)
        if rep["error"] is not None:
            break
    json.dump(reports, open("trials.json", "w"))
    os.write(ctl, b"tests_done\n")

    flush = torch.empty(int(job["l2_flush_bytes"]), dtype=torch.uint8, device=device)
    last = {}
    samples = []
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] != "time":
            break
        min_reps, max_reps, budget_ms, cv_target, warmup = (int(parts[1]), int(parts[2]), float(parts[3]),
                                                             float(parts[4]), int(parts[5]))
        secret = int(parts[6]) if len(parts) > 6 else 0
        n = len(trials_in)
        min_reps = max(min_reps, n)

        def one(k, idx):
            dev_in = [x.to(device) if isinstance(x, torch.Tensor) else x for x in trials_in[k]]  # fresh, untimed
            tensor_pack.perturb(dev_in, tensor_pack.call_seed(secret, idx))  # never seen before, untimed
            pre = make_outs(k)                                   # poisoned outputs, untimed (harness work)
            flush.zero_()                                        # L2 flush, untimed
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            rc, outs = call(dev_in, pre)
            torch.cuda.synchronize()                             # device-wide: every stream's work counts
            end.record()
            end.synchronize()
            if rc != 0:
                raise RuntimeError(f"the candidate returned status {rc} during timing")
            last[k] = outs
            return start.elapsed_time(end)

        for w in range(warmup):
            one(w % n, w)
        window = []
        begin = time.monotonic()  # for the budget only: the samples come from CUDA events
        while len(window) < max_reps:
            window.append(one(len(window) % n, warmup + len(window)))
            if len(window) >= min_reps:
                m = statistics.fmean(window)
                cv = statistics.stdev(window) / m if len(window) > 1 and m > 0 else 1.0
                if cv < cv_target or (time.monotonic() - begin) * 1000 > budget_ms:
                    break
        samples.extend(window)
        json.dump({"samples_ms": samples}, open("timing.json", "w"))
        os.write(ctl, b"timing_done\n")
    if last:
        try:
            timed = [store(k, last[k]) for k in sorted(last)]
        except Exception as exc:  # a CUDA error surfacing in the copies
            timed = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        json.dump(timed, open("timed.json", "w"))
        last.clear()
        kernels = []
        try:
            from torch.profiler import ProfilerActivity, profile

            dev_in = [x.to(device) if isinstance(x, torch.Tensor) else x for x in trials_in[0]]
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                invoke(dev_in, 0)
                torch.cuda.synchronize()
            dev_events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            kernels = sorted({e.name for e in dev_events})
            kernel_us = sum(e.time_range.elapsed_us() for e in dev_events)
            per_kernel = {}
            for e in dev_events:  # each kernel's (and copy's) GPU time: whose kernels carried the call
                per_kernel[e.name] = per_kernel.get(e.name, 0.0) + e.time_range.elapsed_us()
            json.dump({"kernels": kernels, "device_us": kernel_us, "kernel_us": per_kernel,
                       "flags_pinned": pinned_flags, "flags": precision_flags()}, open("evidence.json", "w"))
        except Exception as exc:
            json.dump({"kernels": None, "error": f"{type(exc).__name__}: {exc}"[:500]}, open("evidence.json", "w"))
    os.write(ctl, b"stopped\n")
    sys.stdin.readline()  # the harness reads the records now; they are its before any exit handler runs
    if job.get("quick_exit"):  # no interpreter exit: neither torch's finalization nor the candidate's exit code
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(3)
