"""Shared pieces of the low-precision families (``bf16_matvec``, ``bf16_layer_stats``, ``int8_dequant_gemv``,
``quantize_rows_int8``): bf16 decoding, activations and bf16 input distributions.

A bf16 value is the top 16 bits of an IEEE-754 float, stored in an ``unsigned short``; decoding shifts it into
the high half of a 32-bit word, exactly (every bf16 is a float). The C references decode with ``memcpy`` and the
CUDA variants with ``__uint_as_float``: the same bits.
"""

from __future__ import annotations

C_BF16 = ("static inline float bf16_to_float(unsigned short h) {\n"
          "    unsigned int u = (unsigned int)h << 16;\n"
          "    float f;\n    memcpy(&f, &u, sizeof f);\n    return f;\n}\n\n")
CU_BF16 = ("__device__ __forceinline__ float bf16_to_float(unsigned short h) {\n"
           "    return __uint_as_float((unsigned int)h << 16);\n}\n\n"
           "/* the two bf16 values packed in one 32-bit word: element 2k in the low half (little-endian) */\n"
           "__device__ __forceinline__ float bf16_lo(unsigned int p) { return __uint_as_float(p << 16); }\n"
           "__device__ __forceinline__ float bf16_hi(unsigned int p) { return __uint_as_float(p & 0xffff0000u); }\n\n")

# bf16 bit-pattern ranges (randint, [low, high)): every pattern inside is a finite normal number of one sign,
# log-uniform in magnitude between the two ends.
BF16_RANGES = {
    "pos_small": (0x3C00, 0x3F80, "positive, in [2^-7, 1)"),
    "neg_small": (0xBC00, 0xBF80, "negative, in (-1, -2^-7]"),
    "pos_unit": (0x3E00, 0x4000, "positive, in [0.125, 2)"),
    "neg_unit": (0xBE00, 0xC000, "negative, in (-2, -0.125]"),
    "pos_wide": (0x3A00, 0x4100, "positive, in [2^-11, 8)"),
}

ACTIVATIONS = {
    "none": "v",
    "relu": "v > 0.0f ? v : 0.0f",
    "silu": "v / (1.0f + expf(-v))",
    "tanh": "tanhf(v)",
    "gelu_tanh": "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
}


def flit(x: float) -> str:
    """A float literal that is exactly the float32 nearest ``x``."""
    import numpy as np

    return f"{float(np.float32(x))!r}f"
