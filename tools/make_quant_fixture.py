#!/usr/bin/env python3
"""make_quant_fixture.py - reference Q8_0 bytes for tests/kernels/test_quant.c.

Writes tests/fixtures/quant/q8_0.bin: uint32 n (a multiple of 32), n float32
inputs, then the n/32 Q8_0 blocks (34 bytes each) that the `gguf` package's
quantizer (bit-exact with GGML's reference quantize_row_q8_0) makes of them.
Blocks: random normals at scales 1e-7 .. 1e3, a zero block, one-hot blocks,
all-negative ones, exact halves (round half away from zero), f16-subnormal
scales. Run with the tooling venv (tools/venv.sh --bench has gguf).
"""
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType, quants

rng = np.random.RandomState(20261202)
blocks = []
for scale in [1e-7, 1e-5, 1e-3, 0.02, 1.0, 37.0, 1e3]:
    for _ in range(6):
        blocks.append(rng.randn(32) * scale)
blocks.append(np.zeros(32))
one = np.zeros(32); one[5] = -3.25; blocks.append(one)
one = np.zeros(32); one[31] = 1e-4; blocks.append(one)
blocks.append(-np.abs(rng.randn(32)))
half = np.arange(32) - 15.5; half[0] = 127.0; blocks.append(half)        # d = 1: x.5 values
half = (np.arange(32) - 16) * 0.5 + 0.25; half[3] = 127.0; blocks.append(half)
blocks.append(rng.randn(32) * 1e-9)                                        # d subnormal in f16
x = np.concatenate(blocks).astype(np.float32)
q = quants.quantize(x.reshape(1, -1), GGMLQuantizationType.Q8_0).reshape(-1)
assert q.size == x.size // 32 * 34
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant", "q8_0.bin")
with open(sys.argv[1] if len(sys.argv) > 1 else out, "wb") as f:
    f.write(struct.pack("<I", x.size))
    f.write(x.tobytes())
    f.write(q.tobytes())
print(f"{x.size} floats, {q.size} bytes of Q8_0")
