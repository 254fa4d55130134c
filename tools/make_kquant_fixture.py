#!/usr/bin/env python3
"""make_kquant_fixture.py - reference dequantized values of GGML's 4/5/6-bit
block types for tests/kernels/test_kquant.c.

Writes tests/fixtures/quant/blocks.bin: records until the end of the file,
each: uint32 GGML type id (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 12 Q4_K, 13 Q5_K,
14 Q6_K), uint32 n (weights), the n / block_size blocks' bytes, then n float32:
what the `gguf` package's numpy dequantize makes of them. The blocks are
random bytes (every bit pattern of the quant and scale fields is valid) with
their binary16 fields set to random finite values: normal and subnormal,
negative, zero, up to 65504; plus, for the four types gguf can quantize,
blocks quantized from random normals. Run with the tooling venv (gguf, numpy).
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, quants

rng = np.random.RandomState(20261203)
# type -> (block size, bytes, byte offsets of the binary16 fields)
TYPES = {T.Q4_0: (32, 18, [0]), T.Q4_1: (32, 20, [0, 2]), T.Q5_0: (32, 22, [0]), T.Q5_1: (32, 24, [0, 2]),
         T.Q4_K: (256, 144, [0, 2]), T.Q5_K: (256, 176, [0, 2]), T.Q6_K: (256, 210, [208])}


def f16_bits(k):
    """k binary16 bit patterns: mostly |x| in 2^-14 .. 2^-4, some special."""
    v = (rng.randn(k) * 2.0 ** rng.randint(-14, -4, size=k)).astype(np.float16).view(np.uint16)
    special = np.array([0x0000, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x3c00, 0x0400], dtype=np.uint16)
    pick = rng.randint(0, 4, size=k) == 0
    v[pick] = special[rng.randint(0, len(special), size=pick.sum())]
    return v


out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant", "blocks.bin")
with open(out_path, "wb") as f:
    for t, (blk, bs, f16_off) in TYPES.items():
        nb = 24 if blk == 32 else 6
        raw = rng.randint(0, 256, size=(nb, bs)).astype(np.uint8)
        for off in f16_off:
            raw[:, off:off + 2] = f16_bits(nb).view(np.uint8).reshape(nb, 2)
        blocks = [raw]
        if blk == 32:  # gguf's quantizer: realistic blocks (every level of q used)
            x = (rng.randn(8 * blk) * 10.0 ** rng.randint(-3, 2)).astype(np.float32)
            blocks.append(quants.quantize(x.reshape(1, -1), t).reshape(-1, bs))
        data = np.concatenate(blocks).reshape(-1)
        n = data.size // bs * blk
        y = quants.dequantize(data.reshape(1, -1), t).reshape(-1).astype(np.float32)
        assert y.size == n and np.isfinite(y).all(), t
        f.write(struct.pack("<II", int(t), n))
        f.write(data.tobytes())
        f.write(y.tobytes())
        print(f"{t.name}: {n} weights, {data.size} bytes")
