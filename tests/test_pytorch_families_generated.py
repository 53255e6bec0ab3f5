"""What every PyTorch family written for issue 28 must hold, whatever it computes: registered and (until its GPU
check) not shipped; valid problems that are not degenerate, varied across indices (different shapes, not only
different constants) and deterministic; 6 to 8 distinct variants, each with tags of its own, launching on the given
stream and differently from the others, and past the fast path's static checks. Each family's own tests (its parameters, inputs,
tolerances, launches and builds) are in ``tests/test_pytorch_families_<module>.py``."""

from __future__ import annotations

import ast
import re

import pytest

pytest.importorskip("torch")

from cudaperf.dataset.pytorch_families import NOT_YET_SHIPPED, TORCH_FAMILIES  # noqa: E402
from cudaperf.dataset.pytorch_families.common import task_id  # noqa: E402
from cudaperf.harness.static_checks import strip_comments_and_strings  # noqa: E402
from cudaperf.harness.torch_fast import check_fast_candidate  # noqa: E402
from cudaperf.tasks.pytorch import degenerate_reasons  # noqa: E402

SHAPE_KEYS = {  # the parameters that make a problem's shape, per family
    "gelu_mlp": ("batch", "in_features", "hidden", "out_features"),
    "group_norm": ("batch", "channels", "groups", "size"),
    "scaled_dot_attention": ("batch", "heads", "lq", "lk", "d"),
    "rms_norm": ("layout", "batch", "seq", "rows", "cols"),
    "l2_normalize_rows": ("layout", "batch", "seq", "rows", "cols"),
    "batch_norm_eval": ("batch", "channels", "size"),
    "cross_entropy_loss": ("batch", "classes"),
    "masked_softmax": ("batch", "length"),
    "embedding_bag_mean": ("batch", "bag", "vocab", "dim"),
    "swiglu_mlp": ("batch", "in_features", "hidden", "out_features"),
    "conv1d_causal": ("batch", "channels", "length", "kernel"),
    "rotary_embedding": ("batch", "heads", "seq", "d"),
    "transpose_scale": ("layout", "batch", "rows", "cols"),
    "upsample_bilinear": ("batch", "channels", "height", "width", "out_height", "out_width"),
    "pixel_shuffle": ("op", "factor", "batch", "channels", "height", "width"),
    "index_add_rows": ("rows", "index_len", "dim", "layout"),
    "topk_rows": ("batch", "heads", "length", "k"),
    "histc_bins": ("batch", "widths", "bins"),
    "bmm_batched": ("batch", "m", "n", "k"),
    "conv2d_bias_relu": ("batch", "cin", "cout", "h", "w", "kernel", "stride", "pad"),
    "half_linear": ("batch", "in_features", "out_features"),
}
FAMILIES = sorted(SHAPE_KEYS)


def test_the_families_are_registered_and_not_yet_shipped():
    for name in FAMILIES:
        assert TORCH_FAMILIES[name].__name__ == name and name in NOT_YET_SHIPPED


@pytest.mark.parametrize("name", FAMILIES)
def test_problems_are_valid_varied_and_not_degenerate(name):
    family = TORCH_FAMILIES[name]
    gens = [family(i) for i in range(6)]
    assert len({g.task.source for g in gens}) == 6 and len({str(g.params) for g in gens}) == 6
    for i, g in enumerate(gens):
        assert g.task.id == task_id(name, i) and g.family == name and g.index == i
        names = {n.name for n in ast.parse(g.task.source).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= names
        assert 6 <= len(g.variants) <= 8 and len({v.code for v in g.variants}) == len(g.variants)
        assert len({v.name for v in g.variants}) == len(g.variants)
    for g in gens[:3]:
        assert degenerate_reasons(g.task) == [], (g.task.id, g.params)


@pytest.mark.parametrize("name", FAMILIES)
def test_fifty_problems_are_mostly_distinct(name):
    gens = [TORCH_FAMILIES[name](i) for i in range(50)]
    assert len({g.task.source for g in gens}) >= 0.75 * 50
    assert all(any(k in g.params for k in SHAPE_KEYS[name]) for g in gens), "no shape key among the parameters"
    shapes = {tuple(g.params.get(k) for k in SHAPE_KEYS[name]) for g in gens}
    assert len(shapes) >= 0.75 * 50  # different problems, not only different constants


@pytest.mark.parametrize("name", FAMILIES)
def test_problems_are_deterministic_by_index(name):
    a, b = TORCH_FAMILIES[name](2), TORCH_FAMILIES[name](2)
    assert a.task.source == b.task.source and a.params == b.params and a.task.tolerance == b.task.tolerance
    assert [(v.name, v.tags, v.code) for v in a.variants] == [(v.name, v.tags, v.code) for v in b.variants]


_LAUNCH = re.compile(r"(\w+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>", re.S)
_CONSTANT = re.compile(r"(?:constexpr\s+\w+\s+(\w+)\s*=\s*([^;]+);|#define\s+(\w+)\s+(\S+))")


def _launch_signature(code: str) -> tuple:
    """A variant's launches (kernel, configuration) and its named constants (a padding or tile width can be the
    only difference between two strategies' launches, as with transpose tiles with and without the +1 padding)."""
    text = strip_comments_and_strings(code)
    launches = _LAUNCH.findall(text)
    assert launches and all("stream" in cfg for _, cfg in launches), "every launch on the given stream"
    return (tuple((name, " ".join(cfg.split())) for name, cfg in launches),
            tuple(sorted((a or c, " ".join((b or d).split())) for a, b, c, d in _CONSTANT.findall(text))))


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("index", [0, 1])
def test_variants_launch_differently_and_pass_the_static_checks(name, index):
    g = TORCH_FAMILIES[name](index)
    signatures = [_launch_signature(v.code) for v in g.variants]
    assert len(set(signatures)) == len(signatures), [v.name for v in g.variants]
    assert len({frozenset(v.tags) for v in g.variants}) == len(g.variants)
    for v in g.variants:
        chk = check_fast_candidate(v.code)
        assert chk.ok, (name, index, v.name, chk.reasons)
