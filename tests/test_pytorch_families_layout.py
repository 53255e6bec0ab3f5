"""The ``transpose_scale``, ``upsample_bilinear`` and ``pixel_shuffle`` PyTorch families: valid problems of the sizes
and settings the variants must handle, tolerances that a float64 evaluation (and, for the bilinear coordinates, a
float32 simulation of both roundings) respects, and variants that differ, pass the static checks, build with nvcc,
launch within the CUDA runtime's limits at every problem's full size, and give the reference's outputs when run on
the CPU emulator (``tests/cuda_cpu_emulator.py``) on small problems with the same constants: odd shapes, partial
tiles, float4 paths and their scalar fallbacks, both thread orders at barriers, tensors between guard zones under
AddressSanitizer and UndefinedBehaviorSanitizer, inputs unchanged. Their outputs on a GPU are checked there.
The checks every generated family shares (registration, validity, variety, determinism) are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import cuda_cpu_emulator as emu  # noqa: E402
from cudaperf.dataset.pytorch_families.layout import (_pixel_task, _transpose_task, _up_out,  # noqa: E402
                                                      _upsample_task, pixel_shuffle, transpose_scale,
                                                      upsample_bilinear)
from cudaperf.harness.torch_fast import build_fast_candidate  # noqa: E402
from cudaperf.tasks.pytorch import problem_namespace  # noqa: E402
from torch_family_checks import check_and_build, model_and_inputs  # noqa: E402

FAMILIES = [transpose_scale, upsample_bilinear, pixel_shuffle]
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU emulator needs g++")


def _first(family, pred) -> int:
    return next(i for i in range(200) if pred(family(i).params))


def _full_size(g, batch: int):
    """The input shapes (with the parameters after them) and the output shape at ``batch``, without computing."""
    ns = problem_namespace(g.task)
    ns["batch_size"] = batch
    with torch.device("meta"):
        inputs = ns["get_inputs"]()
    model = ns["Model"](*ns["get_init_inputs"]()).to("meta")
    with torch.no_grad():
        y = model(*inputs)
    return [tuple(t.shape) for t in [*inputs, *model.parameters(), *model.buffers()]], tuple(y.shape)


def _sizes(g) -> list[int]:
    b = g.params["batch"]
    return [b, b // 2 + 1]  # the harness's two sizes (cudaperf.harness.pytorch_reference)


# ---------------------------------------------------------------------------------------------------------------
# parameters and problems


def test_transpose_parameters_and_settings():
    gens = [transpose_scale(i) for i in range(50)]
    assert {g.params["layout"] for g in gens} == {"2d", "3d"}
    assert {g.params["bias"] for g in gens} == {"none", "scalar", "column"}
    assert 5 <= sum(g.params["act"] is None for g in gens) <= 35 and len({g.params["act"] for g in gens}) >= 5
    assert any(g.params["scale"] < 0 for g in gens)
    # the float4 variants' two paths: whole float4 rows in both directions, or not
    assert any(g.params["rows"] % 4 == 0 and g.params["cols"] % 4 == 0 for g in gens)
    assert any(g.params["cols"] % 4 for g in gens) and any(g.params["rows"] % 32 for g in gens)
    g = next(g for g in gens if g.params["bias"] == "column")
    model, _ = model_and_inputs(g, batch=2)
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == ["bias"]
    assert tuple(model.bias.shape) == (g.params["cols"],)
    m2 = problem_namespace(g.task)["Model"]()  # drawn from its own generator, not the harness's seed
    assert torch.equal(model.bias, m2.bias) and float(model.bias.detach().abs().max()) > 0.5
    for g in gens:
        if g.params["bias"] != "column":
            assert not list(model_and_inputs(g, batch=1)[0].parameters())


def test_upsample_parameters_and_settings():
    gens = [upsample_bilinear(i) for i in range(50)]
    assert {g.params["align_corners"] for g in gens} == {True, False}
    assert {g.params["mode"] for g in gens} == {"scale", "size"}
    assert {g.params["scale_factor"] for g in gens} >= {1.5, 2.0, 2.5, 3.0, 4.0}
    assert max(max(g.params["height"], g.params["width"]) for g in gens) <= 256  # the tolerance's premise
    assert any(g.params["out_width"] % 4 for g in gens) and any(g.params["out_width"] % 4 == 0 for g in gens)
    # a scale factor whose product with the input is not whole: 1 / scale and in / out differ
    assert any(g.params["mode"] == "scale" and g.params["height"] * g.params["scale_factor"] % 1 for g in gens)
    for g in gens:
        assert (g.params["mode"] == "scale") == ("scale_factor=" in g.task.source)
        assert not list(model_and_inputs(g, batch=1)[0].parameters())


def test_pixel_shuffle_parameters_and_settings():
    gens = [pixel_shuffle(i) for i in range(50)]
    assert {(g.params["op"], g.params["factor"]) for g in gens} == {(o, r) for o in ("shuffle", "unshuffle")
                                                                     for r in (2, 3, 4)}
    assert 5 <= sum(g.params["act"] is None for g in gens) <= 35
    assert any(g.params["width"] % 4 for g in gens) and any(g.params["width"] % 4 == 0 for g in gens)
    for g in gens[:6]:
        model, _ = model_and_inputs(g, batch=1)
        assert not list(model.parameters()) and not list(model.buffers())


_ELEMENTS = {transpose_scale: (2**23, 2**25), upsample_bilinear: (2**24, 2**26), pixel_shuffle: (2**23, 3 * 2**24)}


@pytest.mark.parametrize("family", FAMILIES)
def test_problems_are_sized_for_the_gpu(family):
    """At the first size, 8M to 32M elements through eager's two to four kernels (transpose), 16M to 64M outputs of
    one kernel (resampling), 8M to 48M elements through one or two (pixel shuffle): 64 MB or more of traffic, tens of
    microseconds to a fraction of a millisecond on an H200; inputs at most 256 MB at both sizes; the shapes the
    family's parameters describe."""
    lo, hi = _ELEMENTS[family]
    for i in range(50):
        g = family(i)
        p = g.params
        for k, b in enumerate(_sizes(g)):
            ins, out = _full_size(g, b)
            assert math.prod(ins[0]) * 4 <= 256 * 2**20
            if k == 0:
                assert lo <= max(math.prod(ins[0]), math.prod(out)) <= hi, (g.task.id, ins, out)
            if family is transpose_scale:
                assert out == ins[0][:-2] + (p["cols"], ins[0][-2])
            elif family is upsample_bilinear:
                assert out == (b, p["channels"], p["out_height"], p["out_width"])
            else:
                r, c, h, w = p["factor"], p["channels"], p["height"], p["width"]
                low, high = (b, c * r * r, h, w), (b, c, h * r, w * r)
                assert (ins[0], out) == ((low, high) if p["op"] == "shuffle" else (high, low))


# ---------------------------------------------------------------------------------------------------------------
# tolerances


def _ratio(g, y, y64) -> float:
    atol, rtol = g.task.tolerance.fp32
    return float(((y.double() - y64).abs() / (atol + rtol * y64.abs())).max())


@pytest.mark.parametrize("family", FAMILIES)
def test_float64_reference_is_within_the_tolerance(family):
    """The problem's own float32 output against a float64 evaluation (for the bilinear resampling, coordinates in
    float64 too: half an ulp from the float32 ones), at one sample and a few channels."""
    for index in (0, 1, 2):
        g = family(index)
        model, inputs = model_and_inputs(g, batch=1)
        x = inputs[0]
        if family is upsample_bilinear:
            x = x[:, :4].contiguous()
        with torch.no_grad():
            y32 = model(x)
            y64 = model.double()(x.double())
        assert _ratio(g, y32, y64) < 0.2, (g.task.id, _ratio(g, y32, y64))


def _coords(n_in: int, n_out: int, align: bool, sf: float | None, fused: bool):
    """Taps and weights along an axis as the variants compute them in float32, the coordinate rounded once (an fma)
    or twice."""
    f32 = np.float32
    if align:
        step = f32(n_in - 1) / f32(n_out - 1) if n_out > 1 else f32(0)
    else:
        step = f32(1.0 / sf) if sf else f32(n_in) / f32(n_out)
    d = np.arange(n_out).astype(f32)
    if align:
        s = step * d
    elif fused:
        s = (np.float64(step) * (d.astype(np.float64) + 0.5) - 0.5).astype(f32)
    else:
        s = (step * (d + f32(0.5))).astype(f32) - f32(0.5)
    s = np.maximum(s, f32(0))
    i0 = np.minimum(s.astype(np.int64), n_in - 1)
    return i0, i0 + (i0 < n_in - 1), (s - i0.astype(f32)).astype(f32)


def _bilinear(x: np.ndarray, ho: int, wo: int, align: bool, sf: float | None, fused: bool = False) -> np.ndarray:
    h0, h1, lh = _coords(x.shape[-2], ho, align, sf, fused)
    w0, w1, lw = _coords(x.shape[-1], wo, align, sf, fused)
    lh, lw, one = lh[:, None], lw[None, :], np.float32(1)
    a, b = x[..., h0, :][..., w0], x[..., h0, :][..., w1]
    c, d = x[..., h1, :][..., w0], x[..., h1, :][..., w1]
    return (one - lh) * ((one - lw) * a + lw * b) + lh * ((one - lw) * c + lw * d)


def test_bilinear_coordinates_rounded_once_or_twice_stay_within_the_tolerance():
    """The tolerance's premise: whether ``step * (d + 0.5) - 0.5`` is contracted into an fma (PyTorch's kernel or a
    variant, as nvcc decides) moves outputs by a few 1e-5 on the largest planes; both stay within a fifth of the
    tolerance of the problem's reference."""
    worst = 0.0
    for i in range(50):
        g = upsample_bilinear(i)
        p = g.params
        if p["align_corners"] or max(p["height"], p["width"]) < 128:
            continue  # align_corners has a single product (no contraction); small planes round less
        model, (x,) = model_and_inputs(g, batch=1)
        x = x[:, :2].contiguous()
        with torch.no_grad():
            ref = model(x).double()
        sf = p["scale_factor"]
        for fused in (False, True):
            y = torch.from_numpy(_bilinear(x.numpy(), p["out_height"], p["out_width"], False, sf, fused))
            worst = max(worst, _ratio(g, y, ref))
    assert 0.0 < worst < 0.2, worst


def test_bilinear_steps_are_one_over_the_scale_factor_not_in_over_out():
    """PyTorch's rule the variants reproduce: with a scale factor (and no align_corners) the step is 1 / scale, which
    for 1.5 and an odd input is not in / out; with a size it is in / out."""
    i = _first(upsample_bilinear, lambda p: p["mode"] == "scale" and not p["align_corners"]
               and p["height"] * p["scale_factor"] % 1)
    g = upsample_bilinear(i)
    p = g.params
    model, (x,) = model_and_inputs(g, batch=1)
    x = x[:, :2].contiguous()
    with torch.no_grad():
        ref = model(x).double()
    good = torch.from_numpy(_bilinear(x.numpy(), p["out_height"], p["out_width"], False, p["scale_factor"]))
    bad = torch.from_numpy(_bilinear(x.numpy(), p["out_height"], p["out_width"], False, None))
    assert _ratio(g, good, ref) < 0.2 and _ratio(g, bad, ref) > 10
    for align in (True, False):  # and the two conventions of align_corners differ
        j = _first(upsample_bilinear, lambda q: q["mode"] == "size" and q["align_corners"] == align)
        h = upsample_bilinear(j)
        q = h.params
        model, (x,) = model_and_inputs(h, batch=1)
        x = x[:, :2].contiguous()
        with torch.no_grad():
            ref = model(x).double()
        for a in (True, False):
            y = torch.from_numpy(_bilinear(x.numpy(), q["out_height"], q["out_width"], a, None))
            assert (_ratio(h, y, ref) < 0.2) == (a == align)


# ---------------------------------------------------------------------------------------------------------------
# variants: launches, static checks, builds


@pytest.mark.parametrize("family,variant", [(transpose_scale, "tile_float4"),
                                            (upsample_bilinear, "row_coefficients_shared"),
                                            (pixel_shuffle, "float4_rows")])
def test_the_variant_with_the_most_host_logic_builds(family, variant):
    """One nvcc build per family in the default run (about 10 s each on two cores): the variant with two kernels or
    dynamic shared memory; every variant of two problems builds in the slow test below."""
    v = next(v for v in family(0).variants if v.name == variant)
    b = build_fast_candidate(v.code)
    assert b.stage == "ok", (v.name, b.info.log[-2000:])


def _build_cases():
    """Problems covering each family's compile-time switches: transpose with a column bias and without one (the
    number of inputs), both directions of the pixel shuffle, both align_corners of the resampling."""
    return [(transpose_scale, _first(transpose_scale, lambda p: p["bias"] == "column")),
            (transpose_scale, _first(transpose_scale, lambda p: p["bias"] == "none" and p["act"])),
            (upsample_bilinear, _first(upsample_bilinear, lambda p: p["align_corners"])),
            (upsample_bilinear, _first(upsample_bilinear, lambda p: not p["align_corners"])),
            (pixel_shuffle, _first(pixel_shuffle, lambda p: p["op"] == "shuffle")),
            (pixel_shuffle, _first(pixel_shuffle, lambda p: p["op"] == "unshuffle"))]


@pytest.mark.slow
@pytest.mark.parametrize("family,index", _build_cases())
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))


# ---------------------------------------------------------------------------------------------------------------
# variants on the CPU emulator

def _launch_key(g) -> tuple:
    """What a variant's launches depend on besides the shapes: the number of inputs (transpose), the direction and
    the factor (pixel shuffle); the other constants (scale, bias, activation, align_corners, scale factor) only
    enter the arithmetic."""
    p = g.params
    if g.family == "transpose_scale":
        return (p["bias"] == "column",)
    return (p["op"], p["factor"]) if g.family == "pixel_shuffle" else ()


def _dry_run_family(family, indices) -> int:
    groups: dict[tuple, list] = {}
    for i in indices:
        g = family(i)
        groups.setdefault(_launch_key(g), []).append(g)
    runs = 0
    for gens in groups.values():
        exe = emu.build([v.code for v in gens[0].variants])
        for g in gens:
            for b in _sizes(g):
                ins, out = _full_size(g, b)
                for k, v in enumerate(gens[0].variants):
                    r = emu.run(exe, [(s, "float32") for s in ins], [(out, "float32")], unit=k, dry=True)
                    assert r.rc == 0 and not r.errors and r.launches, (g.task.id, b, v.name, r.log)
                    runs += 1
    return runs


@needs_gxx
@pytest.mark.parametrize("family", FAMILIES)
def test_every_problem_launches_within_the_runtime_limits_at_full_size(family):
    """kernel_forward of every variant on the first 50 problems' full-size shapes, at both of the harness's sizes,
    without running the kernels: every launch's grid (y and z at most 65535), block, dynamic shared memory and
    launch bounds are accepted, and no size makes a variant give up (return 3)."""
    assert _dry_run_family(family, range(50)) >= 50 * 2 * 6


_SMALL = {  # shapes small enough to emulate; odd sizes, partial tiles, whole float4 rows, single rows
    "2d": [(33, 68), (40, 36), (1, 7)],            # (rows = batch, cols)
    "3d": [(3, 37, 45), (2, 36, 100), (2, 5, 1)],  # (batch, rows, cols)
    "up": [(2, 3, 7, 9), (1, 2, 14, 17), (1, 1, 5, 8), (1, 2, 3, 32)],  # (n, c, h, w)
    "ps": [(2, 3, 5, 7), (1, 2, 4, 8), (2, 1, 3, 4), (1, 1, 1, 12)],   # (n, c, h, w) of the low resolution
}


def _small_tasks(family, index):
    """Problems with the constants of problem ``index`` (so the same variant code) and small shapes."""
    p = dict(family(index).params)
    if family is transpose_scale:
        for shape in _SMALL[p["layout"]]:
            if p["layout"] == "2d":
                p.update(batch=shape[0], rows=shape[0], cols=shape[1])
            else:
                p.update(batch=shape[0], rows=shape[1], cols=shape[2])
            yield _transpose_task(index, dict(p))
    elif family is upsample_bilinear:
        for n, c, h, w in _SMALL["up"]:
            if p["mode"] == "scale":
                ho, wo = _up_out(h, w, ("scale", p["scale_factor"]))
            else:  # the problem's ratios, on the small plane
                ho, wo = round(h * p["out_height"] / p["height"]), round(w * p["out_width"] / p["width"])
            p.update(batch=n, channels=c, height=h, width=w, out_height=ho, out_width=wo)
            yield _upsample_task(index, dict(p))
    else:
        for n, c, h, w in _SMALL["ps"]:
            p.update(batch=n, channels=c, height=h, width=w)
            yield _pixel_task(index, dict(p))


# the kernel a variant launches when its float4 path applies, and the one it falls back on
_VEC_KERNELS = {"tile_float4": ("tr_tile_vec4", "tr_tile32x8"), "registers_4x4_float4": ("tr_reg4x4<true>",
                                                                                          "tr_reg4x4<false>"),
                "float4_rows": ("ps_vec4", "ps_site_block")}


def _vec_applies(g) -> bool:
    p = g.params
    if g.family == "transpose_scale":
        return p["rows"] % 4 == 0 and p["cols"] % 4 == 0
    if g.family == "pixel_shuffle":
        return p["width"] % 4 == 0
    return p["out_width"] % 4 == 0


def _emulate_problem(family, index):
    base = family(index)
    exe = emu.build([v.code for v in base.variants], sanitize=True)
    checked = 0
    for g in _small_tasks(family, index):
        assert [v.code for v in g.variants] == [v.code for v in base.variants]  # the same units
        model, inputs = model_and_inputs(g)
        with torch.no_grad():
            y = model(*inputs)
        arrays = [t.detach().numpy() for t in [*inputs, *model.parameters(), *model.buffers()]]
        atol, rtol = g.task.tolerance.fp32
        for k, v in enumerate(g.variants):
            orders = ("forward", "reverse") if "__syncthreads" in v.code else ("forward",)
            aligns = (False, True) if "& 15" in v.code else (False,)  # a float4 path and its scalar fallback
            for order in orders:
                for misalign in aligns:
                    r = emu.run(exe, arrays, [(tuple(y.shape), "float32")], unit=k, schedule=order,
                                misalign=misalign)
                    what = (g.task.id, g.params, v.name, order, misalign)
                    assert r.clean, (what, r.inputs_modified, r.guards_broken, r.leaked, r.log)
                    err = np.abs(r.outputs[0].astype(np.float64) - y.numpy())
                    assert bool((err <= atol + rtol * np.abs(y.numpy())).all()), (what, float(np.nanmax(err)))
                    if v.name in _VEC_KERNELS:
                        fast, slow = _VEC_KERNELS[v.name]
                        want = fast if _vec_applies(g) and not misalign else slow
                        assert r.launches and all(x["name"] == want for x in r.launches), (what, r.launches)
                    checked += 1
    return checked


def _emulation_cases():
    """Problems covering every compile-time switch of a family; the first of each family in the default run (each
    case builds one program of all the variants under the sanitizers, 5 to 20 s on two cores)."""
    slow = pytest.mark.slow
    tr = [_first(transpose_scale, lambda p, b=b, lay=lay: p["bias"] == b and p["layout"] == lay)
          for b, lay in (("column", "3d"), ("scalar", "2d"), ("none", "3d"))]
    up = [_first(upsample_bilinear, lambda p, a=a, m=m, f=f: p["align_corners"] == a and p["mode"] == m
                 and (p["scale_factor"] or 1) % 1 == f)  # a scale factor of 1.5 or 2.5 first: 1 / s is not in / out
          for a, m, f in ((False, "scale", 0.5), (True, "size", 0), (True, "scale", 0), (False, "size", 0),
                          (False, "scale", 0))]
    ps = [_first(pixel_shuffle, lambda p, o=o, r=r: p["op"] == o and p["factor"] == r)
          for o, r in (("shuffle", 3), ("unshuffle", 2), ("shuffle", 2), ("shuffle", 4), ("unshuffle", 3),
                       ("unshuffle", 4))]
    cases = []
    for family, indices in ((transpose_scale, tr), (upsample_bilinear, up), (pixel_shuffle, ps)):
        cases += [pytest.param(family, i, marks=() if k == 0 else slow, id=f"{family.__name__}-{i}")
                  for k, i in enumerate(indices)]
    return cases


@needs_gxx
@pytest.mark.parametrize("family,index", _emulation_cases())
def test_every_variant_matches_the_reference_on_the_emulator(family, index):
    assert _emulate_problem(family, index) >= 3 * len(family(index).variants)
