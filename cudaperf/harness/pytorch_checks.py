"""Static checks of KernelBench-style PyTorch candidates (``class ModelNew`` with inline CUDA), before anything runs.

The candidate is parsed, never run. :func:`check_pytorch_candidate` rejects, each with a line-numbered reason,
candidates that let torch (or a vendor library) do the work the task asks of the candidate's own kernels:

- the form: no ``class ModelNew``, one that subclasses anything but ``nn.Module``, one without a ``forward``;
  no ``__global__`` kernel in the CUDA source, or none launched with ``<<<``. The CUDA source is what the file
  gives ``load_inline``: module-level string constants are resolved, with concatenation, ``str.join``,
  ``.replace``/``.format`` and f-strings (an f-string's literal parts are its text);
- escapes: ``try``/``except`` (a silent fallback), imports of threading, subprocess, ctypes, time, sys ...,
  ``eval``/``exec``, extra CUDA streams and graphs, ``torch.Tensor`` subclasses and ``__torch_function__``,
  monkey-patching (assignments to attributes of imported modules, ``setattr`` on them), a ``forward`` rebound
  (``self.forward = ...``), ``ModelNew`` itself rebound;
- torch compute on the forward side: every method of ``ModelNew`` but ``__init__`` and the methods only
  ``__init__`` reaches (parameter initialisation such as ``reset_parameters`` with ``nn.init.*`` and
  ``math.sqrt`` is not forward compute), and, transitively (a visited set), every module-level function, class
  (an ``nn.Module`` helper, an ``autograd.Function``) and lambda that code refers to. Names are resolved through
  imports (``import torch as th``, ``from torch import matmul as mm``), module-level and local aliases
  (``mm = torch.matmul``, ``aten = torch.ops.aten``), ``getattr(torch, "matmul")`` and containers holding torch
  functions. Rejected there: torch functions other than allocation and bookkeeping (``torch.*``, ``F.*``,
  ``torch.ops.*``, ``nn.*`` layers), tensor compute methods (``x.sum()``, ``x.__matmul__(y)``), the ``@``
  operator, and calls of attributes set to torch modules (``self.lin = nn.Linear(...)``), torch functions or
  lambdas. Calls on the object ``load_inline`` returned (``ext.argmin``) are the candidate's own;
- the C++/CUDA strings: ``torch::``/``at::`` compute (``at::matmul``, ``at::native``; types, allocation,
  ``getCurrentCUDAStream``, guards, ``at::ceil_div``, ``at::opmath_type``, dtype predicates and the device-side
  ``at::native::cuda_utils::BlockReduce*`` inside the candidate's own kernel are fine), ATen tensor methods
  (``a.matmul(b)``), cuBLAS and cuDNN;
- TF32 switched on, in C++ (``allow_tf32``, ``setAllowTF32CuBLAS``) or in Python
  (``torch.set_float32_matmul_precision``, ``torch.backends.cuda.matmul.allow_tf32 = True``). Other
  ``torch.backends`` settings given constants (``torch.backends.cudnn.benchmark = True``) are allowed.

Not checked, because the harness never runs them: a top-level ``if __name__ == "__main__":`` block (unless the
module stores to ``__name__``), and an ``autograd.Function``'s ``backward`` (every call is under ``no_grad``; unless
the code calls it itself).

Arithmetic operators on tensors cannot be told from arithmetic on sizes statically, nor can code that builds
names at run time in ways not followed here; the run-time evidence (the candidate's own kernels did the work,
from the profiled call) is the boundary for those.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# torch functions a candidate's forward may call: allocation, shape and device bookkeeping, no arithmetic.
ALLOWED_TORCH_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "device", "Size", "is_tensor", "no_grad", "inference_mode", "get_default_dtype",
    "is_floating_point", "is_grad_enabled", "set_grad_enabled", "enable_grad",
    # shape and dtype arithmetic, and autocast (it changes torch's own ops only, which are refused anyway)
    "broadcast_shapes", "result_type", "promote_types", "can_cast", "is_complex", "autocast",
}
# torch attributes that are types, dtypes and constants, not computations
TORCH_VALUES = {
    "Tensor", "dtype", "finfo", "iinfo", "float", "float32", "float16", "half", "bfloat16", "float64", "double",
    "int", "int8", "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128", "cfloat",
    "strided", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "memory_format",
    "layout", "Generator", "__version__",
    "version", "nn", "cuda", "backends", "utils",
}
# nn attributes that hold parameters or other modules, not computations
NN_CONTAINERS = {"Module", "Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Identity",
                 "parameter", "modules"}
# tensor methods that do not compute on the data
ALLOWED_TENSOR_METHODS = {
    "size", "dim", "numel", "stride", "view", "reshape", "contiguous", "is_contiguous", "data_ptr", "to", "cuda",
    "cpu", "float", "double", "half", "int", "long", "flatten", "unsqueeze", "squeeze", "permute", "transpose",
    "t", "expand", "expand_as", "view_as", "reshape_as", "element_size", "get_device", "type", "new_empty",
    "new_zeros", "detach", "requires_grad_", "item", "tolist", "numpy", "chunk", "split", "narrow", "select",
    "unbind", "clone",
    "zero_", "fill_",  # fills: constants, not the inputs' work (the run-time boundary counts fills as movement)
}
TENSOR_COMPUTE = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "matmul", "mm", "bmm", "mv", "dot", "addmm",
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "std", "var",
    "norm", "exp", "exp_", "log", "log_", "sqrt", "rsqrt", "pow", "abs", "neg", "sin", "cos", "tanh", "sigmoid",
    "relu", "relu_", "softmax", "log_softmax", "clamp", "clamp_", "clip", "where", "masked_fill", "sort",
    "topk", "gather", "scatter", "scatter_add", "index_select", "conv1d", "conv2d", "linear", "einsum", "fill_",
    "copy_", "zero_", "erf", "gelu", "silu", "floor", "ceil", "round", "sign", "reciprocal", "square", "logsumexp",
    "baddbmm", "outer", "kron", "tril", "triu", "flip", "roll", "repeat", "repeat_interleave", "cat", "stack",
    "__matmul__", "__rmatmul__", "__imatmul__",
    # more of torch.Tensor's computing methods (elementwise, reductions, scans, indexing, linear algebra, fills)
    "clamp_min", "clamp_max", "clamp_min_", "clamp_max_", "clip_", "maximum", "minimum", "fmax", "fmin", "lerp",
    "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_", "true_divide", "floor_divide", "remainder", "fmod",
    "exp2", "expm1", "log2", "log10", "log1p", "sinh", "cosh", "tan", "asin", "acos", "atan", "atan2", "erfc",
    "erfinv", "sigmoid_", "tanh_", "sqrt_", "rsqrt_", "abs_", "neg_", "pow_", "float_power", "nan_to_num",
    "hardtanh", "leaky_relu", "elu", "selu", "celu", "softplus", "mish", "hardswish", "hardsigmoid", "logit",
    "square_", "reciprocal_", "masked_fill_", "masked_scatter", "masked_select", "index_add", "index_add_",
    "index_copy", "index_copy_", "index_fill", "index_fill_", "index_put", "index_put_", "put_", "take",
    "take_along_dim", "scatter_", "scatter_add_", "scatter_reduce", "scatter_reduce_", "cummax", "cummin",
    "logcumsumexp", "median", "nanmedian", "nanmean", "nansum", "mode", "kthvalue", "all", "any",
    "count_nonzero", "unique", "bincount", "histc", "diff", "trace", "diag", "tensordot", "cross", "addmv",
    "addr", "addbmm", "inverse", "det", "svd", "qr", "cholesky", "matrix_power", "uniform_", "normal_",
    "bernoulli_", "random_", "exponential_", "argsort", "msort", "renorm", "dist", "lgamma", "digamma",
    "sum_to_size", "softmax_", "frac", "trunc", "fix", "logical_and", "logical_or", "logical_not", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "eq", "ne", "lt", "le", "gt", "ge", "isnan",
    "isinf", "isfinite", "sgn", "hypot", "xlogy", "rot90",
}
# ATen methods called on tensors inside the C++ source (a conservative set: names a hand-written kernel's host
# code does not otherwise call with a dot)
CPP_TENSOR_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "conv1d", "conv2d", "conv3d", "linear", "einsum", "softmax",
    "log_softmax", "cumsum", "cumprod", "sort", "topk", "relu", "sigmoid", "tanh", "gelu", "logsumexp", "sum",
    "mean", "norm", "argmax", "argmin", "amax", "amin", "prod", "var", "std", "clamp", "matmul_",
    "clamp_min", "clamp_max", "clamp_min_", "clamp_max_", "relu_", "maximum", "minimum", "exp", "log", "sqrt",
    "rsqrt", "pow", "abs", "where", "masked_fill", "gather", "scatter", "index_select", "addcmul", "addcdiv",
}
# torch::/at:: names the C++ source may use: types, allocation, options, dtype constants (k...), guards
CPP_ALLOWED = {
    "Tensor", "TensorOptions", "IntArrayRef", "ScalarType", "Scalar", "Device", "DeviceType", "Dtype", "Half",
    "BFloat16", "Layout", "MemoryFormat", "optional", "TensorList", "List", "empty", "empty_like", "empty_strided",
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "dtype", "device", "DeviceGuard",
    "OptionalDeviceGuard", "acc_type", "numeric_limits", "PackedTensorAccessor32", "PackedTensorAccessor64",
    "RestrictPtrTraits", "DefaultPtrTraits", "TensorAccessor", "elementSize", "toString", "kCUDA", "from_blob",
    # launch arithmetic, accumulation types and dtype predicates: no tensor is computed (session 21: honest
    # candidates refused for them)
    "ceil_div", "opmath_type", "isFloatingType", "isComplexType", "isIntegralType", "isReducedFloatingType",
    "isSignedType", "canCast", "promoteTypes", "typeMetaToScalarType", "ScalarTypeToCPPType",
}
# ATen's device-side helpers a candidate's own kernel may call (at::native::cuda_utils::BlockReduceSum): they run
# inside the candidate's kernel, not as kernels of ATen's
CPP_NATIVE_DEVICE_HELPERS = re.compile(r"(?:Block|Warp)Reduce\w*")
FORBIDDEN_IMPORTS = {"threading", "multiprocessing", "concurrent", "asyncio", "subprocess", "ctypes", "signal",
                     "time", "timeit", "gc", "importlib", "sys", "builtins"}
# a name used without an import still means torch's (the old checks' roots)
DEFAULT_ALIASES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional",
                   "functional": "torch.nn.functional"}
HOOKS = {"register_forward_hook", "register_forward_pre_hook", "register_module_forward_hook",
         "register_module_forward_pre_hook", "register_full_backward_hook", "register_backward_hook",
         "register_hook", "register_module_full_backward_hook"}
HIDING_CALLS = {"eval", "exec", "compile", "__import__", "globals", "vars"}

_LAUNCH = re.compile(r"<<<")
_GLOBAL = re.compile(r"__global__\s+\w")
_CPP_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_CPP_QUALIFIED = re.compile(r"\b(torch|at|c10)((?:\s*::\s*\w+)+)")
_CPP_LIBRARY = re.compile(r"\b(?:cu(?:blas|dnn)\w*|CU(?:BLAS|DNN)\w*)|\w*BlasHandle\w*|\w*BlasLt\w*", re.I)
_CPP_TF32 = re.compile(r"\w*(?:allow_?tf32|TF32CuBLAS|TF32CuDNN|Float32MatmulPrecision)\w*", re.I)
_CPP_METHOD = re.compile(r"[\w\)\]]\s*(?:\.|->)\s*(" + "|".join(sorted(CPP_TENSOR_COMPUTE, key=len, reverse=True))
                         + r")\s*\(")
_TF32_FLAG = re.compile(r"allow_tf32|reduced_precision|allow_fp16|allow_bf16", re.I)
_STREAMS = re.compile(r"(^|\.)cuda\.(Stream|stream|set_stream|CUDAGraph|graph|graphs)(\.|$)|ExternalStream")
_LOAD = ("cpp_extension.load_inline", "cpp_extension.load")


@dataclass(frozen=True)
class PyTorchCheck:
    ok: bool
    reasons: tuple[str, ...]


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    elif isinstance(node, ast.Subscript):
        parts.append(_dotted(node.value) + "[]")
    return ".".join(reversed(parts))


def _module_statements(body: list[ast.stmt]):
    """Top-level statements, descending into if/for/while/with/try blocks (not into functions or classes)."""
    for st in body:
        yield st
        for name in ("body", "orelse", "finalbody"):
            sub = getattr(st, name, None)
            if isinstance(sub, list) and not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _module_statements(sub)
        for h in getattr(st, "handlers", []) or []:
            yield from _module_statements(h.body)


def _torch_reason(canon: str | None) -> str | None:
    """Why referring to (calling) ``canon``, a resolved dotted name, is torch doing the work; None if it is not."""
    if not canon:
        return None
    parts = canon.split(".")
    if parts[0] == "operator" and parts[-1] in ("matmul", "imatmul", "__matmul__"):
        return "the matrix product operator"
    if parts[0] in ("cupy", "scipy", "jax", "tensorflow") and len(parts) > 1:
        return f"{parts[0]} computes"
    if parts[0] == "numpy" and parts[-1] in TENSOR_COMPUTE | {"tensordot", "inner", "convolve"} and parts[-1] not in (
            "prod", "ceil", "floor", "round", "sqrt", "max", "min", "abs"):
        return "numpy computes on the host"
    if parts[0] != "torch" or len(parts) == 1:
        return None
    first = parts[1]
    if first == "ops":
        return "a torch operator"
    if first in ("cuda", "backends", "utils", "autograd", "jit") and not (first == "jit" and len(parts) > 2):
        if first == "autograd" and len(parts) > 2 and parts[2] not in ("Function", "function", "grad_mode"):
            return "torch autograd computes"
        return None
    if first == "nn":
        if len(parts) == 2 or parts[2] in NN_CONTAINERS:
            return None
        if parts[2] == "functional":
            return None if len(parts) == 3 else "a torch function"
        if parts[2] == "init":
            return None if len(parts) == 3 else "parameter initialisation on the forward side"
        return "a torch nn layer"
    if first == "Tensor":
        if len(parts) == 2 or parts[2] in ALLOWED_TENSOR_METHODS:
            return None
        return "a torch tensor method"
    if len(parts) == 2 and (first in ALLOWED_TORCH_CALLS or first in TORCH_VALUES):
        return None
    return "a torch function"


class _Facts:
    """What a candidate file binds at module level: imports and aliases, string constants, helper definitions,
    the objects load_inline returns."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.tainted: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        self.defs: dict[str, ast.AST] = {}
        self.ext_names: set[str] = set()
        self.factories: set[str] = set()
        self.star: list[tuple[int, str]] = []
        stmts = list(_module_statements(tree.body))
        for st in stmts:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                self._imports(st, self.aliases)
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[st.name] = st
        for name, canon in DEFAULT_ALIASES.items():
            if name not in self.defs:
                self.aliases.setdefault(name, canon)
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(n, ast.Call) and self._is_load(n, {}) for n in ast.walk(st)) and any(
                    isinstance(n, ast.Return) and n.value is not None for n in ast.walk(st)):
                self.factories.add(st.name)
        assigns = [st for st in stmts if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
        for _ in range(3):  # aliases of aliases, strings built from strings
            for st in assigns:
                self._assign(st)
            for cls in (st for st in stmts if isinstance(st, ast.ClassDef)):
                for b in cls.body:
                    if isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.targets[0], ast.Name):
                        c = self.canon(b.value, {})
                        if c and c.split(".")[0] in {v.split(".")[0] for v in self.aliases.values()}:
                            self.aliases[f"{cls.name}.{b.targets[0].id}"] = c
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            glob = {g for n in ast.walk(fn) if isinstance(n, ast.Global) for g in n.names}
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and self.is_ext_source(n.value, set(), set()):
                    self.ext_names |= {t.id for t in n.targets if isinstance(t, ast.Name) and t.id in glob}
        self.ext_names -= set(self.aliases) | set(self.tainted)

    def _imports(self, st: ast.stmt, into: dict[str, str]) -> None:
        if isinstance(st, ast.Import):
            for a in st.names:
                into[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(st, ast.ImportFrom) and st.module and not st.level:
            for a in st.names:
                if a.name == "*":
                    self.star.append((st.lineno, st.module))
                else:
                    into[a.asname or a.name] = f"{st.module}.{a.name}"

    def _assign(self, st: ast.stmt) -> None:
        value = st.value
        if value is None:
            return
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        for t in targets:
            pairs = [(t, value)]
            if isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple) and len(t.elts) == len(value.elts):
                pairs = list(zip(t.elts, value.elts))
            for tgt, val in pairs:
                for name in ([tgt.id] if isinstance(tgt, ast.Name) else
                             [e.id for e in tgt.elts if isinstance(e, ast.Name)] if isinstance(tgt, ast.Tuple)
                             else []):
                    self._bind(name, val, isinstance(st, ast.AugAssign))

    def _bind(self, name: str, val: ast.expr, aug: bool) -> None:
        canon = self.canon(val, {})
        if isinstance(val, ast.Lambda):
            self.defs[name] = val
        elif canon and canon.split(".")[0] in {c.split(".")[0] for c in self.aliases.values()}:
            self.aliases[name] = canon
        elif self.is_ext_source(val, set(), set()):
            self.ext_names.add(name)
        else:
            s = self.string(val, {})
            if s is not None:
                self.strings[name] = (self.strings.get(name, "") + s) if aug else s
            else:
                held = self.torch_refs(val, {})
                if held:
                    self.tainted[name] = held[0]

    def canon(self, node: ast.AST, local: dict[str, str]) -> str | None:
        """The dotted name ``node`` refers to, through imports and aliases (``th.mm`` -> ``torch.mm``), or None."""
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id] or None
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name):
                key = f"{node.value.id}.{node.attr}"
                if local.get(key) or (key in self.aliases and node.value.id not in local):
                    return local.get(key) or self.aliases[key]
            base = self.canon(node.value, local)
            return f"{base}.{node.attr}" if base else None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2):
            base = self.canon(node.args[0], local)
            attr = self.string(node.args[1], local)
            return f"{base}.{attr}" if base and attr else None
        return None

    def torch_refs(self, node: ast.AST, local: dict[str, str]) -> list[str]:
        return [c for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute, ast.Call))
                for c in [self.canon(n, local)] if c and _torch_reason(c)]

    def _is_load(self, call: ast.Call, local: dict[str, str]) -> bool:
        canon = self.canon(call.func, local) or ""
        return canon.endswith(_LOAD) or (canon == "" and _dotted(call.func) in ("load_inline",))

    def is_ext_source(self, node: ast.AST, local_ext: set[str], ext_attrs: set[str]) -> bool:
        """``node`` is (an expression for) the module load_inline built."""
        if isinstance(node, ast.Call):
            if self._is_load(node, {}):
                return True
            return isinstance(node.func, ast.Name) and node.func.id in self.factories
        if isinstance(node, ast.Name):
            return node.id in local_ext or (node.id in self.ext_names and node.id not in self.aliases)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return node.attr in ext_attrs
        return False

    def string(self, node: ast.AST | None, local: dict[str, str]) -> str | None:
        """The text of a string expression: constants, module-level names, +, join, f-strings' literal parts."""
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.Name):
            return self.strings.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = [self.string(v.value if isinstance(v, ast.FormattedValue) else v, local) for v in node.values]
            return "".join(p or "" for p in parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.string(node.left, local), self.string(node.right, local)
            return None if left is None and right is None else (left or "") + (right or "")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.string(node.left, local)
        if isinstance(node, (ast.List, ast.Tuple)):
            parts = [self.string(e, local) for e in node.elts]
            return None if all(p is None for p in parts) else "\n".join(p or "" for p in parts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            recv = self.string(node.func.value, local)
            meth = node.func.attr
            if meth == "join" and recv is not None and node.args:
                arg = node.args[0]
                elts = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                return recv.join(self.string(e, local) or "" for e in elts)
            if meth == "replace" and recv is not None and len(node.args) == 2:
                a, b = self.string(node.args[0], local), self.string(node.args[1], local)
                return recv.replace(a, b) if a is not None and b is not None else recv
            if recv is not None and meth in ("format", "strip", "lstrip", "rstrip", "format_map"):
                return recv
            if meth == "dedent" and node.args:
                return self.string(node.args[0], local)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dedent" and node.args:
            return self.string(node.args[0], local)
        return None


class _Checker:
    def __init__(self, facts: _Facts):
        self.f = facts
        self.reasons: list[str] = []
        self.visited: set[int] = set()
        self.queue: list[tuple[ast.AST, str]] = []

    def add(self, node: ast.AST, via: str) -> None:
        if id(node) not in self.visited:
            self.visited.add(id(node))
            self.queue.append((node, via))

    def run(self) -> None:
        while self.queue:
            node, via = self.queue.pop(0)
            if isinstance(node, ast.ClassDef):
                self.check_class(node, via)
            elif isinstance(node, ast.Lambda):
                self.scan(node, f"lambda at line {node.lineno}{via}", {}, set())
            else:
                self.scan(node, f"function {node.name}{via}", {}, set())

    def check_class(self, cls: ast.ClassDef, via: str = "") -> None:
        methods = {b.name: b for b in cls.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))}
        calls = {name: {n.func.attr for n in ast.walk(fn) if isinstance(n, ast.Call)
                        and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                        and n.func.value.id == "self" and n.func.attr in methods}
                 for name, fn in methods.items()}

        def reach(roots):
            seen, todo = set(), list(roots)
            while todo:
                m = todo.pop()
                if m not in seen:
                    seen.add(m)
                    todo += calls.get(m, ())
            return seen

        init_side = reach({"__init__"} & set(methods))
        forward_side = reach(set(methods) - init_side)
        init_only = init_side - forward_side
        # attributes: torch modules, torch functions, lambdas, the extension
        attrs: dict[str, str] = {}
        self_aliases: dict[str, str] = {}
        ext_attrs: set[str] = set()
        assigns = [(st.targets[0] if isinstance(st, ast.Assign) else st.target, st.value)
                   for st in cls.body if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None]
        for fn in methods.values():
            for n in ast.walk(fn):
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            assigns.append((ast.Name(id=t.attr, lineno=n.lineno), n.value))
        for _ in range(2):
            for tgt, value in assigns:
                if not isinstance(tgt, ast.Name):
                    continue
                c = self.f.canon(value, {})
                if isinstance(value, ast.Lambda):
                    attrs[tgt.id] = "a lambda"
                elif c and c.split(".")[0] in {v.split(".")[0] for v in self.f.aliases.values()}:
                    self_aliases[f"self.{tgt.id}"] = c
                elif self.f.is_ext_source(value, set(), ext_attrs):
                    ext_attrs.add(tgt.id)
                else:
                    held = self.f.torch_refs(value, {})
                    if held:
                        attrs[tgt.id] = held[0]
                for n in ast.walk(value):
                    if isinstance(n, ast.Name) and n.id in self.f.defs:
                        self.add(self.f.defs[n.id], f" (held by {cls.name}.{tgt.id})")
        ext_attrs -= set(attrs) | {k[5:] for k in self_aliases}
        for name in init_only:
            for n in ast.walk(methods[name]):
                if isinstance(n, ast.Name) and isinstance(self.f.defs.get(n.id), ast.ClassDef):
                    self.add(self.f.defs[n.id], f" (used in {cls.name}.{name})")
        for name, fn in methods.items():
            if name not in init_only and name not in self.unreached_derivatives(cls, methods, calls):
                self.scan(fn, f"{cls.name}.{name}{via}", attrs, ext_attrs, self_aliases)

    def unreached_derivatives(self, cls: ast.ClassDef, methods: dict, calls: dict) -> set[str]:
        """An ``autograd.Function``'s ``backward`` (and ``jvp``/``vjp``): autograd runs them for gradients, which
        the harness never asks for (every call is under ``no_grad``), so torch work there is not the forward's.
        Unless the code calls one itself: through the class (``Fn.backward(...)``) or from another method."""
        if not any((self.f.canon(b, {}) or "").endswith("autograd.Function") for b in cls.bases):
            return set()
        names = {"backward", "jvp", "vjp"} & set(methods)
        named = {n.attr for n in ast.walk(self.f.tree) if isinstance(n, ast.Attribute) and n.attr in names
                 and isinstance(n.value, ast.Name) and self.f.defs.get(n.value.id) is cls}
        named |= {n.value for n in ast.walk(self.f.tree) if isinstance(n, ast.Constant) and n.value in names}
        called = {m for other, cs in calls.items() if other not in names for m in cs}
        return names - named - called

    def _locals(self, fn: ast.AST) -> tuple[dict[str, str], set[str]]:
        """Function-local aliases ('' shadows a module-level alias) and names bound to the extension."""
        local: dict[str, str] = {}
        ext: set[str] = set()
        args = fn.args
        params = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
        for p in params:
            local[p.arg] = ""
        defaults = list(zip(reversed(args.args + args.posonlyargs), reversed(args.defaults)))
        defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for a, d in defaults:
            c = self.f.canon(d, {})
            if c:
                local[a.arg] = c
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        for _ in range(2):
            for n in (x for st in body for x in ast.walk(st)):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    self.f._imports(n, local)
                elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For, ast.comprehension)):
                    targets = (n.targets if isinstance(n, ast.Assign) else
                               [n.target])
                    value = n.iter if isinstance(n, (ast.For, ast.comprehension)) else n.value
                    if value is None:
                        continue
                    for t in targets:
                        for name in [x.id for x in ast.walk(t) if isinstance(x, ast.Name)]:
                            c = self.f.canon(value, local)
                            if c:
                                local[name] = c
                            elif self.f.is_ext_source(value, ext, set()):
                                ext.add(name)
                            elif not local.get(name):
                                local[name] = ""
        return local, ext

    def scan(self, fn: ast.AST, label: str, attrs: dict[str, str], ext_attrs: set[str],
             self_aliases: dict[str, str] | None = None) -> None:
        local, local_ext = self._locals(fn)
        local.update(self_aliases or {})
        f = self.f
        # names bound to self attributes holding torch modules (for layer in self.layers: layer(x))
        held: dict[str, str] = {}
        for n in ast.walk(fn):
            if isinstance(n, (ast.Assign, ast.For)):
                value = n.iter if isinstance(n, ast.For) else n.value
                base = value.value if isinstance(value, ast.Subscript) else value
                if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self" \
                        and base.attr in attrs:
                    for t in ([n.target] if isinstance(n, ast.For) else n.targets):
                        held |= {x.id: f"self.{base.attr}" for x in ast.walk(t) if isinstance(x, ast.Name)}
                if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self" \
                        and base.attr in ext_attrs and isinstance(n, ast.Assign):
                    local_ext |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        decorators = [d for x in ast.walk(fn) if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef))
                      for d in x.decorator_list]
        parents: dict[int, ast.AST] = {}
        for n in ast.walk(fn):
            for c in ast.iter_child_nodes(n):
                parents[id(c)] = n
        for n in ast.walk(fn):
            if (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)) or (
                    isinstance(n, ast.AugAssign) and isinstance(n.op, ast.MatMult)):
                self.reasons.append(f"line {n.lineno}: {label} multiplies matrices with @ (a torch op)")
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in f.defs and n.id not in local:
                self.add(f.defs[n.id], f" (reached from {label})")
            is_getattr = (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr")
            if (isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)) or is_getattr:
                parent = parents.get(id(n))
                if isinstance(parent, ast.Attribute):
                    continue  # only the outermost part of a dotted name
                canon = f.canon(n, local)
                why = _torch_reason(canon)
                if why:
                    called = isinstance(parent, ast.Call) and parent.func is n
                    verb = "calls" if called or any(d is n for d in decorators) else "uses"
                    shown = _dotted(n) if not is_getattr else ast.unparse(n)
                    alias = "" if shown == canon else f" (= {canon})"
                    tail = ": torch computes" if canon.startswith("torch.") else ""
                    self.reasons.append(f"line {n.lineno}: {label} {verb} {shown}{alias} ({why}{tail}, "
                                        "not the candidate's kernel)")
            if isinstance(n, ast.Call):
                self._call(n, label, local, local_ext, attrs, ext_attrs, held)

    def _call(self, n: ast.Call, label, local, local_ext, attrs, ext_attrs, held) -> None:
        f = self.f
        func = n.func
        if isinstance(func, ast.Name) and func.id == "getattr" and n.args and f.canon(n.args[0], local) and (
                len(n.args) < 2 or f.string(n.args[1], local) is None):
            self.reasons.append(f"line {n.lineno}: {label} calls getattr on {_dotted(n.args[0])} with a name not "
                                "known statically (hides which torch function runs)")
        if isinstance(func, ast.Name) and func.id == "getattr" and len(n.args) >= 2:
            name = f.string(n.args[1], local)
            if name in TENSOR_COMPUTE and name not in ALLOWED_TENSOR_METHODS:
                self.reasons.append(f"line {n.lineno}: {label} takes .{name} through getattr (a torch op)")
        if f.canon(func, local):
            return  # judged as a reference (torch functions) or a known module's function (math.ceil)
        base = func.value if isinstance(func, ast.Subscript) else func
        if isinstance(base, ast.Name) and base.id in f.tainted and base.id not in local:
            self.reasons.append(f"line {n.lineno}: {label} calls {_dotted(func)}, which holds "
                                f"{f.tainted[base.id]} (torch computes, not the candidate's kernel)")
            return
        if isinstance(base, ast.Name) and base.id in held:
            self.reasons.append(f"line {n.lineno}: {label} calls {base.id}, taken from {held[base.id]} "
                                f"({attrs[held[base.id][5:]]}: torch computes, not the candidate's kernel)")
            return
        target = base
        if isinstance(base, ast.Attribute) and base.attr in ("forward", "__call__"):
            target = base.value
        if isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self" \
                and target.attr in attrs:
            what = attrs[target.attr]
            why = ("its body is not checked as forward code: call the extension directly" if what == "a lambda"
                   else "torch computes, not the candidate's kernel")
            self.reasons.append(f"line {n.lineno}: {label} calls self.{target.attr}, set to {what} ({why})")
            return
        if not isinstance(func, ast.Attribute):
            return
        recv = func.value
        if f.is_ext_source(recv, local_ext, ext_attrs):
            return  # the candidate's own extension
        if isinstance(recv, ast.Name) and recv.id == "self":
            return  # its own methods
        if func.attr in TENSOR_COMPUTE and func.attr not in ALLOWED_TENSOR_METHODS:
            self.reasons.append(f"line {n.lineno}: {label} calls .{func.attr}() (a torch op)")


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _cpp_reasons(text: str, line: int) -> list[str]:
    """Reasons the C++/CUDA ``text`` (starting at Python line ``line``) lets torch or a library compute."""
    text = _CPP_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out = []

    def at(pos: int) -> int:
        return line + text.count("\n", 0, pos)

    for m in _CPP_QUALIFIED.finditer(text):
        parts = [m.group(1)] + [p.strip() for p in m.group(2).split("::") if p.strip()]
        shown = "::".join(parts)
        if parts[1:3] == ["native", "cuda_utils"] and len(parts) == 4 and CPP_NATIVE_DEVICE_HELPERS.fullmatch(parts[3]):
            continue
        if "native" in parts:
            out.append(f"line {at(m.start())}: the C++/CUDA source uses {shown} (ATen's own kernels compute, not "
                       "the candidate's)")
        elif parts[1] == "cuda" or parts[0] == "c10":
            continue  # streams, guards, device properties; c10 is types (BlasHandle is caught below)
        elif parts[1] not in CPP_ALLOWED and not re.match(r"k[A-Z]", parts[1]):
            out.append(f"line {at(m.start())}: the C++/CUDA source calls {shown} (torch computes, not the "
                       "candidate's kernel)")
    for m in _CPP_LIBRARY.finditer(text):
        out.append(f"line {at(m.start())}: the C++/CUDA source uses {m.group(0)} (cuBLAS/cuDNN compute, not the "
                   "candidate's kernel)")
    for m in _CPP_TF32.finditer(text):
        out.append(f"line {at(m.start())}: the C++/CUDA source switches TF32 on ({m.group(0)}); the task is fp32 "
                   "with TF32 off")
    for m in _CPP_METHOD.finditer(text):
        out.append(f"line {at(m.start(1))}: the C++/CUDA source calls the tensor method .{m.group(1)}() (torch "
                   "computes, not the candidate's kernel)")
    return out


def check_pytorch_candidate(source: str) -> PyTorchCheck:
    """Static checks of a KernelBench-style candidate; see the module docstring for what is rejected."""
    reasons: list[str] = []
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return PyTorchCheck(False, (f"not valid Python (line {exc.lineno}: {exc.msg})",))
    tree = _without_main_block(tree)
    facts = _Facts(tree)
    for line, mod in facts.star:
        reasons.append(f"line {line}: from {mod} import * hides which functions are called")
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        reasons.append("no class ModelNew")
    else:
        cls = classes["ModelNew"]
        bases = [_dotted(b) for b in cls.bases]
        if any(facts.canon(b, {}) not in ("torch.nn.Module", "torch.nn.modules.module.Module") and _dotted(b) not in
               ("nn.Module", "torch.nn.Module", "Module") for b in cls.bases):
            reasons.append(f"line {cls.lineno}: ModelNew subclasses {', '.join(bases)}: it must derive from "
                           "nn.Module only (subclassing the reference Model inherits its torch forward)")
        if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in cls.body):
            reasons.append(f"line {cls.lineno}: ModelNew defines no forward of its own")
    reasons += _source_reasons(tree, facts)
    reasons += _escape_reasons(tree, facts)
    if "ModelNew" in classes:
        checker = _Checker(facts)
        checker.visited.add(id(classes["ModelNew"]))
        for d in classes["ModelNew"].decorator_list:
            why = _torch_reason(facts.canon(d.func if isinstance(d, ast.Call) else d, {}))
            if why:
                reasons.append(f"line {d.lineno}: ModelNew is decorated with {_dotted(d)} ({why})")
        checker.check_class(classes["ModelNew"])
        checker.run()
        reasons += checker.reasons
    return PyTorchCheck(not reasons, tuple(dict.fromkeys(reasons)))


def _is_main_test(test: ast.AST) -> bool:
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and {type(test.left), type(test.comparators[0])} == {ast.Name, ast.Constant}
            and {getattr(x, "id", None) for x in (test.left, test.comparators[0])} >= {"__name__"}
            and {getattr(x, "value", None) for x in (test.left, test.comparators[0])} >= {"__main__"})


def _without_main_block(tree: ast.Module) -> ast.Module:
    """The module without its top-level ``if __name__ == "__main__":`` blocks (no ``else``): the harness loads a
    candidate under another ``__name__``, so such a block (a self-test, a timing script) never runs there. Kept
    when anything in the module stores to ``__name__`` (the block could then run)."""
    if any(isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load) for n in ast.walk(tree)):
        return tree
    body = [st for st in tree.body if not (isinstance(st, ast.If) and not st.orelse and _is_main_test(st.test))]
    if len(body) == len(tree.body):
        return tree
    return ast.Module(body=body, type_ignores=tree.type_ignores)


def _source_reasons(tree: ast.Module, facts: _Facts) -> list[str]:
    """The CUDA source: a kernel defined and launched; no torch, cuBLAS, cuDNN or TF32 in the C++."""
    reasons = []
    given = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and facts._is_load(n, {}):
            exprs = [kw.value for kw in n.keywords if kw.arg in ("cpp_sources", "cuda_sources", "sources")]
            exprs += n.args[1:3]
            given += [s for s in (facts.string(e, {}) for e in exprs) if s]
    docs = _docstrings(tree)
    literals = [(n.value, n.lineno) for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
    cuda = "\n".join(given) if given else "\n".join(s for s, _ in literals)
    if not _GLOBAL.search(cuda):
        reasons.append("no __global__ kernel in the CUDA source")
    elif not _LAUNCH.search(cuda):
        reasons.append("a __global__ kernel is defined but never launched (<<< >>>)")
    for s, line in literals:
        if any(mark in s for mark in ("(", ";", "#include", "::")):  # C/C++ text, not a name or a path
            reasons += _cpp_reasons(s, line)
    if given and not reasons:  # pieces joined only in the resolved text (e.g. "at::" + "matmul")
        line = next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and facts._is_load(n, {}))
        reasons += [re.sub(r"^line \d+:", f"line {line}: in the source given to load_inline,", r)
                    for r in _cpp_reasons("\n".join(given), line)]
    return reasons


def _escape_reasons(tree: ast.Module, facts: _Facts) -> list[str]:
    reasons = []
    modules = {c.split(".")[0] for c in facts.aliases.values()} | {"time"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            reasons.append(f"line {node.lineno}: try/except (a fallback path) is not allowed")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                if m.split(".")[0] in FORBIDDEN_IMPORTS:
                    reasons.append(f"line {node.lineno}: import of {m} is not allowed")
        elif isinstance(node, ast.ClassDef):
            for b in node.bases:
                if _dotted(b) in ("torch.Tensor", "Tensor") or facts.canon(b, {}) == "torch.Tensor":
                    reasons.append(f"line {node.lineno}: class {node.name} subclasses torch.Tensor")
            for b in node.body:
                if isinstance(b, ast.FunctionDef) and b.name in ("__torch_function__", "__torch_dispatch__"):
                    reasons.append(f"line {b.lineno}: {b.name} overrides torch dispatch")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                reasons += _assignment_reasons(node, t, facts, modules)
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            canon = facts.canon(node.func, {}) or name
            if name == "setattr" and node.args:
                what = facts.canon(node.args[0], {}) or _dotted(node.args[0])
                attr = facts.string(node.args[1], {}) if len(node.args) > 1 else None
                if attr and _TF32_FLAG.search(attr):
                    reasons.append(f"line {node.lineno}: setattr of {what}.{attr} switches TF32 or reduced "
                                   "precision on; the task is fp32 with TF32 off")
                elif what.split(".")[0] in modules:
                    reasons.append(f"line {node.lineno}: setattr on {_dotted(node.args[0])} (monkey-patching)")
                elif attr in ("forward", "__call__", "__class__"):
                    reasons.append(f"line {node.lineno}: setattr rebinds {attr} (the harness calls the forward "
                                   "ModelNew defines)")
            if canon.endswith("set_float32_matmul_precision"):
                reasons.append(f"line {node.lineno}: {name} switches TF32 on; the task is fp32 with TF32 off")
            if _STREAMS.search(canon) or _STREAMS.search(name):
                reasons.append(f"line {node.lineno}: {name}: extra streams and graphs are not allowed")
            if name.rpartition(".")[2] in HOOKS:
                reasons.append(f"line {node.lineno}: {name} installs a hook that runs code around forward")
            if isinstance(node.func, ast.Name) and node.func.id in HIDING_CALLS:
                reasons.append(f"line {node.lineno}: {node.func.id}() hides code from the static checks")
    return reasons


def _assignment_reasons(node: ast.stmt, t: ast.expr, facts: _Facts, modules: set[str]) -> list[str]:
    if isinstance(t, (ast.Tuple, ast.List)):
        return [r for e in t.elts for r in _assignment_reasons(node, e, facts, modules)]
    if isinstance(t, ast.Name) and t.id == "ModelNew" and node in facts.tree.body:
        return [f"line {node.lineno}: assignment to ModelNew replaces the class the checks read"]
    if not isinstance(t, ast.Attribute):
        return []
    if t.attr in ("forward", "__call__", "__class__"):
        return [f"line {node.lineno}: assignment to {_dotted(t)} rebinds {t.attr} (the harness calls the forward "
                "ModelNew defines)"]
    canon = facts.canon(t, {}) or _dotted(t)
    if canon.split(".")[0] not in modules:
        return []
    value = node.value
    if canon.startswith("torch.backends.") and _TF32_FLAG.search(t.attr):
        if isinstance(value, ast.Constant) and value.value is False:
            return []
        return [f"line {node.lineno}: {_dotted(t)} = ... switches TF32 or reduced precision on; the task is fp32 "
                "with TF32 off"]
    if canon.startswith("torch.backends.") and isinstance(value, ast.Constant):
        return []  # a setting (cudnn.benchmark = True): harmless for the candidate's own kernels
    return [f"line {node.lineno}: assignment to {_dotted(t)} (monkey-patching)"]
