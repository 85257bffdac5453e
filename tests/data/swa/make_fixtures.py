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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from byte_vocabulary import VOCAB, add_byte_vocabulary  # noqa: E402

# 96 ids: positions 32..95 are past the 16-token window twice over.
IDS = [int(x) for x in np.random.default_rng(48).integers(0, VOCAB, 96)]


def header(w, arch, d, blocks, ffn, heads, kv, hd, eps, theta, experts=None):
    """The keys every fixture writes, in this order; experts: (count, used), each of `ffn`."""
    w.add_name("radixlm %s fixture (random weights)" % arch)
    w.add_context_length(4096)
    w.add_embedding_length(d)
    w.add_block_count(blocks)
    w.add_feed_forward_length(ffn)
    if experts:
        w.add_expert_count(experts[0])
        w.add_expert_used_count(experts[1])
        w.add_expert_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(eps)
    w.add_rope_freq_base(theta)


def random_tensors(w, seed):
    """t(name, shape, std, mean=0): adds an f32 tensor of seeded N(mean, std) values."""
    rng = np.random.default_rng(seed)

    def t(name, shape, std, mean=0.0):
        w.add_tensor(name, (mean + std * rng.standard_normal(shape)).astype(np.float32))
    return t


def write_gemma3(path, seed):
    """Gemma 3 text layout: 6 blocks (0-4 slide with a 16-token window, 5 is global: llama.cpp's
    default pattern), 2 q / 1 kv heads x 32, d 64, GeGLU 128, tied embeddings. Norm weights are
    stored as the converter writes them, (1 + w), drawn N(1, 0.1)."""
    D, BLOCKS, HEADS, KV, HD, FFN = 64, 6, 2, 1, 32, 128
    w = gguf.GGUFWriter(path, "gemma3")
    header(w, "gemma3", D, BLOCKS, FFN, HEADS, KV, HD, 1e-6, 1e6)
    w.add_sliding_window(16)
    add_byte_vocabulary(w, gguf)
    t = random_tensors(w, seed)

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
    w = gguf.GGUFWriter(path, "gpt-oss")
    header(w, "gpt-oss", D, BLOCKS, FFN, HEADS, KV, HD, 1e-5, 150000.0, experts=(E, K))
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(4.0)
    w.add_rope_scaling_orig_ctx_len(32)
    w.add_sliding_window(16)
    add_byte_vocabulary(w, gguf)
    t = random_tensors(w, seed)

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


def gemma4_header(w, name, d, blocks, ffn, heads, kv, window, sliding, extra, experts=None):
    """The gemma4 keys both fixtures write, in this order: global heads of 32 dims, sliding of 16,
    RoPE 1e6 / 1e4; extra() adds the fixture's own keys after the window pattern; experts:
    (count, used, ffn)."""
    w.add_name(name)
    w.add_context_length(4096)
    w.add_embedding_length(d)
    w.add_block_count(blocks)
    w.add_feed_forward_length(ffn)
    if experts:
        w.add_expert_count(experts[0])
        w.add_expert_used_count(experts[1])
        w.add_expert_feed_forward_length(experts[2])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(32)
    w.add_value_length(32)
    w.add_key_length_swa(16)
    w.add_value_length_swa(16)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_rope_freq_base_swa(1e4)
    w.add_rope_dimension_count(32)
    w.add_rope_dimension_count_swa(16)
    w.add_sliding_window(window)
    w.add_sliding_window_pattern(sliding)
    extra()
    w.add_final_logit_softcapping(30.0)
    add_byte_vocabulary(w, gguf)


def write_gemma4(path, seed):
    """Gemma 4 layout as llama.cpp's gemma4 reads it: 6 blocks sliding [1,1,1,0,1,0] with a
    16-token window; sliding heads of 16 dims (1 kv head), global heads of 32 (2 kv heads:
    head_count_kv is an array); the last 2 blocks share the KV of blocks 2 (sliding) and 3
    (global) (attention.shared_kv_layers) and have no attn_k / attn_v / attn_k_norm; block 3
    has no attn_v (V = its K projection); proportional RoPE on the global layers (rope_freqs:
    4 of 16 pairs turn, base 1e6), base 1e4 on the sliding ones; per-layer embeddings of 8
    (per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm; inp_gate, proj,
    post_norm per block); layer_output_scale per block; feed-forward 128, 256 on the shared
    blocks (feed_forward_length is an array); final logit softcap 30; tied embeddings. Norms
    are plain weights (Gemma 4 does not shift them), drawn N(1, 0.1)."""
    D, BLOCKS, HEADS, PL, WINDOW = 64, 6, 2, 8, 16
    sliding = [True, True, True, False, True, False]
    hd = [16 if s else 32 for s in sliding]
    kv = [1 if s else 2 for s in sliding]
    ffn = [128, 128, 128, 128, 256, 256]
    shared = 2
    w = gguf.GGUFWriter(path, "gemma4")
    gemma4_header(w, "radixlm gemma4 fixture (random weights)", D, BLOCKS, ffn, HEADS, kv, WINDOW, sliding,
                  lambda: (w.add_shared_kv_layers(shared), w.add_embedding_length_per_layer_input(PL)))
    t = random_tensors(w, seed)

    t("token_embd.weight", (VOCAB, D), 0.25)
    w.add_tensor("rope_freqs.weight", np.array([1.0] * 4 + [1e30] * 12, dtype=np.float32))
    t("per_layer_token_embd.weight", (VOCAB, PL * BLOCKS), 0.25)
    t("per_layer_model_proj.weight", (PL * BLOCKS, D), 0.12)
    t("per_layer_proj_norm.weight", (PL,), 0.1, 1.0)
    for b in range(BLOCKS):
        p = f"blk.{b}."
        has_kv = b < BLOCKS - shared
        t(p + "attn_norm.weight", (D,), 0.1, 1.0)
        t(p + "attn_q.weight", (HEADS * hd[b], D), 0.12)
        t(p + "attn_q_norm.weight", (hd[b],), 0.1, 1.0)
        if has_kv:
            t(p + "attn_k.weight", (kv[b] * hd[b], D), 0.12)
            t(p + "attn_k_norm.weight", (hd[b],), 0.1, 1.0)
            if b != 3:
                t(p + "attn_v.weight", (kv[b] * hd[b], D), 0.12)
        t(p + "attn_output.weight", (D, HEADS * hd[b]), 0.12)
        t(p + "post_attention_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_gate.weight", (ffn[b], D), 0.12)
        t(p + "ffn_up.weight", (ffn[b], D), 0.12)
        t(p + "ffn_down.weight", (D, ffn[b]), 0.12)
        t(p + "post_ffw_norm.weight", (D,), 0.1, 1.0)
        t(p + "inp_gate.weight", (PL, D), 0.12)
        t(p + "proj.weight", (D, PL), 0.12)
        t(p + "post_norm.weight", (D,), 0.1, 1.0)
        t(p + "layer_output_scale.weight", (1,), 0.2, 0.8)
    t("output_norm.weight", (D,), 0.1, 1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gemma4_moe(path, seed):
    """Gemma 4 26B-A4B layout (gemma4 with experts): 4 blocks sliding [1,1,1,0] with a 16-token
    window; sliding heads of 16 dims (2 kv heads), global heads of 32 (1 kv head); the global
    block has no attn_v (V = its K projection); every block's feed-forward is a dense GeGLU MLP
    of 64 beside 4 experts of 32 (2 per token; softmax over all, top 2 renormalised), the router
    reading rms_norm(x) / sqrt(d) * ffn_gate_inp.scale, per-expert ffn_down_exps.scale, the
    norms pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2 and post_ffw_norm; experts' gate and
    up fused (ffn_gate_up_exps) in blocks 0-1 and separate in 2-3; proportional RoPE on the
    global block; no per-layer inputs (embedding_length_per_layer_input 0); tied embeddings; final
    softcap 30."""
    D, BLOCKS, HEADS, WINDOW, FFN, E, K, F = 64, 4, 2, 16, 64, 4, 2, 32
    sliding = [True, True, True, False]
    hd = [16 if s else 32 for s in sliding]
    kv = [2 if s else 1 for s in sliding]
    w = gguf.GGUFWriter(path, "gemma4")
    gemma4_header(w, "radixlm gemma4 moe fixture (random weights)", D, BLOCKS, FFN, HEADS, kv, WINDOW, sliding,
                  lambda: w.add_embedding_length_per_layer_input(0),  # llama.cpp requires the key
                  experts=(E, K, F))
    t = random_tensors(w, seed)

    t("token_embd.weight", (VOCAB, D), 0.25)
    w.add_tensor("rope_freqs.weight", np.array([1.0] * 4 + [1e30] * 12, dtype=np.float32))
    for b in range(BLOCKS):
        p = f"blk.{b}."
        t(p + "attn_norm.weight", (D,), 0.1, 1.0)
        t(p + "attn_q.weight", (HEADS * hd[b], D), 0.12)
        t(p + "attn_q_norm.weight", (hd[b],), 0.1, 1.0)
        t(p + "attn_k.weight", (kv[b] * hd[b], D), 0.12)
        t(p + "attn_k_norm.weight", (hd[b],), 0.1, 1.0)
        if sliding[b]:
            t(p + "attn_v.weight", (kv[b] * hd[b], D), 0.12)
        t(p + "attn_output.weight", (D, HEADS * hd[b]), 0.12)
        t(p + "post_attention_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_norm.weight", (D,), 0.1, 1.0)
        t(p + "ffn_gate.weight", (FFN, D), 0.12)
        t(p + "ffn_up.weight", (FFN, D), 0.12)
        t(p + "ffn_down.weight", (D, FFN), 0.12)
        t(p + "post_ffw_norm_1.weight", (D,), 0.1, 1.0)
        t(p + "ffn_gate_inp.weight", (E, D), 0.3)
        t(p + "ffn_gate_inp.scale", (D,), 0.1, 1.0)
        t(p + "pre_ffw_norm_2.weight", (D,), 0.1, 1.0)
        if b < 2:
            t(p + "ffn_gate_up_exps.weight", (E, 2 * F, D), 0.12)
        else:
            t(p + "ffn_gate_exps.weight", (E, F, D), 0.12)
            t(p + "ffn_up_exps.weight", (E, F, D), 0.12)
        t(p + "ffn_down_exps.weight", (E, D, F), 0.12)
        t(p + "ffn_down_exps.scale", (E,), 0.2, 1.0)
        t(p + "post_ffw_norm_2.weight", (D,), 0.1, 1.0)
        t(p + "post_ffw_norm.weight", (D,), 0.1, 1.0)
        t(p + "layer_output_scale.weight", (1,), 0.2, 0.8)
    t("output_norm.weight", (D,), 0.1, 1.0)
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


for stem, write, seed in [("gemma3-tiny", write_gemma3, 20261129), ("gpt-oss-tiny", write_gpt_oss, 20261130),
                         ("gemma4-tiny", write_gemma4, 20261131), ("gemma4-moe-tiny", write_gemma4_moe, 20261132)]:
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
