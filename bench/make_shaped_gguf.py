#!/usr/bin/env python3
"""Writes GGUFs with the shapes of real sliding-window models and random weights, for benchmarks
(bench/multiturn_vs_llamaserver.py, bench/vs_llamacpp.sh): written by llama.cpp's own gguf-py
(from the checkout bench/vs_llamacpp.sh builds), then quantised by its llama-quantize, so neither
file is radixlm's export. A byte-level vocabulary (258 tokens) stands in for the real one.

  make_shaped_gguf.py LLAMA_CPP_DIR OUT_DIR gemma3|gemma4|gpt-oss|lfm2|lfm2moe [--blocks N] [--types Q8_0,BF16,...]

gemma3: Gemma 3 1B's block (d 1152, 4 q / 1 kv heads x 256, GeGLU 6912, window 512, RoPE 1e6 /
1e4), N blocks (default 6: five sliding, one global). gemma4: Gemma 4 E4B's block (d 2560, 8 q
heads; sliding 2 kv x 256, global 2 kv x 512 with proportional RoPE; GeGLU 10240, window 512,
per-layer inputs of 256, layer_output_scale), N blocks (default 6: five sliding, one global), no
shared-KV blocks. lfm2: LFM2-1.2B's block (d 2048, short convolutions of 3, attention 32 q / 8 kv
heads x 64 at every third block, SwiGLU 8192), N blocks (default 6: two attention). lfm2moe:
LFM2-8B-A1B's (d 2048, 32 experts of 1792, 4 used, sigmoid routing with a bias, SwiGLU 7168 in the
2 leading dense blocks), N blocks (default 4: 2 dense, 2 with experts; one attention). gpt-oss: gpt-oss-20b's attention (d 2880,
64 q / 8 kv heads x 64, window 128, sinks, YaRN 32 over 4096) with 8 of its 32 experts of 2880
(4 per token), N blocks (default 2: one sliding, one global); quantise with MXFP4_MOE."""
import argparse
import os
import subprocess
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("llama")
ap.add_argument("out")
ap.add_argument("arch", choices=["gemma3", "gemma4", "gpt-oss", "lfm2", "lfm2moe"])
ap.add_argument("--blocks", type=int)
ap.add_argument("--types", default="")
args = ap.parse_args()
sys.path.insert(0, os.path.join(args.llama, "gguf-py"))
import gguf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data"))
from byte_vocabulary import VOCAB, add_byte_vocabulary  # noqa: E402



rng = np.random.default_rng(7)


def tensor(w, name, shape, std, mean=0.0):
    w.add_tensor(name, (mean + std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32))


def common(w, d, blocks, ffn, heads, kv, hd, eps, theta, window):
    w.add_context_length(131072)
    w.add_embedding_length(d)
    w.add_block_count(blocks)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(eps)
    w.add_rope_freq_base(theta)
    w.add_sliding_window(window)
    add_byte_vocabulary(w, gguf)


def gemma3(path, blocks):
    d, heads, kv, hd, ffn = 1152, 4, 1, 256, 6912
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_name("gemma3-1b-shaped (random weights)")
    common(w, d, blocks, ffn, heads, kv, hd, 1e-6, 1e6, 512)
    s = 1 / np.sqrt(d)
    tensor(w, "token_embd.weight", (VOCAB, d), 0.05)
    for b in range(blocks):
        p = f"blk.{b}."
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            tensor(w, p + n + ".weight", (d,), 0.1, 1.0)
        tensor(w, p + "attn_q.weight", (heads * hd, d), s)
        tensor(w, p + "attn_k.weight", (kv * hd, d), s)
        tensor(w, p + "attn_v.weight", (kv * hd, d), s)
        tensor(w, p + "attn_q_norm.weight", (hd,), 0.1, 1.0)
        tensor(w, p + "attn_k_norm.weight", (hd,), 0.1, 1.0)
        tensor(w, p + "attn_output.weight", (d, heads * hd), s)
        tensor(w, p + "ffn_gate.weight", (ffn, d), s)
        tensor(w, p + "ffn_up.weight", (ffn, d), s)
        tensor(w, p + "ffn_down.weight", (d, ffn), 1 / np.sqrt(ffn))
    tensor(w, "output_norm.weight", (d,), 0.1, 1.0)
    return w


def gemma4(path, blocks):
    d, heads, kv, hd_swa, hd, ffn, pl = 2560, 8, 2, 256, 512, 10240, 256
    sliding = [b % 6 != 5 for b in range(blocks)]
    w = gguf.GGUFWriter(path, "gemma4")
    w.add_name("gemma4-e4b-shaped (random weights)")
    common(w, d, blocks, ffn, heads, kv, hd, 1e-6, 1e6, 512)
    w.add_key_length_swa(hd_swa)
    w.add_value_length_swa(hd_swa)
    w.add_rope_freq_base_swa(1e4)
    w.add_rope_dimension_count(hd)
    w.add_rope_dimension_count_swa(hd_swa)
    w.add_sliding_window_pattern(sliding)
    w.add_shared_kv_layers(0)
    w.add_embedding_length_per_layer_input(pl)
    w.add_final_logit_softcapping(30.0)
    s = 1 / np.sqrt(d)
    tensor(w, "token_embd.weight", (VOCAB, d), 0.05)
    w.add_tensor("rope_freqs.weight", np.array([1.0] * 64 + [1e30] * 192, dtype=np.float32))
    tensor(w, "per_layer_token_embd.weight", (VOCAB, blocks * pl), 0.05)
    tensor(w, "per_layer_model_proj.weight", (blocks * pl, d), s)
    tensor(w, "per_layer_proj_norm.weight", (pl,), 0.1, 1.0)
    for b in range(blocks):
        p, h = f"blk.{b}.", hd_swa if sliding[b] else hd
        for n in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm", "post_norm"):
            tensor(w, p + n + ".weight", (d,), 0.1, 1.0)
        tensor(w, p + "attn_q.weight", (heads * h, d), s)
        tensor(w, p + "attn_k.weight", (kv * h, d), s)
        tensor(w, p + "attn_v.weight", (kv * h, d), s)
        tensor(w, p + "attn_q_norm.weight", (h,), 0.1, 1.0)
        tensor(w, p + "attn_k_norm.weight", (h,), 0.1, 1.0)
        tensor(w, p + "attn_output.weight", (d, heads * h), 1 / np.sqrt(heads * h))
        tensor(w, p + "ffn_gate.weight", (ffn, d), s)
        tensor(w, p + "ffn_up.weight", (ffn, d), s)
        tensor(w, p + "ffn_down.weight", (d, ffn), 1 / np.sqrt(ffn))
        tensor(w, p + "inp_gate.weight", (pl, d), s)
        tensor(w, p + "proj.weight", (d, pl), 1 / np.sqrt(pl))
        tensor(w, p + "layer_output_scale.weight", (1,), 0.05, 0.5)
    tensor(w, "output_norm.weight", (d,), 0.1, 1.0)
    return w


def lfm2(path, blocks, moe=False):
    d, heads, kv, hd, ffn, conv = 2048, 32, 8, 64, 7168 if moe else 8192, 3
    experts, used, eff, dense = 32, 4, 1792, 2
    attn = [b % 3 == 2 for b in range(blocks)]
    arch = "lfm2moe" if moe else "lfm2"
    w = gguf.GGUFWriter(path, arch)
    w.add_name("%s-shaped (random weights)" % ("lfm2-8b-a1b" if moe else "lfm2-1.2b"))
    w.add_context_length(128000)
    w.add_embedding_length(d)
    w.add_block_count(blocks)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv([kv if a else 0 for a in attn])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(1e6)
    w.add_vocab_size(VOCAB)
    w.add_shortconv_l_cache(conv)
    if moe:
        w.add_expert_count(experts)
        w.add_expert_used_count(used)
        w.add_expert_feed_forward_length(eff)
        w.add_leading_dense_block_count(dense)
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_weights_norm(True)
    add_byte_vocabulary(w, gguf)
    s = 1 / np.sqrt(d)
    tensor(w, "token_embd.weight", (VOCAB, d), 0.05)
    for b in range(blocks):
        p = f"blk.{b}."
        tensor(w, p + "attn_norm.weight", (d,), 0.1, 1.0)
        tensor(w, p + "ffn_norm.weight", (d,), 0.1, 1.0)
        if attn[b]:
            tensor(w, p + "attn_q.weight", (heads * hd, d), s)
            tensor(w, p + "attn_k.weight", (kv * hd, d), s)
            tensor(w, p + "attn_v.weight", (kv * hd, d), s)
            tensor(w, p + "attn_q_norm.weight", (hd,), 0.1, 1.0)
            tensor(w, p + "attn_k_norm.weight", (hd,), 0.1, 1.0)
            tensor(w, p + "attn_output.weight", (d, heads * hd), s)
        else:
            tensor(w, p + "shortconv.in_proj.weight", (3 * d, d), s)
            tensor(w, p + "shortconv.conv.weight", (d, conv), 0.5)
            tensor(w, p + "shortconv.out_proj.weight", (d, d), s)
        if moe and b >= dense:
            tensor(w, p + "ffn_gate_inp.weight", (experts, d), s)
            tensor(w, p + "exp_probs_b.bias", (experts,), 0.1)
            tensor(w, p + "ffn_gate_exps.weight", (experts, eff, d), s)
            tensor(w, p + "ffn_up_exps.weight", (experts, eff, d), s)
            tensor(w, p + "ffn_down_exps.weight", (experts, d, eff), 1 / np.sqrt(eff))
        else:
            tensor(w, p + "ffn_gate.weight", (ffn, d), s)
            tensor(w, p + "ffn_up.weight", (ffn, d), s)
            tensor(w, p + "ffn_down.weight", (d, ffn), 1 / np.sqrt(ffn))
    tensor(w, "token_embd_norm.weight", (d,), 0.1, 1.0)
    return w


def gpt_oss(path, blocks):
    d, heads, kv, hd, ffn, experts, used = 2880, 64, 8, 64, 2880, 8, 4
    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_name("gpt-oss-20b-shaped (random weights, 8 experts)")
    common(w, d, blocks, ffn, heads, kv, hd, 1e-5, 150000.0, 128)
    w.add_expert_count(experts)
    w.add_expert_used_count(used)
    w.add_expert_feed_forward_length(ffn)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(32.0)
    w.add_rope_scaling_orig_ctx_len(4096)
    s = 1 / np.sqrt(d)
    tensor(w, "token_embd.weight", (VOCAB, d), 0.05)
    for b in range(blocks):
        p = f"blk.{b}."
        tensor(w, p + "attn_norm.weight", (d,), 0.1, 1.0)
        tensor(w, p + "post_attention_norm.weight", (d,), 0.1, 1.0)
        for n, rows in (("attn_q", heads * hd), ("attn_k", kv * hd), ("attn_v", kv * hd)):
            tensor(w, p + n + ".weight", (rows, d), s)
            tensor(w, p + n + ".bias", (rows,), 0.02)
        tensor(w, p + "attn_output.weight", (d, heads * hd), 1 / np.sqrt(heads * hd))
        tensor(w, p + "attn_output.bias", (d,), 0.02)
        tensor(w, p + "attn_sinks.weight", (heads,), 1.0)
        tensor(w, p + "ffn_gate_inp.weight", (experts, d), s)
        tensor(w, p + "ffn_gate_inp.bias", (experts,), 0.02)
        for n in ("ffn_gate_exps", "ffn_up_exps"):
            tensor(w, p + n + ".weight", (experts, ffn, d), s)
            tensor(w, p + n + ".bias", (experts, ffn), 0.02)
        tensor(w, p + "ffn_down_exps.weight", (experts, d, ffn), 1 / np.sqrt(ffn))
        tensor(w, p + "ffn_down_exps.bias", (experts, d), 0.02)
    tensor(w, "output_norm.weight", (d,), 0.1, 1.0)
    tensor(w, "output.weight", (VOCAB, d), s)
    return w


os.makedirs(args.out, exist_ok=True)
stem = args.arch + "-shaped"
base = os.path.join(args.out, stem + "-f32.gguf")
writers = {"gemma3": gemma3, "gemma4": gemma4, "gpt-oss": gpt_oss, "lfm2": lfm2,
           "lfm2moe": lambda path, blocks: lfm2(path, blocks, moe=True)}
default_blocks = {"gpt-oss": 2, "lfm2moe": 4}
w = writers[args.arch](base, args.blocks or default_blocks.get(args.arch, 6))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
bin_dir = os.path.join(args.llama, "build", "bin")
for t in filter(None, args.types.split(",")):
    out = os.path.join(args.out, "%s-%s.gguf" % (stem, t.lower()))
    subprocess.run([os.path.join(bin_dir, "llama-quantize"), base, out, t, "2"], check=True, capture_output=True,
                   env=dict(os.environ, LD_LIBRARY_PATH=bin_dir))
    print("wrote", out)
