"""Seeded input generation for ``c_function`` tasks and the binary format the driver reads.

Inputs are drawn at evaluation time from fresh seeds (see :func:`fresh_seed`); the seed is recorded in the result
so a run can be replayed. The file format is private to the harness: a header ``CPF1`` + case count, then per case
and per argument in call order: scalars as an 8-byte slot, arrays as a uint64 element count followed by the raw
little-endian data (``out`` arrays carry the count only; the driver poisons them).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from cudaperf.tasks.schema import CFunctionTask, Distribution, array_lengths, eval_expr, is_float_type, numpy_dtype

MAGIC_IN = b"CPF1"
MAGIC_OUT = b"CPO1"


def fresh_seed() -> int:
    """A seed nobody could have known before the evaluation started."""
    return int.from_bytes(os.urandom(8), "little") >> 1


@dataclass(frozen=True)
class CaseInputs:
    """One call's inputs: every argument's value (numpy arrays for arrays, Python numbers for scalars)."""

    config_index: int
    config: Mapping[str, int]
    seed: int
    values: Mapping[str, object]


def _draw(rng: np.random.Generator, dist: Distribution, ctype: str, n: int | None, env: Mapping[str, float]):
    dtype = np.dtype(numpy_dtype(ctype))
    shape = () if n is None else (n,)
    kind = dist.kind
    if kind == "const":
        v = eval_expr(dist.value, env)
        return np.full(shape, v, dtype=dtype) if n is not None else dtype.type(v).item()
    if kind == "arange":
        if n is None:
            raise ValueError("arange needs an array")
        return np.arange(n, dtype=dtype)
    if kind == "permutation":
        if n is None:
            raise ValueError("permutation needs an array")
        return rng.permutation(n).astype(dtype)
    low = eval_expr(dist.low, env)
    high = eval_expr(dist.high, env)
    if kind == "offsets":
        if n is None or n < 1:
            raise ValueError("offsets needs an array of length >= 1")
        total = int(high)
        cuts = np.sort(rng.integers(0, total + 1, size=n - 2, dtype=np.int64)) if n > 2 else np.zeros(0, np.int64)
        return np.concatenate([[0], cuts, [total]])[:n].astype(dtype) if n > 1 else np.zeros(1, dtype)
    if kind == "sorted":
        base = Distribution("randint" if not is_float_type(ctype) else "uniform", dist.low, dist.high)
        return np.sort(_draw(rng, base, ctype, n, env)) if n is not None else _draw(rng, base, ctype, None, env)
    if kind == "randint" or not is_float_type(ctype):
        lo, hi = int(low), int(high)
        if hi <= lo:
            hi = lo + 1
        vals = rng.integers(lo, hi, size=shape if n is not None else None, dtype=np.int64)
        return vals.astype(dtype) if n is not None else int(vals)
    vals = rng.uniform(float(low), float(high), size=shape if n is not None else None)
    return vals.astype(dtype) if n is not None else float(dtype.type(vals))


def generate_case(task: CFunctionTask, config_index: int, seed: int) -> CaseInputs:
    """Inputs for one call at size configuration ``config_index``, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    config = task.size_configs[config_index]
    env: dict[str, float] = dict(config)
    values: dict[str, object] = {}
    for a in task.args:  # scalars first: lengths may depend on them
        if a.role == "scalar":
            v = config[a.name] if a.name in config else _draw(rng, a.dist, a.ctype, None, env)
            values[a.name] = v
            env[a.name] = v
    lengths = array_lengths(task, env)
    for a in task.args:
        if a.is_array:
            n = lengths[a.name]
            if a.role == "out":
                values[a.name] = np.zeros(n, dtype=numpy_dtype(a.ctype))  # shape only; never sent
            else:
                values[a.name] = _draw(rng, a.dist, a.ctype, n, env)
    return CaseInputs(config_index=config_index, config=dict(config), seed=seed, values=values)


def _scalar_slot(ctype: str, value) -> bytes:
    raw = np.array([value], dtype=numpy_dtype(ctype)).tobytes()
    return raw.ljust(8, b"\0")


def write_inputs(path, task: CFunctionTask, cases: list[CaseInputs]) -> None:
    with open(path, "wb") as fh:
        fh.write(MAGIC_IN + struct.pack("<I", len(cases)))
        for case in cases:
            for a in task.args:
                v = case.values[a.name]
                if a.role == "scalar":
                    fh.write(_scalar_slot(a.ctype, v))
                else:
                    arr = np.ascontiguousarray(v, dtype=numpy_dtype(a.ctype))
                    fh.write(struct.pack("<Q", arr.size))
                    if a.role != "out":
                        fh.write(arr.tobytes())


@dataclass(frozen=True)
class CaseOutputs:
    """What one call produced: ``status`` 0 when the call returned; outputs by argument name (and ``return``)."""

    status: int
    values: Mapping[str, object]


class OutputFormatError(ValueError):
    """The outputs file is truncated or malformed."""


def open_untrusted(path, limit: int | None = None):
    """Open, for reading, a file that a sandboxed program could have written or replaced: no symbolic link is
    followed and only a regular file is opened, without blocking (a FIFO would hang the reader, a link to a host
    file would read that file into a result). ``limit``: the most bytes the file may hold, else ``OSError``.
    Returns a binary file object."""
    import errno
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{os.path.basename(path)} is not a regular file")
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, f"{os.path.basename(path)} holds {st.st_size} bytes, more than {limit}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_untrusted_text(path, limit: int = 64 << 20) -> str:
    """The first ``limit`` bytes of such a file as text ("" when it does not exist); ``OSError`` when it is not a
    regular file."""
    try:
        with open_untrusted(path) as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def read_outputs(path, task: CFunctionTask, n_cases: int) -> list[CaseOutputs]:
    """Parse the driver's outputs file. Missing trailing cases are simply absent from the list. The file may be the
    candidate's doing: a link or a FIFO in its place is ``OSError`` (:func:`open_untrusted`)."""
    with open_untrusted(path) as fh:
        data = fh.read()
    if data[:4] != MAGIC_OUT:
        raise OutputFormatError("outputs file has no header")
    (count,) = struct.unpack_from("<I", data, 4)
    if count != n_cases:
        raise OutputFormatError(f"outputs file announces {count} cases, expected {n_cases}")
    off = 8
    out: list[CaseOutputs] = []
    for _ in range(n_cases):
        if off + 4 > len(data):
            break
        (status,) = struct.unpack_from("<I", data, off)
        off += 4
        values: dict[str, object] = {}
        try:
            if task.returns != "void":
                dt = np.dtype(numpy_dtype(task.returns))
                values["return"] = np.frombuffer(data[off : off + dt.itemsize], dtype=dt)[0].item()
                off += 8
            for a in task.args:
                if not a.is_output:
                    continue
                (n,) = struct.unpack_from("<Q", data, off)
                off += 8
                dt = np.dtype(numpy_dtype(a.ctype))
                nbytes = n * dt.itemsize
                if off + nbytes > len(data):
                    raise OutputFormatError(f"outputs file truncated inside argument {a.name!r}")
                values[a.name] = np.frombuffer(data[off : off + nbytes], dtype=dt).copy()
                off += nbytes
        except (struct.error, IndexError):
            raise OutputFormatError("outputs file truncated") from None
        out.append(CaseOutputs(status=status, values=values))
    return out
