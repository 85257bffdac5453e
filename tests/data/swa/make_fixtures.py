"""Writes the sliding-window test fixtures of tests/data/swa (see README.md there).

Usage: make_fixtures.py LLAMA_CPP_DIR OUT_DIR
Each model is written with llama.cpp's own gguf-py from seeded random f32 weights, and its
logits for the fixed ids below come from llama.cpp (bench/llamacpp_logits.cc): nothing here is
written or computed by radixlm.
"""
import os
import subprocess
import sys

import numpy as np

LLAMA, OUT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(LLAMA, "gguf-py"))
import gguf  # noqa: E402

VOCAB = 258
# 96 ids: positions 32..95 are past the 16-token window twice over.
IDS = [int(x) for x in np.random.default_rng(48).integers(0, VOCAB, 96)]


def byte_vocabulary(w):
    """The 256 bytes (GPT-2's byte-to-unicode spelling) and two merges (llama.cpp refuses a BPE
    vocabulary without merges)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    spelling = dict(zip(bs, (chr(c) for c in cs)))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list([spelling[b] for b in range(256)] + ["\u0120t", "he"])
    w.add_token_types([gguf.TokenType.NORMAL] * VOCAB)
    w.add_token_merges(["\u0120 t", "h e"])


def write_gemma3(path, seed):
    """Gemma 3 text layout: 6 blocks (0-4 slide with a 16-token window, 5 is global: llama.cpp's
    default pattern), 2 q / 1 kv heads x 32, d 64, GeGLU 128, tied embeddings. Norm weights are
    stored as the converter writes them, (1 + w), drawn N(1, 0.1)."""
    D, BLOCKS, HEADS, KV, HD, FFN = 64, 6, 2, 1, 32, 128
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name("radixlm gemma3 fixture (random weights)")
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_block_count(BLOCKS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_sliding_window(16)
    byte_vocabulary(w)

    def t(name, shape, std, mean=0.0):
        w.add_tensor(name, (mean + std * rng.standard_normal(shape)).astype(np.float32))

    t("token_embd.weight", (VOCAB, D), 0.25)
    for b in range(BLOCKS):
        p = f"blk.{b}."
        t(p + "attn_norm.weight", (D,), 0.1, 1.0)
        t(p + "attn_q.weight", (HEADS * HD, D), 0.12)
        t(p + "attn_k.weight", (KV * HD, D), 0.12)
        t(p + "attn_v.weight", (KV * HD, D), 0.12)
        t(p + "attn_q_norm.weight", (HD,), 0.1, 1.0)
        t(p + "attn_k_norm.weight", (HD,), 0.1, 1.0)
        t(p + "attn_output.weight", (D, HEADS * HD), 0.12)
        t(p + "post_attention_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_gate.weight", (FFN, D), 0.12)
        t(p + "ffn_up.weight", (FFN, D), 0.12)
        t(p + "ffn_down.weight", (D, FFN), 0.12)
        t(p + "post_ffw_norm.weight", (D,), 0.1, 1.0)
    t("output_norm.weight", (D,), 0.1, 1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gpt_oss(path, seed):
    """gpt-oss layout: 3 blocks (0 and 2 slide with a 16-token window, 1 is global: llama.cpp's
    pattern 2), 8 q / 2 kv heads x 16 (q wider than d), d 64, 4 experts of 64 (2 per token) with
    biases, attention biases and sinks, YaRN (factor 4 over 32 positions), untied output."""
    D, BLOCKS, HEADS, KV, HD, FFN, E, K = 64, 3, 8, 2, 16, 64, 4, 2
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_name("radixlm gpt-oss fixture (random weights)")
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_block_count(BLOCKS)
    w.add_feed_forward_length(FFN)
    w.add_expert_count(E)
    w.add_expert_used_count(K)
    w.add_expert_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(150000.0)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(4.0)
    w.add_rope_scaling_orig_ctx_len(32)
    w.add_sliding_window(16)
    byte_vocabulary(w)

    def t(name, shape, std, mean=0.0):
        w.add_tensor(name, (mean + std * rng.standard_normal(shape)).astype(np.float32))

    t("token_embd.weight", (VOCAB, D), 0.25)
    for b in range(BLOCKS):
        p = f"blk.{b}."
        t(p + "attn_norm.weight", (D,), 0.1, 1.0)
        t(p + "attn_q.weight", (HEADS * HD, D), 0.12)
        t(p + "attn_q.bias", (HEADS * HD,), 0.1)
        t(p + "attn_k.weight", (KV * HD, D), 0.12)
        t(p + "attn_k.bias", (KV * HD,), 0.1)
        t(p + "attn_v.weight", (KV * HD, D), 0.12)
        t(p + "attn_v.bias", (KV * HD,), 0.1)
        t(p + "attn_output.weight", (D, HEADS * HD), 0.12)
        t(p + "attn_output.bias", (D,), 0.1)
        t(p + "attn_sinks.weight", (HEADS,), 1.0)
        t(p + "post_attention_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_gate_inp.weight", (E, D), 0.3)
        t(p + "ffn_gate_inp.bias", (E,), 0.1)
        t(p + "ffn_gate_exps.weight", (E, FFN, D), 0.12)
        t(p + "ffn_gate_exps.bias", (E, FFN), 0.1)
        t(p + "ffn_up_exps.weight", (E, FFN, D), 0.12)
        t(p + "ffn_up_exps.bias", (E, FFN), 0.1)
        t(p + "ffn_down_exps.weight", (E, D, FFN), 0.12)
        t(p + "ffn_down_exps.bias", (E, D), 0.1)
    t("output_norm.weight", (D,), 0.1, 1.0)
    t("output.weight", (VOCAB, D), 0.25)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


bin_dir = os.path.join(LLAMA, "build", "bin")
env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
logits_tool = os.path.join(os.path.dirname(os.path.abspath(LLAMA)), "llamacpp_logits")
ids = ",".join(map(str, IDS))

def logits(f, stem):
    subprocess.run([logits_tool, f, ids, os.path.join(OUT, stem + ".llamacpp-logits.f32"), "1"],
                   env=env, check=True, capture_output=True)


for stem, write, seed in [("gemma3-tiny", write_gemma3, 20261129), ("gpt-oss-tiny", write_gpt_oss, 20261130)]:
    f = os.path.join(OUT, stem + ".gguf")
    write(f, seed)
    logits(f, stem)
# gpt-oss as released: experts MXFP4, everything else Q8_0 (llama-quantize MXFP4_MOE).
q = os.path.join(OUT, "gpt-oss-tiny-mxfp4.gguf")
subprocess.run([os.path.join(bin_dir, "llama-quantize"), os.path.join(OUT, "gpt-oss-tiny.gguf"), q, "MXFP4_MOE", "1"],
               env=env, check=True, capture_output=True)
logits(q, "gpt-oss-tiny-mxfp4")
with open(os.path.join(OUT, "ids.txt"), "w") as fh:
    fh.write(ids + "\n")
print("wrote", sorted(os.listdir(OUT)))
