"""kquants.py - a plain numpy quantizer for GGML's Q4_K, Q5_K and Q6_K blocks.

The `gguf` package dequantizes K-quants but cannot quantize them; tools/to_gguf.py
uses this to write Q4_K_M-like files for tests and benchmarks. It is a simple
min/max quantizer, not llama.cpp's (which searches scales to minimise the
error): the bytes differ from llama-quantize's and the error is somewhat
larger, but the layout is GGML's (ggml-common.h), so any reader -- qwenc,
llama.cpp, gguf's dequantize -- gets the same weights from them.

  Q4_K / Q5_K: per super-block of 256 weights, 8 sub-blocks of 32; sub-block
    scale (max - min) / (2^bits - 1) and offset -min (min capped at 0) are
    stored as 6-bit multiples of two binary16 super-block factors d and dmin
    (rounded up, so the range always fits); q = round((x + dmin * mn) /
    (d * sc)), clipped.
  Q6_K: 16 sub-blocks of 16: sub-block scale max|x| / 31 as an int8 multiple
    of a binary16 d; q = round(x / (d * sc)) in [-32, 31], stored + 32.
"""
import numpy as np

QK = 256


def _f16(a):
    return a.astype(np.float16)


def _pack_scales(sc, mn):
    """8 six-bit scales and mins per super-block -> GGML's 12 packed bytes."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    out = np.empty(sc.shape[:-1] + (12,), np.uint8)
    out[..., 0:4] = (sc[..., 0:4] & 63) | ((sc[..., 4:8] >> 4) << 6)
    out[..., 4:8] = (mn[..., 0:4] & 63) | ((mn[..., 4:8] >> 4) << 6)
    out[..., 8:12] = (sc[..., 4:8] & 15) | ((mn[..., 4:8] & 15) << 4)
    return out


def _affine(x, levels):
    """Q4_K / Q5_K common part: x (n, 256) -> d16, dmin16, sc, mn, q (n, 8, 32)."""
    b = x.reshape(-1, 8, 32).astype(np.float32)
    lo = np.minimum(b.min(-1), 0).astype(np.float32)
    scale = ((b.max(-1) - lo) / np.float32(levels)).astype(np.float32)
    d16 = _f16(scale.max(-1) / np.float32(63))
    dmin16 = _f16(-lo.min(-1) / np.float32(63))
    d, dmin = d16.astype(np.float32)[:, None], dmin16.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d > 0, np.ceil(scale / d), 0).clip(0, 63)
        mn = np.where(dmin > 0, np.ceil(-lo / dmin), 0).clip(0, 63)
        ds = (d * sc.astype(np.float32))[..., None]
        dm = (dmin * mn.astype(np.float32))[..., None]
        q = np.where(ds > 0, np.round((b + dm) / ds), 0).clip(0, levels).astype(np.uint8)
    return d16, dmin16, sc, mn, q


def quantize_q4_k(x):
    d16, dmin16, sc, mn, q = _affine(x, 15)
    n = q.shape[0]
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(n, 128)  # chunk c: sub-blocks 2c (low), 2c+1 (high)
    return np.concatenate([d16.view(np.uint8).reshape(n, 2), dmin16.view(np.uint8).reshape(n, 2),
                           _pack_scales(sc, mn), qs], axis=1)


def quantize_q5_k(x):
    d16, dmin16, sc, mn, q = _affine(x, 31)
    n = q.shape[0]
    lo = q & 15
    qs = (lo[:, 0::2, :] | (lo[:, 1::2, :] << 4)).reshape(n, 128)
    hb = (q >> 4) & 1                                   # (n, 8, 32): bit s of qh[l]
    qh = np.zeros((n, 32), np.uint8)
    for s in range(8):
        qh |= hb[:, s, :] << s
    return np.concatenate([d16.view(np.uint8).reshape(n, 2), dmin16.view(np.uint8).reshape(n, 2),
                           _pack_scales(sc, mn), qh, qs], axis=1)


def quantize_q6_k(x):
    b = x.reshape(-1, 16, 16).astype(np.float32)
    n = b.shape[0]
    scale = (np.abs(b).max(-1) / np.float32(31)).astype(np.float32)
    d16 = _f16(scale.max(-1) / np.float32(127))
    d = d16.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d > 0, np.round(scale / d), 0).clip(0, 127).astype(np.int8)
        ds = (d * sc.astype(np.float32))[..., None]
        q = np.where(ds > 0, np.round(b / ds), 0).clip(-32, 31).astype(np.int16)
    v = (q + 32).astype(np.uint8).reshape(n, 2, 128)    # weight p = 128 h + i
    lo = (v & 15).reshape(n, 2, 2, 64)
    ql = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 4)).reshape(n, 128)
    hi = (v >> 4).reshape(n, 2, 4, 32)
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(n, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), d16.view(np.uint8).reshape(n, 2)], axis=1)


def quantize(x, name):
    """x: float32 (rows, cols), cols a multiple of 256 -> uint8 (rows, cols / 256 * block bytes)."""
    rows, cols = x.shape
    assert cols % QK == 0, f"{name}: {cols} columns is not a multiple of {QK}"
    f = {"Q4_K": quantize_q4_k, "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k}[name]
    return f(np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK)).reshape(rows, -1)
