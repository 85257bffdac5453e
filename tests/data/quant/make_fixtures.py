"""Writes the quantised-GGUF test fixtures of tests/data/quant (see README.md there).

Usage: make_fixtures.py LLAMA_CPP_DIR OUT_DIR [dense|moe|all]
dense: the Qwen3 files quantised to TYPES; moe: a Qwen3-MoE file whose experts llama-quantize
writes as MXFP4 (MXFP4_MOE). LLAMA_CPP_DIR is a llama.cpp checkout with a build (bench/vs_llamacpp.sh makes one under
build/vs_llamacpp/llama.cpp, with bench/llamacpp_logits.cc next to it). The f32 base model is
written with llama.cpp's own gguf-py, quantised by llama-quantize, and every file's logits for
the fixed ids below come from llama.cpp (llamacpp_logits): nothing here is written by radixlm.
"""
import os
import subprocess
import sys

import numpy as np

LLAMA, OUT = sys.argv[1], sys.argv[2]
WHAT = sys.argv[3] if len(sys.argv) > 3 else "all"
sys.path.insert(0, os.path.join(LLAMA, "gguf-py"))
import gguf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from byte_vocabulary import add_byte_vocabulary  # noqa: E402

# Qwen3 layout; every matrix row is whole K-quant super-blocks (256). Embeddings drawn wide
# enough (std 0.25 over d = 256: logit std ~4) that top-1 is decisive, unlike N(0, 0.02).
D, BLOCKS, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 256, 2, 4, 2, 64, 256, 258
IDS = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 84, 104,
       101, 32, 113, 117, 105, 99, 107, 32, 98, 114, 111, 119, 110, 32, 102, 111]
TYPES = ["Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q2_K"]
EXPERTS, USED = 4, 2  # the MoE file: 4 experts of FFN rows, 2 per token


def write_base(base, moe, seed):
    """The f32 model: Qwen3 (dense) or Qwen3-MoE (moe: the MLP replaced by routed experts)."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(base, "qwen3moe" if moe else "qwen3")
    write_config(w, moe)

    def t(name, shape, std, mean=0.0):
        w.add_tensor(name, (mean + std * rng.standard_normal(shape)).astype(np.float32))

    t("token_embd.weight", (VOCAB, D), 0.25)
    for b in range(BLOCKS):
        p = f"blk.{b}."
        t(p + "attn_norm.weight", (D,), 0.1, 1.0)
        t(p + "attn_q.weight", (HEADS * HEAD_DIM, D), 0.06)
        t(p + "attn_k.weight", (KV_HEADS * HEAD_DIM, D), 0.06)
        t(p + "attn_v.weight", (KV_HEADS * HEAD_DIM, D), 0.06)
        t(p + "attn_q_norm.weight", (HEAD_DIM,), 0.1, 1.0)
        t(p + "attn_k_norm.weight", (HEAD_DIM,), 0.1, 1.0)
        t(p + "attn_output.weight", (D, HEADS * HEAD_DIM), 0.06)
        t(p + "ffn_norm.weight", (D,), 0.1, 1.0)
        if moe:
            t(p + "ffn_gate_inp.weight", (EXPERTS, D), 0.3)
            t(p + "ffn_gate_exps.weight", (EXPERTS, FFN, D), 0.06)
            t(p + "ffn_up_exps.weight", (EXPERTS, FFN, D), 0.06)
            t(p + "ffn_down_exps.weight", (EXPERTS, D, FFN), 0.06)
        else:
            t(p + "ffn_gate.weight", (FFN, D), 0.06)
            t(p + "ffn_up.weight", (FFN, D), 0.06)
            t(p + "ffn_down.weight", (D, FFN), 0.06)
    t("output_norm.weight", (D,), 0.1, 1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_config(w, moe):
    w.add_name("radixlm quant fixture (random weights)")
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_block_count(BLOCKS)
    w.add_feed_forward_length(FFN)
    if moe:
        w.add_expert_count(EXPERTS)
        w.add_expert_used_count(USED)
        w.add_expert_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    add_byte_vocabulary(w, gguf)


bin_dir = os.path.join(LLAMA, "build", "bin")
env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
logits_tool = os.path.join(os.path.dirname(os.path.abspath(LLAMA)), "llamacpp_logits")
ids = ",".join(map(str, IDS))


def quantise_and_logits(base, outputs):
    """outputs: [(file stem, llama-quantize type or None for the base)]; the base is deleted."""
    for stem, qt in outputs:
        f = os.path.join(OUT, stem + ".gguf")
        if qt:
            subprocess.run([os.path.join(bin_dir, "llama-quantize"), base, f, qt, "1"], env=env, check=True,
                           capture_output=True)
        subprocess.run([logits_tool, f if qt else base, ids, os.path.join(OUT, stem + ".llamacpp-logits.f32"), "1"],
                       env=env, check=True, capture_output=True)
    os.remove(base)  # MBs of f32: the tests compare with its logits, which are kept


if WHAT in ("dense", "all"):
    base = os.path.join(OUT, "tiny-f32.gguf")
    write_base(base, moe=False, seed=20261123)
    quantise_and_logits(base, [("tiny-f32", None)] + [(f"tiny-{q.lower()}", q) for q in TYPES])
if WHAT in ("moe", "all"):
    base = os.path.join(OUT, "tiny-moe-f32.gguf")
    write_base(base, moe=True, seed=20261129)
    quantise_and_logits(base, [("tiny-moe-f32", None), ("tiny-moe-mxfp4", "MXFP4_MOE")])
with open(os.path.join(OUT, "ids.txt"), "w") as fh:
    fh.write(ids + "\n")
print("wrote", sorted(os.listdir(OUT)))
