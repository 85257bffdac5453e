"""radixlm's dequantisation of every GGML block format against the independent numpy reading
(quant_ref.py), bit for bit, on random blocks (every byte pattern is a valid block; the f16
scale fields are drawn finite, including zeros, subnormals and large values).
Usage: quant_test.py QUANT_DEQUANT_TOOL"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_ref  # noqa: E402


def edge_scales(raw, name, rng):
    """Overwrite some blocks' f16 fields with zero, subnormal and large values (MXFP4: its E8M0
    scale at the ends of the range radixlm carries, and all-zero blocks outside it)."""
    per, size, _ = quant_ref.FORMATS[name]
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size).copy()
    if name == "mxfp4":  # the ends of the scales carried exactly, and blocks of zeros at any scale
        b[0, 0], b[1, 0] = 104, 143
        for i, e in ((2, 0), (3, 255), (4, 1)):
            b[i, 0] = e
            b[i, 1:17] = np.where(np.arange(16) % 2 == 0, 0x00, 0x88)  # +0 and -0 codes
        return b.tobytes()
    fields = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
              "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}[name]
    specials = np.array([0.0, -0.0, 6e-8, -3e-6, 60000.0, -1.5], dtype=np.float16)
    for i, v in enumerate(specials):
        for off in fields:
            b[i, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    return b.tobytes()


def main():
    tool = sys.argv[1]
    rng = np.random.default_rng(7)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, (per, size, _) in quant_ref.FORMATS.items():
            n_blocks = 96
            raw = edge_scales(quant_ref.random_blocks(name, n_blocks, rng), name, rng)
            n = n_blocks * per
            src, dst = os.path.join(tmp, name + ".bin"), os.path.join(tmp, name + ".f32")
            open(src, "wb").write(raw)
            subprocess.run([tool, name, src, dst, str(n)], check=True)
            got = np.fromfile(dst, dtype=np.float32)
            ref = quant_ref.dequantize(name, raw, n)
            same = got.shape == ref.shape and np.array_equal(got.view(np.uint32), ref.view(np.uint32))
            diff = int(np.sum(got.view(np.uint32) != ref.view(np.uint32))) if got.shape == ref.shape else -1
            print("%s %s: %d blocks, %d elements, %d differ bitwise" % ("PASS" if same else "FAIL", name, n_blocks, n, diff))
            ok = ok and same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
