"""Independent numpy reading of GGML's block-quantised formats (ggml-common.h block layouts,
ggml-quants.c dequantize_row_*), vectorised over blocks. Written from the format definitions,
not from radixlm's C++: it is the reference the C++ dequantisation is compared with, bit for
bit, in float32 (each product and each sum rounded separately, as the definitions write them).

dequantize(type_name, raw_bytes, n_elements) -> float32 array.
"""
import numpy as np

F32 = np.float32

# name: (elements per block, bytes per block, ggml type id)
FORMATS = {
    "q4_0": (32, 18, 2),
    "q4_1": (32, 20, 3),
    "q5_0": (32, 22, 6),
    "q5_1": (32, 24, 7),
    "q8_0": (32, 34, 8),
    "q2_k": (256, 84, 10),
    "q3_k": (256, 110, 11),
    "q4_k": (256, 144, 12),
    "q5_k": (256, 176, 13),
    "q6_k": (256, 210, 14),
    "mxfp4": (32, 17, 39),
}

# OCP MX FP4 (E2M1) values of the 16 codes: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0.
# Code 8 is -0 in the OCP definition; ggml's table (an int8 per code) makes it +0, and GGUF
# files are read as ggml reads them.
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _f16(blocks, offset):
    """Column of f16 fields at byte `offset` of each block, as float32."""
    return blocks[:, offset:offset + 2].copy().view(np.float16).astype(F32)[:, 0]


def _nibbles(qs):
    """[nb, 16] bytes -> [nb, 32] codes: low nibbles are elements 0..15, high 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def _q5_high(qh_bytes):
    """[nb, 4] bytes (a little-endian u32) -> [nb, 32] fifth bits (0 or 16)."""
    qh = qh_bytes.copy().view("<u4")[:, 0].astype(np.uint64)
    bits = (qh[:, None] >> np.arange(32, dtype=np.uint64)[None, :]) & 1
    return (bits.astype(np.int32) << 4)


def _scale_min_k4(scales):
    """Q4_K / Q5_K: [nb, 12] bytes -> (sc, m) each [nb, 8] of 6-bit values."""
    s = scales.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    m = np.empty((s.shape[0], 8), np.int32)
    sc[:, :4] = s[:, 0:4] & 63
    m[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, m


def _q3k_scales(scales):
    """Q3_K: [nb, 12] bytes -> [nb, 16] signed scales, as ggml's kmask shuffle on four u32."""
    aux = scales.copy().view("<u4").astype(np.uint32)  # [nb, 3]
    k1, k2 = np.uint32(0x03030303), np.uint32(0x0F0F0F0F)
    a0, a1, tmp = aux[:, 0], aux[:, 1], aux[:, 2]
    out = np.stack([
        (a0 & k2) | (((tmp >> 0) & k1) << 4),
        (a1 & k2) | (((tmp >> 2) & k1) << 4),
        ((a0 >> 4) & k2) | (((tmp >> 4) & k1) << 4),
        ((a1 >> 4) & k2) | (((tmp >> 6) & k1) << 4),
    ], axis=1).astype("<u4")
    return out.view(np.int8).astype(np.int32) - 32  # [nb, 16]


def _crumbs(qs):
    """Q2_K / Q3_K: [nb, 64] bytes -> [nb, 256] 2-bit codes in element order (two halves of
    128; in each, shifts 0, 2, 4, 6 over the half's 32 bytes)."""
    q = qs.astype(np.int32).reshape(-1, 2, 1, 32)
    shifts = np.array([0, 2, 4, 6], np.int32).reshape(1, 1, 4, 1)
    return ((q >> shifts) & 3).reshape(-1, 256)


def dequantize(name, raw, n):
    per, size, _ = FORMATS[name]
    assert n % per == 0
    b = np.frombuffer(raw, dtype=np.uint8)[: n // per * size].reshape(-1, size)
    if name == "mxfp4":
        # Byte 0 an E8M0 scale 2^(e - 127); element j < 16 the low nibble of byte 1 + j, element
        # j + 16 its high nibble; value = E2M1(code) * scale, computed as ggml does it, (2 *
        # E2M1) * 2^(e - 128), which stays finite for e = 255 (ggml gives E8M0's NaN no meaning)
        # and is one exact product (powers of two times at most 4 significant bits).
        half_scale = np.ldexp(F32(1), b[:, 0].astype(np.int32) - 128).astype(F32)
        q = b[:, 1:17]
        codes = np.concatenate([q & 0xF, q >> 4], axis=1)
        doubled = (2 * np.array(E2M1, dtype=F32))
        return (doubled[codes] * half_scale[:, None]).astype(F32).reshape(-1)
    if name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        d = _f16(b, 0)
        if name == "q8_0":
            x = b[:, 2:34].copy().view(np.int8).astype(np.int32)
            return (x.astype(F32) * d[:, None]).reshape(-1)
        has_m = name.endswith("_1")
        qs_at = {"q4_0": 2, "q4_1": 4, "q5_0": 6, "q5_1": 8}[name]
        x = _nibbles(b[:, qs_at:qs_at + 16])
        if name.startswith("q5"):
            x = x | _q5_high(b[:, qs_at - 4:qs_at])
        if not has_m:
            x = x - (8 if name == "q4_0" else 16)
            return (x.astype(F32) * d[:, None]).reshape(-1)
        m = _f16(b, 2)
        return (x.astype(F32) * d[:, None] + m[:, None]).astype(F32).reshape(-1)

    if name == "q2_k":
        scales = b[:, 0:16].astype(np.int32)
        q = _crumbs(b[:, 16:80])
        d, dmin = _f16(b, 80), _f16(b, 82)
        dl = (d[:, None] * (scales & 0xF).astype(F32)).astype(F32)   # [nb, 16]
        ml = (dmin[:, None] * (scales >> 4).astype(F32)).astype(F32)
        dl, ml = np.repeat(dl, 16, axis=1), np.repeat(ml, 16, axis=1)
        return (dl * q.astype(F32) - ml).astype(F32).reshape(-1)

    if name == "q3_k":
        hmask = b[:, 0:32].astype(np.int32)
        q = _crumbs(b[:, 32:96])
        sc = _q3k_scales(b[:, 96:108])
        d = _f16(b, 108)
        # The high bit of element (half h, shift index j, byte l) is bit 4h + j of hmask[l];
        # where it is clear the format subtracts 4.
        bit = np.arange(8).reshape(1, 2, 4, 1)
        h = ((hmask.reshape(-1, 1, 1, 32) >> bit) & 1).reshape(-1, 256)
        x = q - np.where(h == 1, 0, 4)
        dl = np.repeat((d[:, None] * sc.astype(F32)).astype(F32), 16, axis=1)
        return (dl * x.astype(F32)).astype(F32).reshape(-1)

    if name in ("q4_k", "q5_k"):
        d, dmin = _f16(b, 0), _f16(b, 2)
        sc, m = _scale_min_k4(b[:, 4:16])
        qs = b[:, 48:176] if name == "q5_k" else b[:, 16:144]
        q = qs.astype(np.int32).reshape(-1, 4, 1, 32)
        x = np.concatenate([q & 0xF, q >> 4], axis=2)  # [nb, 4 chunks, 2, 32] = sub-blocks in order
        if name == "q5_k":
            qh = b[:, 16:48].astype(np.int32).reshape(-1, 1, 1, 32)
            sub = np.arange(8).reshape(1, 4, 2, 1)
            x = x + (((qh >> sub) & 1) << 4)
        x = x.reshape(-1, 256)
        d1 = np.repeat((d[:, None] * sc.astype(F32)).astype(F32), 32, axis=1)
        m1 = np.repeat((dmin[:, None] * m.astype(F32)).astype(F32), 32, axis=1)
        return (d1 * x.astype(F32) - m1).astype(F32).reshape(-1)

    if name == "q6_k":
        ql = b[:, 0:128].astype(np.int32).reshape(-1, 2, 64)
        qh = b[:, 128:192].astype(np.int32).reshape(-1, 2, 32)
        sc = b[:, 192:208].copy().view(np.int8).astype(np.int32)
        d = _f16(b, 208)
        lo_a, lo_b = ql[:, :, :32], ql[:, :, 32:]
        parts = [
            (lo_a & 0xF) | (((qh >> 0) & 3) << 4),
            (lo_b & 0xF) | (((qh >> 2) & 3) << 4),
            (lo_a >> 4) | (((qh >> 4) & 3) << 4),
            (lo_b >> 4) | (((qh >> 6) & 3) << 4),
        ]
        x = np.stack(parts, axis=2).reshape(-1, 256) - 32  # [nb, half, 4 parts, 32]
        ds = np.repeat((d[:, None] * sc.astype(F32)).astype(F32), 16, axis=1)
        return (ds * x.astype(F32)).astype(F32).reshape(-1)
    raise ValueError(name)


def random_blocks(name, n_blocks, rng):
    """Random bytes for n_blocks blocks, with every f16 field a finite value of plausible size
    (the quantised bytes themselves may be anything: every pattern is a valid block)."""
    per, size, _ = FORMATS[name]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if name == "mxfp4":  # E8M0 scales radixlm carries exactly: 2^(e - 128) in [2^-24, 2^15]
        b[:, 0] = rng.integers(104, 144, size=n_blocks, dtype=np.uint8)
        return b.tobytes()
    f16_fields = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
                  "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}[name]
    for off in f16_fields:
        v = (rng.standard_normal(n_blocks) * 0.01).astype(np.float16)
        b[:, off:off + 2] = v.view(np.uint8).reshape(-1, 2)
    return b.tobytes()
