"""Writes the LFM2 test fixtures of tests/data/lfm2 (see README.md there).

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

IDS = [int(x) for x in np.random.default_rng(49).integers(0, VOCAB, 96)]
# LFM2-1.2B's pattern cut to 6 blocks: short convolutions, attention at blocks 2 and 5.
ATTENTION = [False, False, True, False, False, True]
D, HEADS, KV, HD, FFN, L = 64, 4, 2, 16, 128, 3


def write(path, arch, seed, experts=None):
    """experts: (count, used, ffn, leading dense blocks) for lfm2moe."""
    rng = np.random.default_rng(seed)

    def t(name, shape, std, mean=0.0):
        w.add_tensor(name, (mean + std * rng.standard_normal(shape)).astype(np.float32))

    w = gguf.GGUFWriter(path, arch)
    w.add_name("radixlm %s fixture (random weights)" % arch)
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_block_count(len(ATTENTION))
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv([KV if a else 0 for a in ATTENTION])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(1e6)
    w.add_vocab_size(VOCAB)
    w.add_shortconv_l_cache(L)
    if experts:
        E, K, F, dense = experts
        w.add_expert_count(E)
        w.add_expert_used_count(K)
        w.add_expert_feed_forward_length(F)
        w.add_leading_dense_block_count(dense)
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_weights_norm(True)
    add_byte_vocabulary(w, gguf)

    t("token_embd.weight", (VOCAB, D), 0.25)
    for b, attn in enumerate(ATTENTION):
        p = f"blk.{b}."
        t(p + "attn_norm.weight", (D,), 0.1, 1.0)
        if attn:
            t(p + "attn_q.weight", (HEADS * HD, D), 0.12)
            t(p + "attn_k.weight", (KV * HD, D), 0.12)
            t(p + "attn_v.weight", (KV * HD, D), 0.12)
            t(p + "attn_q_norm.weight", (HD,), 0.1, 1.0)
            t(p + "attn_k_norm.weight", (HD,), 0.1, 1.0)
            t(p + "attn_output.weight", (D, HEADS * HD), 0.12)
        else:
            t(p + "shortconv.in_proj.weight", (3 * D, D), 0.12)
            t(p + "shortconv.conv.weight", (D, L), 0.5)
            t(p + "shortconv.out_proj.weight", (D, D), 0.12)
        t(p + "ffn_norm.weight", (D,), 0.1, 1.0)
        if experts and b >= experts[3]:
            E, K, F, _ = experts
            t(p + "ffn_gate_inp.weight", (E, D), 0.3)
            t(p + "exp_probs_b.bias", (E,), 0.5)
            t(p + "ffn_gate_exps.weight", (E, F, D), 0.12)
            t(p + "ffn_up_exps.weight", (E, F, D), 0.12)
            t(p + "ffn_down_exps.weight", (E, D, F), 0.12)
        else:
            t(p + "ffn_gate.weight", (FFN, D), 0.12)
            t(p + "ffn_up.weight", (FFN, D), 0.12)
            t(p + "ffn_down.weight", (D, FFN), 0.12)
    t("token_embd_norm.weight", (D,), 0.1, 1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


bin_dir = os.path.join(LLAMA, "build", "bin")
env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
logits_tool = os.path.join(os.path.dirname(os.path.abspath(LLAMA)), "llamacpp_logits")
ids = ",".join(map(str, IDS))
for stem, arch, seed, experts in [("lfm2-tiny", "lfm2", 20261201, None),
                                  ("lfm2moe-tiny", "lfm2moe", 20261202, (4, 2, 32, 2))]:
    f = os.path.join(OUT, stem + ".gguf")
    write(f, arch, seed, experts)
    subprocess.run([logits_tool, f, ids, os.path.join(OUT, stem + ".llamacpp-logits.f32"), "1"],
                   env=env, check=True, capture_output=True)
# bf16 weights as people run them (llama-quantize BF16), for the bf16 top-1 check.
q = os.path.join(OUT, "lfm2-tiny-bf16.gguf")
subprocess.run([os.path.join(bin_dir, "llama-quantize"), os.path.join(OUT, "lfm2-tiny.gguf"), q, "BF16", "1"],
               env=env, check=True, capture_output=True)
subprocess.run([logits_tool, q, ids, os.path.join(OUT, "lfm2-tiny-bf16.llamacpp-logits.f32"), "1"],
               env=env, check=True, capture_output=True)
with open(os.path.join(OUT, "ids.txt"), "w") as fh:
    fh.write(ids + "\n")
print("wrote", sorted(os.listdir(OUT)))
