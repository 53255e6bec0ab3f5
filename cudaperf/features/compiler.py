"""Tier "compiler": structural features of a CUDA source from nvcc/ptxas and the SASS it produces (no GPU).

Pipeline for one source (all untrusted work runs in the harness sandbox):

1. ``nvcc -arch=ARCH -std=c++17 -cubin -Xptxas -v`` in the sandbox (:func:`cudaperf.harness.compile._nvcc_in_sandbox`).
   ``-cubin`` runs the same front end (cicc, which also checks host code) and the same ptxas as ``-c`` but skips
   the host compilation (cudafe++ and two gcc passes), so registers, shared memory, spills and SASS are identical
   and the compile takes about a third of the time. ptxas reports per kernel (mangled name in
   ``Compiling entry function '_Z...'``)::

       ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
           0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

2. ``cuobjdump -sass`` on the cubin and ``c++filt`` on the kernel names, in a second sandboxed run (the cubin is
   output of untrusted input, so the disassembler reads it in the sandbox too). Opcodes are counted per kernel.
3. Theoretical occupancy (:func:`occupancy`) from registers, static shared memory and the launch's block size.

Results of steps 1-2 are cached as a JSON file under the harness cache directory, keyed by the SHA-256 of (source,
arch, flags, nvcc version, cuobjdump version); occupancy is recomputed on each call (it depends on the block size).
A compile failure never raises: ``compile_ok`` is False and every value is NaN with a reason.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import os
import re
import shutil
import subprocess
import sysconfig
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cudaperf.harness.compile import (
    _nvcc_in_sandbox,
    cache_dir,
    cuda_home,
    nvcc_version,
    sha256,
    trim_log,
)
from cudaperf.harness.sandbox import SandboxLimits, Workdir, copy_in, run_sandboxed, scrubbed_env, share_file

CACHE_VERSION = "compiler-features-v1"
"""Bump when parsing or the record layout changes: old cache entries are then ignored."""
NVCC_FLAGS = ("-std=c++17", "-cubin", "-Xptxas", "-v")
SASS_TIMEOUT_S = 60.0
NAN = float("nan")

# ---------------------------------------------------------------------------------------------------------------
# Occupancy


@dataclass(frozen=True)
class SmLimits:
    """Per-SM resource limits of one compute capability, as the CUDA occupancy calculator uses them.

    Sources: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (threads, blocks,
    warps, registers, shared memory per SM and per block) and ``cuda_occupancy.h`` / the CUDA Occupancy Calculator
    spreadsheet (allocation granularities, the 1 KB per-block reservation of compute capability >= 8.0).
    """

    arch: str
    max_threads_per_sm: int
    """Resident threads per SM (2,048 on 9.0) = max warps per SM x 32."""
    max_blocks_per_sm: int
    """Resident blocks per SM (32 on 9.0)."""
    registers_per_sm: int = 65536
    """32-bit registers per SM (64 K on every compute capability >= 5.0)."""
    registers_per_block: int = 65536
    """Registers one block may use (64 K)."""
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256
    """Registers are allocated per warp, rounded up to a multiple of 256."""
    register_sub_partitions: int = 4
    """Each SM has 4 sub-partitions with a quarter of the register file each; a warp lives in one, so warps per SM
    limited by registers = 4 x floor((registers_per_sm / 4) / registers per warp). This is the calculator's "warp
    allocation granularity" of 4."""
    shared_bytes_per_sm: int = 228 * 1024
    """Shared memory per SM (228 KB on 9.0; the largest carveout, which the driver picks when it is needed)."""
    max_shared_bytes_per_block: int = 227 * 1024
    """Largest shared memory of one block (227 KB on 9.0, with the opt-in attribute; 48 KB static)."""
    shared_reserved_per_block: int = 1024
    """The runtime reserves 1 KB of shared memory per block (compute capability >= 8.0)."""
    shared_allocation_unit: int = 128
    """Shared memory is allocated per block in units of 128 bytes."""
    warp_size: int = 32
    max_threads_per_block: int = 1024

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


SM_LIMITS: dict[str, SmLimits] = {
    "sm_80": SmLimits("sm_80", 2048, 32, shared_bytes_per_sm=164 * 1024, max_shared_bytes_per_block=163 * 1024),
    "sm_86": SmLimits("sm_86", 1536, 16, shared_bytes_per_sm=100 * 1024, max_shared_bytes_per_block=99 * 1024),
    "sm_89": SmLimits("sm_89", 1536, 24, shared_bytes_per_sm=100 * 1024, max_shared_bytes_per_block=99 * 1024),
    "sm_90": SmLimits("sm_90", 2048, 32),
}
"""Compute capabilities 8.0 (A100), 8.6, 8.9 (Ada) and 9.0 (H100/H200), from the Programming Guide's table."""


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM, what limits them, and the resulting fraction of the SM's warp slots."""

    blocks_per_sm: int
    limiter: str
    """``warps``, ``blocks``, ``registers``, ``shared_memory`` or ``invalid``."""
    occupancy: float
    reason: str = ""
    """Set when no block fits (occupancy 0)."""


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy_detail(registers_per_thread: int, shared_bytes_per_block: int, block_size: int,
                     arch: str = "sm_90") -> Occupancy:
    """Theoretical occupancy the way the CUDA occupancy calculator computes it.

    With W = ceil(block_size / 32) warps per block:

    * warps limit: floor(max_warps_per_sm / W);
    * blocks limit: max_blocks_per_sm;
    * registers: r_w = roundup(regs x 32, 256) per warp; 0 blocks if r_w x W > registers_per_block, else
      floor(4 x floor((registers_per_sm / 4) / r_w) / W);
    * shared memory: s = roundup(smem + 1 KB reserved, 128); 0 blocks if smem > max per block, else
      floor(shared_bytes_per_sm / s) (no limit when smem is 0);

    blocks = min of the four; occupancy = blocks x W / max_warps_per_sm. Raises ValueError for an unknown arch.
    """
    lim = SM_LIMITS.get(arch)
    if lim is None:
        raise ValueError(f"no SM limits for {arch!r} (known: {', '.join(SM_LIMITS)})")
    if block_size <= 0 or block_size > lim.max_threads_per_block:
        return Occupancy(0, "invalid", 0.0, f"block size {block_size} is outside 1..{lim.max_threads_per_block}")
    if registers_per_thread > lim.max_registers_per_thread:
        return Occupancy(0, "registers", 0.0, f"{registers_per_thread} registers per thread exceed "
                                              f"{lim.max_registers_per_thread}")
    warps = -(-block_size // lim.warp_size)
    limits = {"warps": lim.max_warps_per_sm // warps, "blocks": lim.max_blocks_per_sm,
              "registers": _register_limited_blocks(registers_per_thread, warps, lim),
              "shared_memory": _shared_limited_blocks(shared_bytes_per_block, lim)}
    limiter = min(limits, key=limits.__getitem__)
    blocks = limits[limiter]
    reason = ""
    if blocks == 0:
        reason = (f"no block of {block_size} threads fits on an SM ({limiter}: {registers_per_thread} registers "
                  f"per thread, {shared_bytes_per_block} bytes shared memory per block)")
    return Occupancy(blocks, limiter, blocks * warps / lim.max_warps_per_sm, reason)


def _register_limited_blocks(registers_per_thread: int, warps_per_block: int, lim: SmLimits) -> int:
    """floor(4 x floor((65536 / 4) / roundup(regs x 32, 256)) / W), or 0 when a block needs over 64 K registers."""
    if registers_per_thread <= 0:
        return lim.max_blocks_per_sm
    per_warp = _round_up(registers_per_thread * lim.warp_size, lim.register_allocation_unit)
    if per_warp * warps_per_block > lim.registers_per_block:
        return 0
    per_partition = lim.registers_per_sm // lim.register_sub_partitions
    return (per_partition // per_warp) * lim.register_sub_partitions // warps_per_block


def _shared_limited_blocks(shared_bytes: int, lim: SmLimits) -> int:
    """floor(228 KB / roundup(smem + 1 KB, 128)); 0 above the per-block maximum; no limit without shared memory."""
    if shared_bytes <= 0:
        return lim.max_blocks_per_sm
    if shared_bytes > lim.max_shared_bytes_per_block:
        return 0
    per_block = _round_up(shared_bytes + lim.shared_reserved_per_block, lim.shared_allocation_unit)
    return lim.shared_bytes_per_sm // per_block


def occupancy(registers_per_thread: int, shared_bytes_per_block: int, block_size: int, arch: str = "sm_90") -> float:
    """Theoretical occupancy in [0, 1]: resident warps per SM / maximum warps per SM (see :func:`occupancy_detail`)."""
    return occupancy_detail(registers_per_thread, shared_bytes_per_block, block_size, arch).occupancy


# ---------------------------------------------------------------------------------------------------------------
# ptxas -v


@dataclass
class _PtxasKernel:
    registers_per_thread: float = NAN
    shared_bytes_per_block: float = 0.0
    barriers: float = 0.0
    stack_bytes: float = NAN
    spill_store_bytes: float = NAN
    spill_load_bytes: float = NAN


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas(log: str) -> dict[str, _PtxasKernel]:
    """Per entry function (mangled name): registers, static shared memory, barriers, stack and spills.

    ``Function properties for X`` blocks of non-entry device functions (noinline calls) are skipped: only kernels
    (``Compiling entry function``) are reported.
    """
    kernels: dict[str, _PtxasKernel] = {}
    entry: str | None = None  # the kernel whose "Used ..." line comes next
    props: str | None = None  # the function whose stack/spill line comes next
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            kernels.setdefault(entry, _PtxasKernel())
        elif m := _PROPS.search(line):
            props = m.group(1)
        elif (m := _STACK.search(line)) and props in kernels:
            k = kernels[props]
            k.stack_bytes, k.spill_store_bytes, k.spill_load_bytes = (float(g) for g in m.groups())
        elif (m := _USED.search(line)) and entry in kernels:
            k = kernels[entry]
            k.registers_per_thread = float(m.group(1))
            if s := _SMEM.search(line):
                k.shared_bytes_per_block = float(s.group(1))
            if b := _BARRIERS.search(line):
                k.barriers = float(b.group(1))
    return kernels


# ---------------------------------------------------------------------------------------------------------------
# SASS instruction mix

SASS_CLASSES: dict[str, frozenset[str]] = {
    "sass_global_loads": frozenset({"LDG", "LDGSTS"}),  # LDGSTS: cp.async global -> shared
    "sass_global_stores": frozenset({"STG"}),
    "sass_shared_loads": frozenset({"LDS", "LDSM"}),
    "sass_shared_stores": frozenset({"STS"}),
    "sass_local_loads": frozenset({"LDL"}),
    "sass_local_stores": frozenset({"STL"}),
    "sass_generic_loads": frozenset({"LD"}),  # address space unknown to the compiler (usually global)
    "sass_generic_stores": frozenset({"ST"}),
    "sass_atomics": frozenset({"ATOM", "ATOMG", "ATOMS", "RED", "REDG"}),
    "sass_barriers": frozenset({"BAR"}),
    "sass_fp_ops": frozenset({
        "FADD", "FADD32I", "FMUL", "FMUL32I", "FFMA", "FFMA32I", "FMNMX", "FRND", "FSWZADD", "MUFU",
        "DADD", "DMUL", "DFMA", "DMNMX",
        "HADD2", "HADD2_32I", "HMUL2", "HMUL2_32I", "HFMA2", "HFMA2_32I", "HMNMX2",
        "HMMA", "DMMA", "HGMMA",
    }),
    "sass_branches": frozenset({"BRA", "BRX", "JMP", "JMX"}),
}
"""SASS opcode (the mnemonic before the first ``.``) -> feature. Every count is of static instructions."""
SASS_FEATURES = ("sass_instructions", *SASS_CLASSES)

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)\s*([^;]*);")
_MOVE_IDIOM = re.compile(r"^\S+,\s*-RZ,\s*RZ,")  # HFMA2.MMA Rd, -RZ, RZ, imm, imm: loads a constant


def _is_counted(addr: str, op: str, mods: str, operands: str) -> bool:
    """False for padding and idioms that are no real work: NOP, the ``BRA`` to itself after ``EXIT``, and
    ``HFMA2.MMA Rd, -RZ, RZ, ...`` (a constant load the compiler writes as a half-precision FMA)."""
    if op == "NOP":
        return False
    target = operands.strip().split()[-1] if operands.strip() else ""
    if op == "BRA" and re.fullmatch(r"0x[0-9a-f]+", target) and int(target, 16) == int(addr, 16):
        return False
    if op == "HFMA2" and mods.startswith(".MMA") and _MOVE_IDIOM.match(operands.strip()):
        return False
    return True


def parse_sass(sass: str) -> dict[str, dict[str, float]]:
    """Per kernel (mangled name, as ``Function : NAME``): counts of :data:`SASS_FEATURES`."""
    opcode_class = {op: name for name, ops in SASS_CLASSES.items() for op in ops}
    kernels: dict[str, dict[str, float]] = {}
    current: dict[str, float] | None = None
    for line in sass.splitlines():
        if m := _FUNCTION.match(line):
            current = kernels.setdefault(m.group(1), dict.fromkeys(SASS_FEATURES, 0.0))
            continue
        m = _INSTR.match(line)
        if current is None or m is None or not _is_counted(*m.groups()):
            continue
        current["sass_instructions"] += 1
        cls = opcode_class.get(m.group(2))
        if cls:
            current[cls] += 1
    return kernels


def static_arithmetic_intensity(fp_ops: float, global_loads: float, global_stores: float) -> float:
    """fp instructions / (global load + store instructions + 1): a static compute-to-memory ratio."""
    return fp_ops / (global_loads + global_stores + 1.0)


# ---------------------------------------------------------------------------------------------------------------
# Block size from the source


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+([^\n]+)$", re.M)
_CONST = re.compile(r"\b(?:const|constexpr)\s+(?:static\s+)?(?:unsigned\s+)?(?:int|long|size_t|unsigned)\s+"
                    r"(\w+)\s*=\s*([^;]+);")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)\s*(?:void\s+)?(\w+)\s*\(")
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.floordiv}


def _eval_int(expr: str, names: dict[str, str], depth: int = 0) -> int | None:
    """An integer constant expression of literals, + - * /, parentheses and names of #define/const integers."""
    expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr.strip())
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None or (b == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv))):
                return None
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.Name) and node.id in names and depth < 8:
            return _eval_int(names[node.id], names, depth + 1)
        return None

    return ev(tree)


def _split_args(text: str) -> list[str]:
    """Split at top-level commas (not inside parentheses, brackets or braces)."""
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur)
            cur = ""
        else:
            cur += ch
    args.append(cur)
    return [a.strip() for a in args]


@dataclass(frozen=True)
class LaunchInfo:
    """What a simple read of the source says about block sizes."""

    launches: dict[str, list[int | None]] = field(default_factory=dict)
    """Kernel base name -> the block size of each ``<<<...>>>`` launch (None where it is not a constant)."""
    launch_bounds: dict[str, int] = field(default_factory=dict)
    """Kernel base name -> max threads of its ``__launch_bounds__``."""


def read_launches(source: str) -> LaunchInfo:
    """Block sizes of ``name<<<grid, block[, smem[, stream]]>>>`` launches and ``__launch_bounds__`` maxima.

    Launches come from the paper tier's parser (tree-sitter: literals, ``dim3``, ``#define``, ``constexpr`` and
    simple locals), so both tiers agree on block sizes; ``__launch_bounds__`` maxima are read here from integer
    constant expressions of literals and ``#define``/``const int`` names.
    """
    from cudaperf.features.paper import extract_paper_features

    launches: dict[str, list[int | None]] = {}
    for launch in extract_paper_features(source).launches:
        tpb = launch.get("tpb")
        ok = isinstance(tpb, (int, float)) and math.isfinite(tpb) and tpb > 0
        launches.setdefault(str(launch.get("kernel")), []).append(int(tpb) if ok else None)
    code = _COMMENTS.sub(" ", source)
    names = {m.group(1): m.group(2).strip() for m in _DEFINE.finditer(code)}
    names.update({m.group(1): m.group(2) for m in _CONST.finditer(code)})
    bounds = {}
    for m in _LAUNCH_BOUNDS.finditer(code):
        n = _eval_int(_split_args(m.group(1))[0], names)
        if n:
            bounds[m.group(2)] = n
    return LaunchInfo(launches, bounds)


def kernel_base_name(name: str) -> str:
    """``ns::scale<float>(float*, int)`` -> ``scale``; a mangled or extern "C" name is returned as it is."""
    head = name.split("(", 1)[0]
    depth, cut = 0, len(head)
    for i, ch in enumerate(head):  # drop template arguments
        if ch == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif ch == ">":
            depth -= 1
    head = head[:cut] if cut < len(head) else head
    return head.rsplit("::", 1)[-1].strip().split()[-1] if head.strip() else name


def choose_block_size(kernel: str, info: LaunchInfo, given: int | None) -> tuple[int | None, str]:
    """The block size for one kernel and where it came from (or why there is none).

    Order: the ``block_size`` argument; the constant block size of this kernel's launches (the first one if they
    differ); the kernel's ``__launch_bounds__`` max threads; the single constant block size of all launches in the
    source (a kernel launched through a wrapper or pointer the reader does not follow).
    """
    if given is not None:
        return given, "argument"
    base = kernel_base_name(kernel)
    own = [b for b in info.launches.get(base, []) if b is not None]
    if own:
        note = "" if len(set(own)) == 1 else f" (launched with {sorted(set(own))}; the first is used)"
        return own[0], "launch" + note
    if base in info.launch_bounds:
        return info.launch_bounds[base], "__launch_bounds__"
    every = {b for sizes in info.launches.values() for b in sizes if b is not None}
    if len(every) == 1:
        return next(iter(every)), "the source's only launch block size"
    if info.launches.get(base):
        return None, "the kernel's launch block size is not a constant this reader resolves"
    return None, "no launch of this kernel with a constant block size and no __launch_bounds__ (pass block_size)"


# ---------------------------------------------------------------------------------------------------------------
# Tools and the sandboxed pipeline


@lru_cache(maxsize=1)
def sass_tools() -> tuple[Path, Path] | None:
    """(cuobjdump, nvdisasm), or None. Looks on PATH, in the toolkit's bin/ and in the ``nvidia-cuda-cuobjdump``
    and ``nvidia-cuda-nvdisasm`` wheels (``site-packages/nvidia/cu13/bin``)."""
    dirs = [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    try:
        dirs.append(cuda_home() / "bin")
    except Exception:  # noqa: BLE001 - no toolkit: the wheels may still have the tools
        pass
    site = Path(sysconfig.get_paths()["purelib"]) / "nvidia"
    dirs += sorted(site.glob("cu*/bin"), reverse=True)
    found = {}
    for tool in ("cuobjdump", "nvdisasm"):
        found[tool] = next((d / tool for d in dirs if (d / tool).is_file() and os.access(d / tool, os.X_OK)), None)
    if found["cuobjdump"] is None or found["nvdisasm"] is None:
        return None
    return found["cuobjdump"], found["nvdisasm"]


@lru_cache(maxsize=1)
def sass_tools_version() -> str:
    tools = sass_tools()
    if tools is None:
        return "no cuobjdump"
    out = subprocess.run([str(tools[0]), "--version"], capture_output=True, text=True, timeout=30).stdout
    return next((l.strip() for l in out.splitlines() if "release" in l), out.strip()[-80:])


def _read_text(path: Path, limit: int = 64 << 20) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


_SASS_SCRIPT = 'PATH="$PWD/tools:$PATH" tools/cuobjdump -sass kernel.cubin > sass.txt; c++filt < names.txt > demangled.txt'


def _disassemble(workdir: Path, mangled: list[str]) -> tuple[str, list[str], str | None]:
    """SASS of ``kernel.cubin`` and demangled names, in the sandbox. Returns (sass, names, reason or None)."""
    tools = sass_tools()
    demangled = list(mangled)
    (workdir / "names.txt").write_text("".join(n + "\n" for n in mangled))
    share_file(workdir / "names.txt")
    if tools is None:
        script = "c++filt < names.txt > demangled.txt" if shutil.which("c++filt") else "true"
    else:
        (workdir / "tools").mkdir()
        share_file(workdir / "tools")
        for tool in tools:
            copy_in(tool, workdir / "tools", tool.name)  # the sandbox user cannot reach e.g. /root/...
        script = _SASS_SCRIPT if shutil.which("c++filt") else _SASS_SCRIPT.split(";")[0]
    run = run_sandboxed(["/bin/sh", "-c", script], workdir, env=scrubbed_env(workdir),
                        limits=SandboxLimits(wall_s=SASS_TIMEOUT_S, cpu_s=int(SASS_TIMEOUT_S) * 2,
                                             file_size_bytes=256 << 20))
    names = _read_text(workdir / "demangled.txt").splitlines()
    if len(names) == len(mangled):
        demangled = names
    if tools is None:
        return "", demangled, ("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump "
                               "nvidia-cuda-nvdisasm, or the toolkit's)")
    sass = _read_text(workdir / "sass.txt")
    if not run.ok or "Function" not in sass:
        return sass, demangled, f"cuobjdump -sass failed ({run.describe()}): {trim_log(run.stderr, 5, 400)}"
    return sass, demangled, None


def _fast_path_header(source: str) -> str | None:
    """The ``TensorArg`` header that a PyTorch fast-path unit is compiled with (forced in), or None for others."""
    from cudaperf.harness.torch_fast import ENTRY, HEADER

    return HEADER if re.search(rf"\b{ENTRY}\b", source) and "TensorArg" in source else None


def _compile_record(source: str, arch: str) -> dict:
    """Compile and disassemble in the sandbox; the JSON-able record that the cache holds."""
    from cudaperf.harness.torch_fast import HEADER_NAME

    header = _fast_path_header(source)
    with Workdir(prefix="cudaperf-features-") as w:
        (w / "kernel.cu").write_text(source)
        share_file(w / "kernel.cu")
        include: list[str] = []
        if header is not None:
            (w / HEADER_NAME).write_text(header)
            share_file(w / HEADER_NAME)
            include = ["-include", HEADER_NAME]
        ok, log = _nvcc_in_sandbox([f"-arch={arch}", *NVCC_FLAGS, *include, "kernel.cu", "-o", "kernel.cubin"], w)
        if not ok:
            return {"compile_ok": False, "log": trim_log(log), "kernels": {}, "sass_reason": None}
        ptxas = parse_ptxas(log)
        mangled = list(ptxas)
        sass, names, sass_reason = _disassemble(w, mangled)
    counts = parse_sass(sass) if sass_reason is None else {}
    kernels = {}
    for mangled_name, name in zip(mangled, names):
        row = vars(ptxas[mangled_name]) | {"mangled": mangled_name}
        row |= counts.get(mangled_name) or dict.fromkeys(SASS_FEATURES, NAN)
        kernels[name] = row
    return {"compile_ok": True, "log": trim_log(log), "kernels": kernels, "sass_reason": sass_reason}


def _cache_path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.features.json"


def _cached_record(source: str, arch: str) -> dict:
    """The compile record from the cache, or compiled now and stored (atomic write: temp file + rename)."""
    key = sha256(CACHE_VERSION, source, arch, " ".join(NVCC_FLAGS), nvcc_version(), sass_tools_version(),
                 _fast_path_header(source) or "")
    path = _cache_path(key)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # a damaged entry: compile again
    record = _compile_record(source, arch)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{key}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return record


# ---------------------------------------------------------------------------------------------------------------
# Public API

KERNEL_FEATURES = (
    "registers_per_thread", "shared_bytes_per_block", "spill_store_bytes", "spill_load_bytes", "stack_bytes",
    "barriers", "block_size", "blocks_per_sm", "theoretical_occupancy", *SASS_FEATURES,
    "static_arithmetic_intensity",
)
"""Per-kernel feature names (units: registers, bytes, threads, blocks, a fraction, instruction counts)."""
FEATURES = ("kernels", *KERNEL_FEATURES)
"""Aggregated feature names."""

_AGGREGATE_MAX = {"registers_per_thread", "shared_bytes_per_block", "stack_bytes", "barriers", "block_size"}
_AGGREGATE_MEAN = {"theoretical_occupancy", "static_arithmetic_intensity", "blocks_per_sm"}
"""Aggregation over kernels: the mean for these, the max for per-thread/per-block resources (the kernel that
needs the most bounds what fits), the sum for everything else (spill bytes and SASS counts)."""


@dataclass(frozen=True)
class CompilerFeatures:
    """Compiler-tier features of one source. ``values`` and each ``per_kernel`` row use :data:`FEATURES` names;
    a NaN value has a reason in ``reasons`` under the same name."""

    values: dict[str, float]
    reasons: dict[str, str]
    per_kernel: dict[str, dict[str, float]]
    compile_ok: bool
    log: str


def _kernel_values(row: dict, kernel: str, arch: str, launches: LaunchInfo, block_size: int | None,
                   reasons: dict[str, str]) -> dict[str, float]:
    """One kernel's features: ptxas numbers, SASS counts, the block size, occupancy and intensity."""
    v = {k: float(row.get(k, NAN)) for k in KERNEL_FEATURES}
    v["static_arithmetic_intensity"] = static_arithmetic_intensity(
        v["sass_fp_ops"], v["sass_global_loads"], v["sass_global_stores"])
    size, origin = choose_block_size(kernel, launches, block_size)
    v["block_size"] = float(size) if size is not None else NAN
    v["blocks_per_sm"] = v["theoretical_occupancy"] = NAN
    if size is None:
        reasons.setdefault("theoretical_occupancy", f"{kernel}: {origin}")
    elif arch not in SM_LIMITS:
        reasons.setdefault("theoretical_occupancy", f"no SM limits for {arch} (known: {', '.join(SM_LIMITS)})")
    elif not math.isnan(v["registers_per_thread"]):
        occ = occupancy_detail(int(v["registers_per_thread"]), int(v["shared_bytes_per_block"]), size, arch)
        v["blocks_per_sm"], v["theoretical_occupancy"] = float(occ.blocks_per_sm), occ.occupancy
        if occ.reason:
            reasons.setdefault("theoretical_occupancy", f"{kernel}: {occ.reason}")
        elif origin != "launch" and origin != "argument":
            reasons.setdefault("block_size", f"{kernel}: block size from {origin}")
    return v


def _aggregate(per_kernel: dict[str, dict[str, float]]) -> dict[str, float]:
    """Mean / max / sum over kernels (see :data:`_AGGREGATE_MEAN`); NaN where any kernel's value is NaN
    (for the mean: where all are)."""
    out: dict[str, float] = {"kernels": float(len(per_kernel))}
    for name in KERNEL_FEATURES:
        vals = [row[name] for row in per_kernel.values()]
        known = [x for x in vals if not math.isnan(x)]
        if name in _AGGREGATE_MEAN:
            out[name] = sum(known) / len(known) if known else NAN
        elif len(known) < len(vals) or not vals:
            out[name] = NAN
        else:
            out[name] = max(known) if name in _AGGREGATE_MAX else sum(known)
    return out


def _failure(log: str, reason: str) -> CompilerFeatures:
    values = dict.fromkeys(FEATURES, NAN)
    return CompilerFeatures(values, dict.fromkeys(FEATURES, reason), {}, False, log)


def compiler_features(source: str, *, arch: str = "sm_90", block_size: int | None = None) -> CompilerFeatures:
    """Registers, shared memory, spills, stack, occupancy and the SASS instruction mix of every kernel in
    ``source``, aggregated over kernels. Compiles in the sandbox (cached); never raises for a bad source."""
    record = _cached_record(source, arch)
    if not record["compile_ok"]:
        return _failure(record["log"], "the source does not compile with nvcc")
    if not record["kernels"]:
        values = dict.fromkeys(FEATURES, NAN) | {"kernels": 0.0}
        reasons = {k: "no __global__ kernel in the compiled source" for k in KERNEL_FEATURES}
        return CompilerFeatures(values, reasons, {}, True, record["log"])
    launches = read_launches(source)
    reasons: dict[str, str] = {}
    if record["sass_reason"]:
        reasons |= dict.fromkeys((*SASS_FEATURES, "static_arithmetic_intensity"), record["sass_reason"])
    if re.search(r"\bextern\s+__shared__", source):
        reasons.setdefault("shared_bytes_per_block", "static shared memory only: dynamic (extern __shared__) "
                                                     "shared memory is not counted, nor in occupancy")
    per_kernel = {name: _kernel_values(row, name, arch, launches, block_size, reasons)
                  for name, row in record["kernels"].items()}
    values = _aggregate(per_kernel)
    for name, value in values.items():
        if math.isnan(value):
            reasons.setdefault(name, "NaN for at least one kernel")
    return CompilerFeatures(values, reasons, per_kernel, True, record["log"])
