"""Golden test: radixlm's logits against the independent PyTorch reference, on the same
weights file. Usage: golden_test.py RADIXLM_BINARY CASE [CASE ...]
A CASE is MODEL_SPEC:FORMAT with FORMAT gguf or hf (random presets are exported first), or a
path to an existing GGUF. Tolerance: max |radixlm - reference| <= 1e-4 * max |reference|
(f32 engine vs float64 reference)."""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer_ref import Model  # noqa: E402
from hybrid_ref import HYBRID_TYPES, HybridModel  # noqa: E402
from qwen35_ref import QWEN35_TYPES, Qwen35Model  # noqa: E402
from gemma3_ref import GEMMA3_TYPES, Gemma3Model  # noqa: E402
from gemma4_ref import Gemma4Model  # noqa: E402
from gpt_oss_ref import GptOssModel  # noqa: E402
from lfm2_ref import LFM2_TYPES, Lfm2Model  # noqa: E402

# GGUF architectures with a reference of their own (the rest: transformer_ref.Model).
GGUF_REFERENCES = {"gemma3": Gemma3Model.from_gguf, "gemma4": Gemma4Model.from_gguf, "gpt-oss": GptOssModel.from_gguf,
                   "lfm2": Lfm2Model.from_gguf, "lfm2moe": Lfm2Model.from_gguf}
from checkpoint_io import read_gguf  # noqa: E402
import json  # noqa: E402


def gguf_arch(path):
    """general.architecture of a GGUF (read from its header)."""
    import struct
    with open(path, "rb") as f:
        data = f.read(1 << 16)
    off = 24
    n = struct.unpack_from("<Q", data, off)[0]
    key = data[off + 8:off + 8 + n].decode()
    if key != "general.architecture":
        return read_gguf(path)[0].get("general.architecture")
    off += 8 + n + 4
    m = struct.unpack_from("<Q", data, off)[0]
    return data[off + 8:off + 8 + m].decode()

TOLERANCE = 1e-4


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), r.stderr))
    return r.stdout


def check(binary, model_path, model, ids, label):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")
        run([binary, "logits", "--model", model_path, "--dtype", "f32", "--kv-dtype", "f32", "--threads", "2",
             "--ids", ",".join(map(str, ids)), "--out", out])
        got = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)
    ref = model.logits(ids)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    ok = err <= TOLERANCE and got.shape == ref.shape
    print("%s %s: %d tokens, vocab %d, max rel error %.2e (tolerance %.0e)" %
          ("PASS" if ok else "FAIL", label, len(ids), ref.shape[1], err, TOLERANCE))
    return ok


def main():
    binary, cases = sys.argv[1], sys.argv[2:]
    rng = np.random.default_rng(0)
    ok, ran = True, 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            if case.startswith("random:"):
                spec, fmt = case.rsplit(":", 1)
                path = os.path.join(tmp, spec.replace(":", "_") + ("." + fmt if fmt == "gguf" else "_hf"))
                run([binary, "export", "--model", spec, "--format", fmt, "--out", path])
                hf_type = json.load(open(os.path.join(path, "config.json")))["model_type"] if fmt == "hf" else None
                if hf_type in HYBRID_TYPES:
                    model = HybridModel.from_hf(path)
                elif hf_type in QWEN35_TYPES:
                    model = Qwen35Model.from_hf(path)
                elif fmt == "gguf" and gguf_arch(path) in ("qwen35", "qwen35moe"):
                    model = Qwen35Model.from_gguf(path)
                elif hf_type in LFM2_TYPES:
                    model = Lfm2Model.from_hf(path)
                elif hf_type in GEMMA3_TYPES:
                    model = Gemma3Model.from_hf(path)
                elif fmt == "gguf" and gguf_arch(path) in GGUF_REFERENCES:
                    model = GGUF_REFERENCES[gguf_arch(path)](path)
                else:
                    model = Model.from_gguf(path) if fmt == "gguf" else Model.from_hf(path)
            else:
                if not os.path.exists(case):
                    print("SKIP %s: file not present" % case)
                    continue
                path = case
                model = GGUF_REFERENCES.get(gguf_arch(case), Model.from_gguf)(case)
            if isinstance(model, HybridModel):
                vocab = model.c["vocab_size"]
            elif isinstance(model, (Gemma3Model, Gemma4Model, GptOssModel, Lfm2Model)):
                vocab = model.vocab()
            elif isinstance(model, Qwen35Model):
                vocab = model.w[model.p + "embed_tokens.weight"].shape[0]
            else:
                vocab = model.w["token_embd.weight"].shape[0]
            # 45 tokens: several 16-token KV blocks, and past the Llama-3 scaling windows.
            ids = [int(i) for i in rng.integers(0, vocab, size=45)]
            ok &= check(binary, path, model, ids, case)
            ran += 1
    if ran == 0:
        sys.exit(77)  # every case's file absent: CTest's SKIP_RETURN_CODE
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
