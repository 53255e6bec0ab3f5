"""The paper-tier structural features (PAPER-SPEC §2) on small kernels whose values are known by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("tree_sitter_cuda")

from cudaperf.features import (  # noqa: E402
    PAPER_FEATURES,
    FeatureNormalizer,
    PaperFeatureSettings,
    extract_paper_features,
    features_to_json,
)
from cudaperf.features.paper import FEATURE_FUNCTIONS, coal_score, occ_score  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def kernel(body: str, params: str = "const float* a, float* b, int n, int s") -> str:
    """A one-kernel source with the usual global index ``i``."""
    return (f"__global__ void k({params}) {{\n"
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}\n}}\n")


def launch(block: str, prelude: str = "") -> str:
    """A source with an empty kernel and one launch whose block argument is ``block``."""
    return (f"{prelude}\n__global__ void k(float* a) {{ }}\n"
            f"void host(float* a, int n) {{\n  k<<<(n + 255) / 256, {block}>>>(a);\n}}\n")


def feats(src: str) -> dict[str, float]:
    return extract_paper_features(src).values


# ---------------------------------------------------------------------------------------------------- coal
@pytest.mark.parametrize("access, expected", [
    ("b[i] = 1.0f;", 1.0),
    ("b[i * 2] = 1.0f;", 0.4),
    ("b[2 * i + 1] = 1.0f;", 0.4),
    ("b[i * 4] = 1.0f;", 0.1),
    ("b[i << 2] = 1.0f;", 0.1),
    ("b[i * 32] = 1.0f;", -0.5),
    ("b[0] = 1.0f;", 0.2),
    ("b[blockIdx.x] = 1.0f;", 0.2),
    ("b[i * s] = 1.0f;", 0.0),
    ("b[i * 3] = 1.0f;", 0.0),
])
def test_coal_single_access(access, expected):
    assert feats(kernel(access))["coal"] == pytest.approx(expected)


def test_coal_follows_locals_and_constants():
    src = "#define STRIDE 2\nconstexpr int W = 16;\n" + kernel(
        "  int j = i * STRIDE; int tx = threadIdx.x; int row = blockIdx.y * W;\n"
        "  b[j] = a[row + tx];")
    fv = extract_paper_features(src)
    strides = [a["stride"] for a in fv.per_kernel[0]["accesses"]]
    assert sorted(strides) == [1.0, 2.0]
    assert fv.values["coal"] == pytest.approx((1.0 + 0.4) / 2)


def test_coal_gather_and_grid_stride_loop():
    src = kernel("  for (int j = i; j < n; j += blockDim.x * gridDim.x) b[j] = a[(int)a[j]];")
    per = extract_paper_features(src).per_kernel[0]["accesses"]
    by_expr = {a["expr"]: a["stride"] for a in per}
    assert by_expr["b[j]"] == 1.0 and by_expr["a[j]"] == 1.0
    assert by_expr["a[(int)a[j]]"] is None  # an indirect index is unresolved


def test_shared_and_local_arrays_are_not_global():
    src = kernel("  __shared__ float t[256]; extern __shared__ float dyn[]; float loc[4];\n"
                 "  t[threadIdx.x * 32] = a[i]; dyn[threadIdx.x * 8] = 0; loc[0] = t[0];\n"
                 "  b[i] = loc[0] + dyn[0];")
    fv = extract_paper_features(src)
    assert fv.values["coal"] == 1.0
    assert fv.values["gmem_access"] == 2  # a[i], b[i]
    assert fv.per_kernel[0]["subscripts"] == 8


def test_derived_pointer_keeps_offset():
    src = kernel("  const float* row = a + blockIdx.y * n; float* out = &b[4 * threadIdx.x];\n"
                 "  out[0] = row[threadIdx.x];")
    strides = sorted(a["stride"] for a in extract_paper_features(src).per_kernel[0]["accesses"])
    assert strides == [1.0, 4.0, 4.0]  # `&b[...]` is itself a (syntactic) subscript access


# ---------------------------------------------------------------------------------------------------- tpb / occ
@pytest.mark.parametrize("prelude, block, tpb, occ", [
    ("", "64", 64, 0.4),
    ("", "256", 256, 1.0),
    ("", "1024", 1024, -0.3),
    ("", "dim3(16, 16)", 256, 1.0),
    ("", "dim3(8, 8, 1)", 64, 0.4),
    ("#define BS 1024", "BS", 1024, -0.3),
    ("#define BS (32 * 2)", "BS", 64, 0.4),
    ("constexpr int BS = 256;", "BS", 256, 1.0),
    ("const int BS = 128, H = BS / 2;", "H", 64, 0.4),
    ("enum { BS = 512 };", "BS", 512, 0.4),
])
def test_tpb_and_occ(prelude, block, tpb, occ):
    v = feats(launch(block, prelude))
    assert v["tpb"] == tpb and v["occ"] == occ


def test_tpb_dim3_variable_and_local_and_mean():
    src = ("#define T 32\n__global__ void k(float* a) { }\n"
           "void host(float* a, int n) {\n"
           "  dim3 block(T, 8), grid((n + T - 1) / T);\n  k<<<grid, block>>>(a);\n"
           "  int threads = 64; k<<<n / threads, threads>>>(a);\n"
           "  dim3 b2; b2.x = 128; k<<<1, b2>>>(a);\n}\n")
    fv = extract_paper_features(src)
    assert [launch["tpb"] for launch in fv.launches] == [256, 64, 128]
    assert fv.values["tpb"] == pytest.approx((256 + 64 + 128) / 3)


def test_tpb_unresolvable_is_nan_with_reason():
    fv = extract_paper_features(launch("nt").replace("int n)", "int n, int nt)"))
    assert math.isnan(fv.values["tpb"]) and math.isnan(fv.values["occ"])
    assert "nt" in fv.reasons["tpb"] and "tpb unknown" in fv.reasons["occ"]


def test_occ_bands():
    assert [occ_score(t) for t in (32, 63, 64, 127, 128, 256, 257, 512, 513)] == \
        [-0.3, -0.3, 0.4, 0.4, 1.0, 1.0, 0.4, 0.4, -0.3]


# ---------------------------------------------------------------------------------------------------- xfer
def _host(body: str) -> str:
    return "__global__ void k(float* a) { }\nvoid host(float* h, float* d, size_t n) {\n" + body + "\n}\n"


def test_xfer_counts_copies_and_loops():
    two = "cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);"
    assert feats(_host(two))["xfer"] == 0.0  # 2 free copies, none in loops, not pinned
    loop = "for (int it = 0; it < 10; ++it) { cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); }\n" + two
    assert feats(_host(loop))["xfer"] == -1.0 - 1.0  # 3 copies (1 over), one in a loop
    assert feats(_host("int x = 0;"))["xfer"] == 1.0  # no copies: I_efficient = 1


def test_xfer_pinned_and_async_are_efficient():
    pinned = "float* p; cudaMallocHost(&p, n); cudaMemcpy(d, p, n, cudaMemcpyHostToDevice);"
    assert feats(_host(pinned))["xfer"] == 1.0
    asyncs = "cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, 0); cudaMemcpyAsync(h, d, n, cudaMemcpyDefault, 0);"
    assert feats(_host(asyncs))["xfer"] == 1.0
    mixed = asyncs + " cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);"
    assert feats(_host(mixed))["xfer"] == -1.0


# ---------------------------------------------------------------------------------------------------- div, atomics, sync, ops
def test_divergent_ifs():
    src = kernel("  if (threadIdx.x < 16) b[0] = 1;\n"
                 "  int lane = threadIdx.x & 31;\n  if (lane == 0) b[1] = 2;\n"
                 "  if (n > 4) b[2] = 3;\n  if (blockIdx.x == 0) b[3] = 4;\n  if (i < n) b[i] = 5;")
    fv = extract_paper_features(src)
    assert fv.values["div"] == -3.0
    assert fv.per_kernel[0]["ifs"] == 5


def test_atomics_barriers_ops():
    src = kernel("  atomicAdd(&b[0], a[i]); atomicCAS((int*)b, 0, 1); ::atomicMax((int*)b, 3);\n"
                 "  __syncthreads(); __syncwarp();\n"
                 "  b[i] = a[i] * 2.0f + a[i] / 3.0f - __popc(n); b[i] += 1.0f;")
    v = feats(src)
    assert v["atomics"] == 3 and v["syncthreads"] == 2
    # index: * + (2); body: * + / - (4) + popc (4) + += (1)
    assert v["ops"] == 2 + 4 + 4 + 1


def test_ai_formula():
    v = feats(kernel("  b[i] = a[i] * 2.0f;"))  # ops = 3 (index * +, body *), gmem = 2
    assert v["ai"] == pytest.approx(math.tanh(0.5 * 3 / (2 + 1)))
    assert v["gmem_access"] == 2 and v["ops"] == 3


def test_two_kernels_means_and_sums():
    src = (kernel("  b[i] = a[i];") + kernel("  b[i * 2] = a[i * 32];").replace("void k(", "void k2(")
           + "void host(float* a, float* b) { k<<<1, 128>>>(a, b, 0, 0); k2<<<1, 512>>>(a, b, 0, 0); }\n")
    fv = extract_paper_features(src)
    v = fv.values
    assert v["kernels"] == 2
    assert v["coal"] == pytest.approx((1.0 + (0.4 - 0.5) / 2) / 2)
    assert v["tpb"] == 320 and v["occ"] == 0.4
    ai1, ai2 = math.tanh(0.5 * 2 / 3), math.tanh(0.5 * 4 / 3)
    assert v["ai"] == pytest.approx((ai1 + ai2) / 2)
    assert [k["name"] for k in fv.per_kernel] == ["k", "k2"]


# ---------------------------------------------------------------------------------------------------- robustness
def test_no_kernel():
    fv = extract_paper_features("int main() { int x = 3; return x; }\n")
    assert fv.values["kernels"] == 0
    for name in ("coal", "ai", "tpb", "occ"):
        assert math.isnan(fv.values[name]) and fv.reasons[name]
    assert fv.values["ops"] == 0 and fv.values["div"] == 0


@pytest.mark.parametrize("src", [
    "__global__ void k(float* a, int n) { int i = threadIdx.x; a[i * 2] = 1;",  # truncated
    "__global__ void k(float* a { int i = threadIdx.x; a[i] = 1; }\nvoid h(){ k<<<1,256>>>(x); }",
    "int x = ;;; ))) __global__ <<<>>>",
    "",
    "\x00\xff\ufffd garbage",
    "__global__ void k(float* a) { a[" + "(" * 400 + "1" + ")" * 400 + "] = 0; }",
    "__global__ void k(float* a) { a[" + " + ".join(["threadIdx.x"] * 3000) + "] = 0; }",
])
def test_broken_code_never_crashes(src):
    fv = extract_paper_features(src)
    assert set(fv.values) == set(PAPER_FEATURES)
    for name, value in fv.values.items():
        assert not math.isnan(value) or fv.reasons.get(name)
    json.dumps(features_to_json(fv))


def test_broken_code_still_reads_what_it_can():
    fv = extract_paper_features("__global__ void k(float* a, int n) { int i = threadIdx.x; a[i * 2] = 1;")
    assert fv.parse_errors > 0
    assert fv.values["kernels"] == 1 and fv.values["coal"] == 0.4
    assert math.isnan(fv.values["tpb"]) and "no kernel launch" in fv.reasons["tpb"]


def test_define_global_away_means_no_kernel():
    fv = extract_paper_features("#define __global__\n__global__ void k(float* a) { a[threadIdx.x] = 0; }")
    assert fv.values["kernels"] == 0 and "#defines __global__" in fv.reasons["coal"]


def _repo_sources() -> list[Path]:
    return sorted([*REPO.glob("cudaperf/data/**/*.cu"), *REPO.glob("tests/fixtures/**/*.cu")])


def test_all_repo_sources_read_without_crash():
    paths = _repo_sources()
    assert len(paths) > 50
    for path in paths:
        fv = extract_paper_features(path.read_text())
        assert not any("internal error" in r for r in fv.reasons.values()), (path, fv.reasons)
        for name, value in fv.values.items():
            assert not math.isnan(value) or fv.reasons.get(name), (path, name)


# ---------------------------------------------------------------------------------------------------- json, settings, docs
def test_features_to_json_shape():
    out = features_to_json(extract_paper_features(kernel("  b[i] = a[i];")))
    for name in PAPER_FEATURES:
        assert name in out
    assert out["tpb"] is None and "tpb" in out["reasons"]
    assert out["parse_errors"] == 0 and out["per_kernel"][0]["name"] == "k"
    json.dumps(out, allow_nan=False)


def test_settings_change_constants():
    s = PaperFeatureSettings(coal_unit=0.5, div_alpha=2.0, gmem_scope="all")
    fv = extract_paper_features(kernel("  __shared__ float t[32]; t[0] = 1; if (i < n) b[i] = t[0];"), s)
    assert fv.values["coal"] == 0.5 and fv.values["div"] == -2.0 and fv.values["gmem_access"] == 3
    assert coal_score(None) == 0.0 and coal_score(4.0) == 0.1 and coal_score(-1.0) == 0.0


def test_every_feature_documents_formula_and_source():
    assert set(FEATURE_FUNCTIONS) == set(PAPER_FEATURES)
    for name, fn in FEATURE_FUNCTIONS.items():
        assert fn.__doc__ and "PAPER-SPEC" in fn.__doc__ and "=" in fn.__doc__, name


# ---------------------------------------------------------------------------------------------------- normalizer
def test_normalizer_fit_transform_save_load(tmp_path):
    vecs = [extract_paper_features(kernel(b)) for b in ("  b[i] = a[i];", "  b[i * 2] = a[i] + a[i + 1];")]
    vecs.append(extract_paper_features("int main() { return 0; }"))  # coal NaN: ignored in fitting
    norm = FeatureNormalizer().fit(vecs)
    assert norm.mean["coal"] == pytest.approx((1.0 + (0.4 + 1.0 + 1.0) / 3) / 2)
    assert norm.count["coal"] == 2
    assert norm.std["kernels"] > 0 and norm.std["syncthreads"] == 1e-6  # constant feature: floor
    z = norm.transform(vecs[2])
    assert z["coal"] == 0.0  # NaN -> the mean
    assert norm.transform(vecs[0])["coal"] == pytest.approx(1.0)
    path = tmp_path / "norm.json"
    norm.save(path)
    again = FeatureNormalizer.load(path)
    assert again.transform_many(vecs) == norm.transform_many(vecs)
    assert again.transform(features_to_json(vecs[1])) == norm.transform(vecs[1])
