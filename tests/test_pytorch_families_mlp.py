"""The ``swiglu_mlp``, ``conv1d_causal`` and ``rotary_embedding`` PyTorch families: valid problems that are not
degenerate, varied across indices, deterministic, with tolerances that a float64 evaluation respects, and variants
that differ, pass the static checks and build with nvcc (their outputs are checked on the GPU).
The checks every generated family shares (registration, validity, variety, determinism) are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations


import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families.mlp import conv1d_causal, rotary_embedding, swiglu_mlp  # noqa: E402
from cudaperf.tasks.pytorch import problem_namespace  # noqa: E402
from torch_family_checks import check_and_build  # noqa: E402

FAMILIES = [swiglu_mlp, conv1d_causal, rotary_embedding]


def _first(family, pred):
    return next(family(i) for i in range(200) if pred(family(i).params))


@pytest.mark.parametrize("family,bias,params", [
    (swiglu_mlp, True, ["gate.weight", "gate.bias", "up.weight", "up.bias", "down.weight", "down.bias"]),
    (swiglu_mlp, False, ["gate.weight", "up.weight", "down.weight"]),
    (conv1d_causal, None, ["conv.weight", "conv.bias"]),
    (rotary_embedding, None, ["inv_freq"])])
def test_parameters_arrive_in_the_order_the_kernels_read_them(family, bias, params):
    g = _first(family, lambda p: bias is None or p["bias"] == bias)
    ns = problem_namespace(g.task)
    model = ns["Model"](*ns["get_init_inputs"]())
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == params
    shapes = [tuple(t.shape) for _, t in [*model.named_parameters(), *model.named_buffers()]]
    p = g.params
    if family is swiglu_mlp:
        h, i, o = p["hidden"], p["in_features"], p["out_features"]
        assert shapes == ([(h, i), (h,), (h, i), (h,), (o, h), (o,)] if bias else [(h, i), (h, i), (o, h)])
        assert f"BIAS = {'true' if bias else 'false'}" in g.variants[0].code
    elif family is conv1d_causal:
        assert shapes == [(p["channels"], 1, p["kernel"]), (p["channels"],)]
    else:
        assert shapes == [(p["d"] // 2,)] and model.inv_freq.dtype == torch.float32
        x, pos = ns["get_inputs"]()
        assert pos.dtype == torch.int64 and pos.shape == (p["seq"],) and int(pos.max()) < p["max_pos"] <= 2**24


def test_swiglu_problems_cover_biases_and_hidden_widths():
    gens = [swiglu_mlp(i) for i in range(50)]
    assert 10 <= sum(g.params["bias"] for g in gens) <= 40
    assert any(g.params["hidden"] % 16 for g in gens) and any(g.params["hidden"] % 16 == 0 for g in gens)
    assert any(g.params["in_features"] % 4 for g in gens)  # the float4 variant's scalar path


def test_conv1d_problems_cover_taps_lengths_and_the_constant_bank():
    gens = [conv1d_causal(i) for i in range(50)]
    assert {g.params["kernel"] for g in gens} == {2, 3, 4, 5, 6, 7}
    assert {g.params["act"] for g in gens} == {"silu", "none"}
    assert any(g.params["length"] % 4 for g in gens)  # the float4 variant's scalar path
    # the constant-memory variant's bank holds every problem's weights
    assert all(g.params["channels"] * g.params["kernel"] <= 8192 and g.params["channels"] <= 1024 for g in gens)


def test_conv1d_is_causal_with_the_taps_the_kernels_assume():
    """y[l] = b + sum_k w[k] x[l - (K - 1) + k]: the Model's convolution, cut to L, is that sum."""
    g = conv1d_causal(0)
    ns = problem_namespace(g.task)
    torch.manual_seed(1234)
    model = ns["Model"](*ns["get_init_inputs"]()).double().eval()
    torch.manual_seed(0)
    ns["batch_size"] = 2
    x = ns["get_inputs"]()[0].double()
    with torch.no_grad():
        y = model(x)
    k, length = g.params["kernel"], g.params["length"]
    w, b = model.conv.weight[:, 0, :], model.conv.bias
    xp = torch.nn.functional.pad(x, (k - 1, 0))
    ref = sum(w[None, :, j, None] * xp[..., j:j + length] for j in range(k)) + b[None, :, None]
    if g.params["act"] == "silu":
        ref = torch.nn.functional.silu(ref)
    assert y.shape == x.shape and torch.allclose(y, ref, atol=1e-12, rtol=1e-12)


def test_rope_problems_cover_both_layouts_and_vector_widths():
    gens = [rotary_embedding(i) for i in range(50)]
    assert 10 <= sum(g.params["interleaved"] for g in gens) <= 40
    assert {g.params["d"] for g in gens} >= {32, 64, 100, 128}
    assert any(g.params["d"] % 8 for g in gens)  # halves of odd float2 count: the float4 variant's scalar path
    assert len({g.params["base"] for g in gens}) == 3 and len({g.params["max_pos"] for g in gens}) == 3


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_rotates_the_pairs_the_kernels_assume(interleaved):
    """Pair p is (2p, 2p + 1) when interleaved, (p, p + D/2) otherwise, rotated by float32(pos) * inv_freq[p]."""
    g = _first(rotary_embedding, lambda p: p["interleaved"] == interleaved)
    ns = problem_namespace(g.task)
    model = ns["Model"]().eval()
    torch.manual_seed(0)
    ns["batch_size"] = 1
    x, pos = ns["get_inputs"]()
    with torch.no_grad():
        y = model(x, pos)
    d = g.params["d"]
    ang = (pos.to(torch.float32)[:, None] * model.inv_freq[None, :]).double()
    c, s = torch.cos(ang), torch.sin(ang)
    xd = x.double()
    i1 = torch.arange(0, d, 2) if interleaved else torch.arange(d // 2)
    i2 = i1 + 1 if interleaved else i1 + d // 2
    a, b = xd[..., i1], xd[..., i2]
    ref = torch.empty_like(xd)
    ref[..., i1], ref[..., i2] = a * c - b * s, b * c + a * s
    atol, rtol = g.task.tolerance.fp32
    assert float(((y.double() - ref).abs() / (atol + rtol * ref.abs())).max()) < 0.05
    # the buffer is the float32 inv_freq the doc describes, and angles in the thousands of radians are exercised
    base = g.params["base"]
    want = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    assert torch.equal(model.inv_freq, want) and float(ang.max()) > 100


def test_rope_float32_cos_sin_are_within_ulps_of_the_exact_ones():
    """The analysis's premise: the reference's cos/sin of a float32 angle are within a few ulps of the exact values
    of that angle (as sincosf is on the GPU), even at angles of thousands of radians."""
    for i in range(4):
        g = rotary_embedding(i)
        ns = problem_namespace(g.task)
        model = ns["Model"]()
        pos = torch.arange(0, g.params["max_pos"], 7)
        ang = pos.to(torch.float32)[:, None] * model.inv_freq[None, :]
        for f in (torch.cos, torch.sin):
            assert float((f(ang).double() - f(ang.double())).abs().max()) < 4e-7


@pytest.mark.parametrize("family", FAMILIES)
def test_float64_reference_is_within_the_tolerance(family):
    """The problem's own float32 output against a float64 evaluation: the tolerance leaves room for another
    summation order (the variants') on top of the reference's. (RoPE's angles stay float32 by the problem's
    definition; the rotation is in float64.) One sample of the batch: the errors are per element, and the CPU's
    float64 depthwise convolution is slow."""
    for index in (0, 1):
        g = family(index)
        ns = problem_namespace(g.task)
        ns["batch_size"] = 1  # get_inputs reads the module global, as in the harness's second size
        torch.manual_seed(1234)
        model = ns["Model"](*ns["get_init_inputs"]()).eval()
        torch.manual_seed(0)
        inputs = ns["get_inputs"]()
        with torch.no_grad():
            y32 = model(*inputs)
            y64 = model.double()(*[x.double() if x.is_floating_point() else x for x in inputs])
        assert y64.dtype == torch.float64
        atol, rtol = g.task.tolerance.fp32
        err = ((y32.double() - y64).abs() / (atol + rtol * y64.abs())).max()
        assert float(err) < 0.2, (g.task.id, float(err))


def _first_index(family, key, value) -> int:
    return next(i for i in range(50) if family(i).params[key] == value)


def _build_cases():
    """One problem per setting of each family's compile-time switch (biases; SiLU or none; halves or adjacent pairs):
    the first setting in the default run, the second marked slow (seven nvcc builds a case, about 15 s each on two
    busy cores)."""
    slow = pytest.mark.slow
    return [(swiglu_mlp, _first_index(swiglu_mlp, "bias", True)),
            (conv1d_causal, _first_index(conv1d_causal, "act", "silu")),
            (rotary_embedding, _first_index(rotary_embedding, "interleaved", False)),
            pytest.param(swiglu_mlp, _first_index(swiglu_mlp, "bias", False), marks=slow),
            pytest.param(conv1d_causal, _first_index(conv1d_causal, "act", "none"), marks=slow),
            pytest.param(rotary_embedding, _first_index(rotary_embedding, "interleaved", True), marks=slow)]


@pytest.mark.parametrize("family,index", _build_cases())
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))
