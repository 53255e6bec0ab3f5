"""The ``rms_norm``, ``l2_normalize_rows`` and ``batch_norm_eval`` PyTorch families: valid problems that are not
degenerate, varied across indices, deterministic, with tolerances that a float64 evaluation (and a float32
simulation of the variants' worst summation order) respects, and variants that differ, pass the static checks and
build with nvcc (their outputs are checked on the GPU).
The checks every generated family shares (registration, validity, variety, determinism) are in
``tests/test_pytorch_families_generated.py``."""

from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families.norms import batch_norm_eval, l2_normalize_rows, rms_norm  # noqa: E402
from cudaperf.harness.torch_fast import build_fast_candidate  # noqa: E402
from torch_family_checks import check_and_build, model_and_inputs  # noqa: E402

FAMILIES = [rms_norm, l2_normalize_rows, batch_norm_eval]


@pytest.mark.parametrize("family,names", [
    (rms_norm, ["weight"]), (l2_normalize_rows, []),
    (batch_norm_eval, ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"])])
def test_parameters_arrive_in_the_order_the_kernels_read_them(family, names):
    g = family(0)
    model, inputs = model_and_inputs(g)
    assert [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()] == names
    assert len(inputs) == 1  # x, then the parameters and buffers: 1, 2 and 6 kernel inputs
    if family is rms_norm:
        assert tuple(model.weight.shape) == (g.params["cols"],)


@pytest.mark.parametrize("family,attrs", [(rms_norm, ["weight"]),
                                          (batch_norm_eval, ["bn.weight", "bn.bias", "bn.running_mean",
                                                             "bn.running_var"])])
def test_init_parameters_are_drawn_deterministically(family, attrs):
    g = family(0)
    m1, _ = model_and_inputs(g, init_seed=0)
    m2, _ = model_and_inputs(g, init_seed=1)  # the harness's seed does not move them: their own generator does
    state1, state2 = m1.state_dict(), m2.state_dict()
    for a in attrs:
        assert torch.equal(state1[a], state2[a]), a
    assert not torch.equal(state1[attrs[0]], torch.ones_like(state1[attrs[0]]))
    if family is batch_norm_eval:
        assert float(state1["bn.bias"].abs().max()) > 0.1 and float(state1["bn.running_mean"].abs().max()) > 0.1
        assert not torch.equal(state1["bn.running_var"], torch.ones_like(state1["bn.running_var"]))


def test_batch_norm_uses_the_running_statistics_in_either_mode():
    g = batch_norm_eval(1)
    model, (x,) = model_and_inputs(g)
    before = model.bn.running_mean.clone()
    with torch.no_grad():
        y_eval = model(x)
        y_train = model.train()(x)
    assert torch.equal(y_eval, y_train) and torch.equal(model.bn.running_mean, before)


def test_parameters_cover_the_shapes_the_variants_must_handle():
    rms = [rms_norm(i).params for i in range(50)]
    assert {p["layout"] for p in rms} == {"2d", "3d"} and any(p["cols"] % 4 for p in rms)
    assert max(p["cols"] for p in rms) <= 4096  # four rows of shared memory: 64 KB
    l2 = [l2_normalize_rows(i).params for i in range(50)]
    assert min(p["cols"] for p in l2) <= 128 and max(p["cols"] for p in l2) >= 8192 and any(p["cols"] % 4 for p in l2)
    assert 10 <= sum(p["scale"] != 1.0 for p in l2) <= 40 and max(p["cols"] for p in l2) <= 16384
    bn = [batch_norm_eval(i).params for i in range(50)]
    assert 5 <= sum(p["act"] is None for p in bn) <= 35 and len({p["act"] for p in bn}) >= 5
    assert any(p["size"] % 2 for p in bn) and max(p["channels"] for p in bn) <= 1024
    assert max(p["batch"] * p["channels"] for p in bn) <= 65535


def _error_ratio(g, y, y64) -> float:
    atol, rtol = g.task.tolerance.fp32
    return float(((y.double() - y64).abs() / (atol + rtol * y64.abs())).max())


@pytest.mark.parametrize("family", FAMILIES)
def test_float64_reference_is_within_the_tolerance(family):
    """The problem's own float32 output against a float64 evaluation: the tolerance leaves room for another
    summation order (the variants') on top of the reference's."""
    for index in (0, 1):
        g = family(index)
        model, inputs = model_and_inputs(g)
        with torch.no_grad():
            y32 = model(*inputs)
            y64 = model.double()(*[x.double() for x in inputs])
        assert _error_ratio(g, y32, y64) < 0.2, (g.task.id, _error_ratio(g, y32, y64))


@pytest.mark.parametrize("family", [rms_norm, l2_normalize_rows])
def test_a_sequential_float32_sum_of_squares_is_within_the_tolerance(family):
    """The worst order a variant sums in (a thread per row: one float32 running sum over the row) against float64:
    the statistic's error is what moves every output of the row."""
    for index in (0, 1, 2):
        g = family(index)
        model, (x,) = model_and_inputs(g)
        x = x[:256] if x.dim() == 2 else x[:1]  # rows are independent: a few hundred are enough
        with torch.no_grad():
            y64 = model.double()(x.double())
        cols = x.shape[-1]
        x32 = x.reshape(-1, cols).numpy()
        ss = np.cumsum(x32 * x32, axis=1, dtype=np.float32)[:, -1:]  # sequential, in float32
        if family is rms_norm:
            w = model.weight.detach().float().numpy()
            y = x32 * (np.float32(1) / np.sqrt(ss / np.float32(cols) + np.float32(g.params["eps"]))) * w
        else:
            y = x32 * (np.float32(g.params["scale"]) / np.maximum(np.sqrt(ss), np.float32(g.params["eps"])))
        ratio = _error_ratio(g, torch.from_numpy(y).reshape(x.shape), y64)
        assert ratio < 0.2, (g.task.id, ratio)


def test_batch_norm_in_the_variants_form_is_within_the_tolerance():
    """The variants compute act((x - mean) * (w * rsqrt(var + eps)) + bias) in float32; PyTorch folds the constants
    differently."""
    from cudaperf.dataset.pytorch_families.common import ACTIVATIONS

    for index in range(4):
        g = batch_norm_eval(index)
        model, (x,) = model_and_inputs(g)
        x = x[:2]  # every channel, two samples
        bn = model.bn
        shape = (1, -1, 1, 1)
        with torch.no_grad():
            a = (bn.weight * torch.rsqrt(bn.running_var + bn.eps)).reshape(shape)
            v = (x - bn.running_mean.reshape(shape)) * a + bn.bias.reshape(shape)
            act = g.params["act"]
            y = eval(ACTIVATIONS[act][0].format(v="v"), {"torch": torch, "v": v}) if act else v
            y64 = model.double()(x.double())
        assert _error_ratio(g, y, y64) < 0.2, (g.task.id, _error_ratio(g, y, y64))


@pytest.mark.parametrize("family,variant", [(rms_norm, "four_rows_per_block"),
                                            (l2_normalize_rows, "split_rows_atomics"),
                                            (batch_norm_eval, "constants_in_constant_memory")])
def test_the_variant_with_the_most_host_calls_builds(family, variant):
    """One build per family in the default run (a build is ~10 s on two cores): the variant with dynamic shared
    memory, atomics with scratch, or constant memory; every variant builds in the slow test below."""
    v = next(v for v in family(0).variants if v.name == variant)
    b = build_fast_candidate(v.code)
    assert b.stage == "ok", (v.name, b.info.log[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("family,index", [(f, i) for f in FAMILIES for i in (0, 1, 2)])
def test_every_variant_passes_the_checks_and_builds(family, index):
    check_and_build(family(index))
