"""The ``bmm_batched``, ``conv2d_bias_relu`` and ``half_linear`` PyTorch families: parameters in the order and layout
the kernels read them, problems that cover every layout and option the variants specialise on, the Model equal to
the formula the kernels compute, tolerances that a float64 evaluation (and, for half precision, a float32 sum in
another order) respects while a missing term fails, variants that differ, pass the static checks and build with
nvcc, and that compute what PyTorch computes: every variant runs on the CPU emulator (``tests/cuda_cpu_emulator.py``:
a fiber per GPU thread, ASan and UBSan) at small odd shapes, and its launches are checked at every problem's real
sizes (dry runs of the host code).
The checks every generated family shares (registration, validity, variety, determinism) are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import cuda_cpu_emulator as emu  # noqa: E402
from torch_family_checks import check_and_build, model_and_inputs  # noqa: E402

from cudaperf.dataset.pytorch_families.common import ACTIVATIONS  # noqa: E402
from cudaperf.dataset.pytorch_families.dense import bmm_batched, conv2d_bias_relu, half_linear  # noqa: E402
from cudaperf.harness.pytorch_reference import compare_outputs  # noqa: E402
from cudaperf.harness.torch_fast import build_fast_candidate  # noqa: E402
from cudaperf.tasks.pytorch import problem_namespace  # noqa: E402

FAMILIES = [bmm_batched, conv2d_bias_relu, half_linear]
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator builds with g++")


def _first(family, pred):
    return next(g for g in (family(i) for i in range(50)) if pred(g.params))


def _params(model) -> list:
    return [t.detach() for _, t in [*model.named_parameters(), *model.named_buffers()]]


def _act(name: str, v):
    return v if name == "none" else eval(ACTIVATIONS[name][0].format(v="v"), {"torch": torch, "v": v})


# ---------------------------------------------------------------------------------------------------------------
# parameters, layouts, options


@pytest.mark.parametrize("family,pred,names", [
    (bmm_batched, lambda p: p["bias"], ["bias"]),
    (bmm_batched, lambda p: not p["bias"], []),
    (conv2d_bias_relu, lambda p: True, ["conv.weight", "conv.bias"]),
    (half_linear, lambda p: p["bias"], ["fc.weight", "fc.bias"]),
    (half_linear, lambda p: not p["bias"], ["fc.weight"])])
def test_parameters_arrive_in_the_order_the_kernels_read_them(family, pred, names):
    g = _first(family, pred)
    model, inputs = model_and_inputs(g, batch=2)
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == names
    p = g.params
    if family is bmm_batched:
        m, n, k = p["m"], p["n"], p["k"]
        assert [tuple(t.shape) for t in inputs] == [(2, k, m) if p["trans_a"] else (2, m, k),
                                                    (2, n, k) if p["trans_b"] else (2, k, n)]
        if p["bias"]:  # drawn by its own generator: the harness's seed does not move it
            other = problem_namespace(g.task)
            torch.manual_seed(99)
            assert tuple(model.bias.shape) == (n,) and torch.equal(model.bias, other["Model"]().bias)
            assert float(model.bias.detach().abs().max()) > 0.5
    elif family is conv2d_bias_relu:
        assert [tuple(t.shape) for t in _params(model)] == [(p["cout"], p["cin"], p["kernel"], p["kernel"]),
                                                            (p["cout"],)]
        assert tuple(inputs[0].shape) == (2, p["cin"], p["h"], p["w"])
    else:
        (x,) = inputs
        assert x.dtype == torch.float16 and tuple(x.shape) == (2, p["in_features"])
        assert all(t.dtype == torch.float16 for t in _params(model))
        torch.manual_seed(1234)  # float32 initialisation under the harness's seed, then cast
        want = torch.nn.Linear(p["in_features"], p["out_features"], bias=p["bias"]).half()
        assert torch.equal(model.fc.weight, want.weight)
        assert not p["bias"] or torch.equal(model.fc.bias, want.bias)


def test_bmm_problems_cover_the_layouts_and_options():
    ps = [bmm_batched(i).params for i in range(50)]
    assert {(p["trans_a"], p["trans_b"]) for p in ps} == {(False, False), (False, True), (True, False), (True, True)}
    assert 10 <= sum(p["bias"] for p in ps) <= 40 and 10 <= sum(p["alpha"] != 1.0 for p in ps) <= 40
    assert any(p["k"] % 4 for p in ps) and any(p["k"] % 4 == 0 for p in ps)  # the float4 path and its fallback
    assert any(p["m"] % 64 for p in ps) and any(p["n"] % 16 for p in ps)  # partial tiles
    assert len({p["batch"] for p in ps}) >= 6 and max(p["batch"] for p in ps) <= 65535


def test_conv_problems_cover_kernels_strides_paddings_and_odd_shapes():
    ps = [conv2d_bias_relu(i).params for i in range(50)]
    assert {p["kernel"] for p in ps} == {3, 5} and {p["stride"] for p in ps} == {1, 2}
    assert {p["pad"] for p in ps} == {0, 1, 2} and {p["relu"] for p in ps} == {True, False}
    assert any(p["cin"] % 2 for p in ps) and any(p["cout"] % 4 for p in ps)  # a partial group of four channels
    assert any(p["h"] != p["w"] for p in ps) and any(p["h"] % 2 for p in ps)
    assert all(3 <= p["cin"] <= 64 and 3 <= p["cout"] <= 64 for p in ps)
    # im2col keeps at most 16M floats of scratch: one image's columns fit
    for p in ps:
        ho = (p["h"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
        wo = (p["w"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
        assert p["cin"] * p["kernel"] ** 2 * ho * wo <= 2**24


def test_half_problems_cover_activations_outputs_and_vector_paths():
    ps = [half_linear(i).params for i in range(50)]
    assert {p["act"] for p in ps} == {"none", "relu", "gelu", "silu", "tanh", "sigmoid"}
    assert {p["out_half"] for p in ps} == {True, False} and {p["bias"] for p in ps} == {True, False}
    k = {p["in_features"] for p in ps}
    assert any(v % 2 for v in k) and any(v % 8 and v % 2 == 0 for v in k) and any(v % 8 == 0 for v in k)


# ---------------------------------------------------------------------------------------------------------------
# the Model against the kernels' formulas


def test_bmm_model_reads_the_operands_as_the_kernels_index_them():
    """A[m][k] = a[k * M + m] when A is stored transposed (a[m * K + k] otherwise), B[k][n] = b[n * K + k] when B
    is (b[k * N + n] otherwise), C = A B * alpha + bias: computed from flat indices in float64."""
    for pred in (lambda p: p["trans_a"] and not p["trans_b"], lambda p: p["trans_b"] and not p["trans_a"],
                 lambda p: p["trans_a"] and p["trans_b"]):
        g = _first(bmm_batched, pred)
        p = g.params
        model, (a, b) = model_and_inputs(g, batch=2)
        with torch.no_grad():
            y = model(a, b)
        m, n, k = p["m"], p["n"], p["k"]
        fa, fb = a.double().reshape(2, -1).numpy(), b.double().reshape(2, -1).numpy()
        mi, ki, ni = np.arange(m)[:, None], np.arange(k)[None, :], np.arange(n)[None, :]
        big_a = fa[:, ki * m + mi] if p["trans_a"] else fa[:, mi * k + ki]
        big_b = fb[:, ni * k + ki.T] if p["trans_b"] else fb[:, ki.T * n + ni]
        ref = big_a @ big_b * p["alpha"] + (model.bias.detach().double().numpy() if p["bias"] else 0.0)
        assert y.shape == (2, m, n) and np.allclose(y.double().numpy(), ref, atol=1e-4, rtol=1e-4)


def test_conv_model_is_the_strided_padded_sum_the_kernels_compute():
    """y[n][co][ho][wo] = b[co] + sum over ci, kh, kw of w[co][ci][kh][kw] x[n][ci][ho*S - P + kh][wo*S - P + kw]
    (zero outside the image), then ReLU when asked: the kernels' loops, in float64."""
    for pred in (lambda p: p["stride"] == 2 and p["pad"] == 0, lambda p: p["stride"] == 1 and p["pad"] == 2,
                 lambda p: p["stride"] == 2 and p["pad"] == 1 and not p["relu"]):
        g = _first(conv2d_bias_relu, pred)
        p = g.params
        model, (x,) = model_and_inputs(g, batch=1)
        x = x[:, :, :20, :23].contiguous()  # a corner is enough, and the Model's conv takes any plane
        with torch.no_grad():
            y = model.double()(x.double())
        w, b = model.conv.weight.detach(), model.conv.bias.detach()
        ks, s, pad = p["kernel"], p["stride"], p["pad"]
        xp = torch.nn.functional.pad(x.double(), (pad, pad, pad, pad))
        ho, wo = (20 + 2 * pad - ks) // s + 1, (23 + 2 * pad - ks) // s + 1
        ref = torch.zeros(1, p["cout"], ho, wo, dtype=torch.float64)
        for kh in range(ks):
            for kw in range(ks):
                patch = xp[:, :, kh:kh + s * (ho - 1) + 1:s, kw:kw + s * (wo - 1) + 1:s]  # (1, cin, ho, wo)
                ref += torch.einsum("ncij,oc->noij", patch, w[:, :, kh, kw])
        ref += b[None, :, None, None]
        if p["relu"]:
            ref = ref.clamp_min(0)
        assert y.shape == ref.shape and torch.allclose(y, ref, atol=1e-12, rtol=1e-12)


def _half_formula(x, w, b, act: str, out_half: bool, *, sequential: bool = False, drop_last: bool = False):
    """The variants' arithmetic: float32 sums of half products (float64 sums rounded once, or the sequential float32
    order of a thread per output), plus the bias, rounded to half; the activation in float32 of that half value,
    rounded to half again; then float32 if the Model casts back."""
    xs, ws = x.float().numpy(), w.float().numpy()
    if drop_last:
        xs, ws = xs[:, :-1], ws[:, :-1]
    if sequential:
        acc = np.zeros((xs.shape[0], ws.shape[0]), np.float32)
        for k in range(xs.shape[1]):
            acc = (acc + np.outer(xs[:, k], ws[:, k]).astype(np.float32)).astype(np.float32)
        acc = torch.from_numpy(acc)
    else:
        acc = torch.from_numpy(xs.astype(np.float64) @ ws.astype(np.float64).T).float()
    if b is not None:
        acc = acc + b.float()
    y = _act(act, acc.half().float()).half()
    return y if out_half else y.float()


def test_half_model_rounds_where_the_kernels_round():
    """The Model's output is the float32 sum (bias added) rounded to half, its activation rounded again: what every
    variant's epilogue computes. On almost every element bit for bit (the float32 sum's order aside)."""
    for pred in (lambda p: p["act"] == "gelu" and p["out_half"], lambda p: p["act"] == "tanh" and not p["out_half"],
                 lambda p: p["act"] == "none" and p["bias"]):
        g = _first(half_linear, pred)
        p = g.params
        model, (x,) = model_and_inputs(g, batch=8)
        with torch.no_grad():
            y = model(x)
        ref = _half_formula(x, model.fc.weight.detach(), model.fc.bias.detach() if p["bias"] else None, p["act"],
                            p["out_half"])
        assert y.dtype == ref.dtype == (torch.float16 if p["out_half"] else torch.float32)
        assert float((y == ref).float().mean()) > 0.99 and compare_outputs(g.task, [y], [ref]) is None


# ---------------------------------------------------------------------------------------------------------------
# tolerances


def _error_ratio(g, y, y64) -> float:
    atol, rtol = g.task.tolerance.fp32
    return float(((y.double() - y64).abs() / (atol + rtol * y64.abs())).max())


@pytest.mark.parametrize("family", [bmm_batched, conv2d_bias_relu])
def test_float64_reference_is_within_the_tolerance(family):
    """The problem's own float32 output against a float64 evaluation: the tolerance leaves room for another
    summation order (the variants', cuDNN's algorithms) on top of the reference's."""
    for index in (0, 1, 2):
        g = family(index)
        model, inputs = model_and_inputs(g, batch=1)
        with torch.no_grad():
            y32 = model(*inputs)
            y64 = model.double()(*[x.double() for x in inputs])
        assert _error_ratio(g, y32, y64) < 0.05, (g.task.id, _error_ratio(g, y32, y64))


@pytest.mark.parametrize("family", [bmm_batched, conv2d_bias_relu])
def test_a_missing_term_fails_the_tolerance(family):
    """The last k (one input channel's taps for the convolution) left out: well beyond 1e-3 somewhere."""
    g = family(0)
    p = g.params
    model, inputs = model_and_inputs(g, batch=1)
    with torch.no_grad():
        y = model(*inputs)
        if family is bmm_batched:
            a, b = inputs
            a = a.clone()
            if p["trans_a"]:
                a[:, -1, :] = 0  # (batch, K, M): the last k
            else:
                a[:, :, -1] = 0
            y_bad = model(a, b)
        else:
            (x,) = inputs
            x = x.clone()
            x[:, -1] = 0
            y_bad = model(x)
    assert compare_outputs(g.task, [y], [y_bad]) is not None


def test_half_tolerance_covers_another_summation_order_and_catches_a_missing_term():
    """A thread per output sums in sequential float32 order, cuBLAS in blocks: the roundings to half then differ by
    an ulp here and there, within the tolerance (an ulp is at most 2^-10 relative); a product left out is not."""
    for index in (0, 1, 2, 3):
        g = half_linear(index)
        p = g.params
        model, (x,) = model_and_inputs(g, batch=16)
        with torch.no_grad():
            y = model(x)
        w, b = model.fc.weight.detach(), model.fc.bias.detach() if p["bias"] else None
        seq = _half_formula(x, w, b, p["act"], p["out_half"], sequential=True)
        assert compare_outputs(g.task, [y], [seq]) is None, (g.task.id, p)
        ulp_off = float(((seq.float() - y.float()).abs() > 0).float().mean())
        assert ulp_off < 0.05  # the orders agree on most elements
        bad = _half_formula(x, w, b, p["act"], p["out_half"], drop_last=True)
        assert compare_outputs(g.task, [y], [bad]) is not None, (g.task.id, p)
    atol, rtol = half_linear(0).task.tolerance.fp16
    assert rtol >= 4 * 2**-10 and half_linear(0).task.tolerance.fp32 == (atol, rtol)


# ---------------------------------------------------------------------------------------------------------------
# variants: builds (their launches and static checks: tests/test_pytorch_families_generated.py)


@pytest.mark.parametrize("family,variant", [(bmm_batched, "block_per_row_shared_a"),
                                            (conv2d_bias_relu, "im2col_then_gemm"),
                                            (half_linear, "warp_per_output_shuffle")])
def test_the_variant_with_the_most_host_calls_builds(family, variant):
    """One build per family in the default run (a build is ~10 s on two cores): dynamic shared memory with its
    opt-in, a scratch buffer over chunks of images, a host-side alignment test; every variant builds in the slow
    test below."""
    v = next(v for v in family(0).variants if v.name == variant)
    b = build_fast_candidate(v.code)
    assert b.stage == "ok", (v.name, b.info.log[-2000:])


def _other_options(family) -> int:
    """An index whose compile-time options differ from index 0's in every switch that has two settings."""
    p0 = family(0).params
    keys = {bmm_batched: ("trans_a", "trans_b", "bias"), conv2d_bias_relu: ("stride", "relu"),
            half_linear: ("out_half", "bias")}[family]
    return next(i for i in range(1, 50) if all(family(i).params[k] != p0[k] for k in keys))


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_variant_passes_the_checks_and_builds(family):
    for index in (0, _other_options(family)):
        check_and_build(family(index))


# ---------------------------------------------------------------------------------------------------------------
# variants run on the CPU emulator

_SMALL = {  # small shapes the variants run at: odd sizes, partial tiles, vector paths on and off
    "bmm_batched": [(2, 40, 67, 36), (3, 70, 33, 21)],  # (batch, M, N, K): K % 4 == 0 takes the float4 path
    "conv2d_bias_relu": [(2, 3, 6, 19, 23), (3, 5, 9, 34, 18)],  # (N, Cin, Cout, H, W)
    "half_linear": [(66, 72, 67), (5, 37, 70), (3, 130, 9)],  # (M, K, N): K % 8 == 0, odd, even but not % 8
}


def _small_case(g, shape, seed: int = 0):
    """Inputs at ``shape`` with the problem's options, and PyTorch's output for them (the Model's operations)."""
    p = g.params
    torch.manual_seed(seed)
    if g.family == "bmm_batched":
        bn, m, n, k = shape
        a = torch.randn(bn, k, m) if p["trans_a"] else torch.randn(bn, m, k)
        b = (torch.randn(bn, n, k) if p["trans_b"] else torch.randn(bn, k, n)) / math.sqrt(k)
        bias = torch.empty(n).uniform_(-1.0, 1.0)
        y = torch.bmm(a.transpose(1, 2) if p["trans_a"] else a, b.transpose(1, 2) if p["trans_b"] else b)
        y = y * p["alpha"] if p["alpha"] != 1.0 else y
        return ([a, b, bias] if p["bias"] else [a, b]), (y + bias if p["bias"] else y)
    if g.family == "conv2d_bias_relu":
        nb, cin, cout, h, w = shape
        conv = torch.nn.Conv2d(cin, cout, p["kernel"], stride=p["stride"], padding=p["pad"])
        x = torch.randn(nb, cin, h, w)
        with torch.no_grad():
            y = conv(x)
        return [x, conv.weight.detach(), conv.bias.detach()], (torch.relu(y) if p["relu"] else y)
    m, k, n = shape
    fc = torch.nn.Linear(k, n, bias=p["bias"]).half()
    x = (torch.randn(m, k) * p["spread"]).half()
    with torch.no_grad():
        y = _act(p["act"], fc(x))
    return [x, *_params(fc)], (y if p["out_half"] else y.float())


def _emulate(g, variant, shape, order: str = "forward", code: str | None = None):
    inputs, ref = _small_case(g, shape)
    r = emu.run(emu.build(code or variant.code, sanitize=True), inputs, [(tuple(ref.shape), ref.dtype)],
                schedule=order)
    assert r.errors == [] and r.rc == 0, (g.task.id, variant.name, shape, order, r.rc, r.errors)
    assert not (r.inputs_modified or r.guards_broken or r.leaked), (g.task.id, variant.name, shape, order, r)
    verdict = compare_outputs(g.task, [ref], [torch.from_numpy(o) for o in r.outputs])
    assert verdict is None, (g.task.id, variant.name, shape, order, verdict)
    return r


_DEFAULT_EMULATED = {  # the variants with the most intricate indexing, emulated in the default run
    bmm_batched: ("register_blocked_4x4", "warp_per_output_vec4"),
    conv2d_bias_relu: ("shared_tile_four_channels", "im2col_then_gemm"),
    half_linear: ("register_blocked_4x4", "warp_per_output_shuffle"),
}


@needs_gxx
@pytest.mark.parametrize("family", FAMILIES)
def test_the_most_intricate_variants_compute_what_pytorch_computes(family):
    g = family(_other_options(family))
    for v in g.variants:
        if v.name in _DEFAULT_EMULATED[family]:
            _emulate(g, v, _SMALL[g.family][0])


def _option_cases(family) -> list[int]:
    """Indices covering every setting of every compile-time switch the variants specialise on (every layout of
    bmm_batched, every kernel, stride and padding together of conv2d_bias_relu)."""
    keys = {bmm_batched: ("trans_a", "trans_b", "bias"), conv2d_bias_relu: ("kernel", "stride", "pad", "relu"),
            half_linear: ("act", "out_half", "bias")}[family]
    chosen, seen = [], set()
    for i in range(50):
        p = family(i).params
        new = {(k, p[k]) for k in keys} - seen
        if family is bmm_batched:
            new |= {("layout", (p["trans_a"], p["trans_b"]))} - seen
        if family is conv2d_bias_relu:  # the tile's size and the halo depend on all three together
            new |= {("geometry", (p["kernel"], p["stride"], p["pad"]))} - seen
        if new:
            chosen.append(i)
            seen |= new
    return chosen


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_variant_computes_what_pytorch_computes(family):
    """Every variant of problems covering every option (layouts, kernel sizes with strides and paddings,
    activations, output dtypes, biases), at every small shape, with the threads of a block run in forward and in
    reverse order between barriers (a missing barrier shows in one of them)."""
    for index in _option_cases(family):
        g = family(index)
        for v in g.variants:
            for shape in _SMALL[g.family]:
                for order in ("forward", "reverse"):
                    _emulate(g, v, shape, order)


@needs_gxx
def test_im2col_passes_in_chunks_of_images():
    """The im2col variant bounds its scratch by processing a few images per pass: with the bound lowered, three
    images at 3 x 27 x 437 columns go in passes of two and one."""
    g = _first(conv2d_bias_relu, lambda p: p["kernel"] == 3 and p["stride"] == 1 and p["pad"] == 1)
    v = next(v for v in g.variants if v.name == "im2col_then_gemm")
    assert "(1LL << 24) / per_image" in v.code
    r = _emulate(g, v, (3, 3, 6, 19, 23), code=v.code.replace("(1LL << 24) / per_image", "(1LL << 15) / per_image"))
    assert [x["name"] for x in r.launches] == ["im2col", "gemm_col"] * 2


def _real_shapes(g, batch: int):
    """(input specs, output spec) of problem ``g`` at ``batch``: what the harness passes the fast path."""
    p, f32, f16 = g.params, torch.float32, torch.float16
    if g.family == "bmm_batched":
        m, n, k = p["m"], p["n"], p["k"]
        ins = [((batch, k, m) if p["trans_a"] else (batch, m, k), f32),
               ((batch, n, k) if p["trans_b"] else (batch, k, n), f32)] + ([((n,), f32)] if p["bias"] else [])
        return ins, ((batch, m, n), f32)
    if g.family == "conv2d_bias_relu":
        ho = (p["h"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
        wo = (p["w"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
        ins = [((batch, p["cin"], p["h"], p["w"]), f32), ((p["cout"], p["cin"], p["kernel"], p["kernel"]), f32),
               ((p["cout"],), f32)]
        return ins, ((batch, p["cout"], ho, wo), f32)
    k, n = p["in_features"], p["out_features"]
    ins = [((batch, k), f16), ((n, k), f16)] + ([((n,), f16)] if p["bias"] else [])
    return ins, ((batch, n), f16 if p["out_half"] else f32)


def _dry_check(g, batch: int) -> None:
    ins, out = _real_shapes(g, batch)
    for v in g.variants:
        r = emu.run(emu.build(v.code), ins, [out], dry=True)
        assert r.rc == 0 and r.errors == [] and r.launches, (g.task.id, batch, v.name, r.rc, r.errors)
        for x in r.launches:  # over 256 threads, registers could run out unless the kernel declares its bound
            threads = x["block"][0] * x["block"][1] * x["block"][2]
            assert threads <= 256 or (emu.bound_of(v.code, x["name"]) or 0) >= threads, (v.name, x)


def _largest(family) -> int:
    """The index whose output is the largest (its grids are the largest)."""
    sizes = [math.prod(_real_shapes(family(i), family(i).params["batch"])[1][0]) for i in range(50)]
    return int(np.argmax(sizes))


@needs_gxx
@pytest.mark.parametrize("family", FAMILIES)
def test_launches_are_valid_at_the_largest_problem(family):
    """The host code alone at the family's largest problem (both of the harness's sizes: batch_size and
    batch_size // 2 + 1): every launch within the device's limits and its __launch_bounds__, the dynamic shared
    memory opted into; every problem in the slow test below."""
    g = family(_largest(family))
    for batch in (g.params["batch"], g.params["batch"] // 2 + 1):
        _dry_check(g, batch)


@needs_gxx
@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_launches_are_valid_at_every_problem(family):
    for i in range(50):
        g = family(i)
        for batch in (g.params["batch"], g.params["batch"] // 2 + 1):
            _dry_check(g, batch)
