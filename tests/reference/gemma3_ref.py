"""Reference Gemma 3 text forward pass in PyTorch (float64), written from Hugging Face's
modeling_gemma3 (Gemma3ForCausalLM), independent of radixlm's C++ code. Used by golden_test.py.

What it computes: embeddings times sqrt(hidden_size); per layer x += post_attention_layernorm(
attn(input_layernorm(x))) and x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)));
every norm is x / rms(x) * (1 + w); q/k get the same per-head norm before RoPE (rotate_half);
a sliding layer uses base rope_local_base_freq and sees keys j with i - j < sliding_window, a
full layer base rope_theta (divided by a linear rope_scaling factor) and the whole causal prefix;
scores are scaled by query_pre_attn_scalar^-1/2; the MLP is gelu_tanh(gate) * up; logits from
the tied embeddings, with an optional final softcap.

A GGUF (llama.cpp's gemma3) is read into the same names: its norms store (1 + w), and the layers
that slide come from attention.sliding_window(_pattern) as llama.cpp reads them (pattern 6).
"""
import math

import numpy as np
import torch

from checkpoint_io import read_gguf, read_hf_folder

GEMMA3_TYPES = ("gemma3_text", "gemma3")


class Gemma3Model:
    def __init__(self, c, w, prefix):
        self.c, self.w, self.p = c, w, prefix

    @staticmethod
    def from_hf(path):
        cfg, t = read_hf_folder(path)
        c = cfg.get("text_config", cfg)
        prefix = "language_model.model." if "text_config" in cfg else "model."
        return Gemma3Model(c, {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()}, prefix)

    @staticmethod
    def from_gguf(path):
        meta, t = read_gguf(path)
        a = "gemma3."
        blocks = meta[a + "block_count"]
        window = meta.get(a + "attention.sliding_window", 0)
        pattern = meta.get(a + "attention.sliding_window_pattern", 6)
        if isinstance(pattern, list):
            sliding = [bool(x) for x in pattern[:blocks]]
        else:
            sliding = [pattern == 0 or i % pattern < pattern - 1 for i in range(blocks)]
        hd = meta[a + "attention.key_length"]
        d, heads = meta[a + "embedding_length"], meta[a + "attention.head_count"]
        c = {"num_hidden_layers": blocks, "hidden_size": d, "num_attention_heads": heads,
             "num_key_value_heads": meta[a + "attention.head_count_kv"], "head_dim": hd,
             "rms_norm_eps": meta[a + "attention.layer_norm_rms_epsilon"],
             "rope_theta": meta.get(a + "rope.freq_base", 1e6),
             "rope_local_base_freq": meta.get(a + "rope.freq_base_swa", 10000.0),
             "sliding_window": window,
             "layer_types": ["sliding_attention" if window > 0 and s else "full_attention" for s in sliding],
             # llama.cpp: 1/sqrt(head_dim), or 1/sqrt(d / heads) for the 62-block 27B.
             "query_pre_attn_scalar": d // heads if blocks == 62 else hd,
             "final_logit_softcapping": meta.get(a + "final_logit_softcapping")}
        if meta.get(a + "rope.scaling.type") == "linear":
            c["rope_scaling"] = {"rope_type": "linear", "factor": meta[a + "rope.scaling.factor"]}
        names = {"token_embd.weight": "embed_tokens.weight", "output_norm.weight": "norm.weight"}
        per = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
               "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
               "attn_k_norm": "self_attn.k_norm", "post_attention_norm": "post_attention_layernorm",
               "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
               "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
        w = {}
        for name, arr in t.items():
            x = torch.from_numpy(arr.astype(np.float64))
            if name.endswith("norm.weight"):
                x = x - 1.0  # the converter stores (1 + w)
            if name == "output.weight":
                w["lm_head.weight"] = x
                continue
            if name in names:
                w["model." + names[name]] = x
                continue
            _, b, stem, kind = name.split(".")
            w["model.layers.%s.%s.%s" % (b, per[stem], kind)] = x
        return Gemma3Model(c, w, "model.")

    def vocab(self):
        return self.w[self.p + "embed_tokens.weight"].shape[0]

    def norm(self, x, w):
        eps = self.c.get("rms_norm_eps", 1e-6)
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (1.0 + w)

    def rope(self, x, positions, theta, factor):
        hd = x.shape[-1]
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)) / factor
        ang = positions[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
        rot = torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + rot * sin

    def attention(self, h, i, positions):
        c, p = self.c, self.p + "layers.%d.self_attn." % i
        T, hd, H, KV = h.shape[0], c.get("head_dim", 256), c["num_attention_heads"], c["num_key_value_heads"]
        q = (h @ self.w[p + "q_proj.weight"].T).view(T, H, hd)
        k = (h @ self.w[p + "k_proj.weight"].T).view(T, KV, hd)
        v = (h @ self.w[p + "v_proj.weight"].T).view(T, KV, hd)
        q, k = self.norm(q, self.w[p + "q_norm.weight"]), self.norm(k, self.w[p + "k_norm.weight"])
        sliding = c["layer_types"][i] == "sliding_attention"
        scaling = c.get("rope_scaling") or {}
        if sliding:
            q = self.rope(q, positions, c.get("rope_local_base_freq", 10000.0), 1.0)
            k = self.rope(k, positions, c.get("rope_local_base_freq", 10000.0), 1.0)
        else:
            factor = scaling.get("factor", 1.0) if scaling.get("rope_type", scaling.get("type")) == "linear" else 1.0
            q = self.rope(q, positions, c.get("rope_theta", 1e6), factor)
            k = self.rope(k, positions, c.get("rope_theta", 1e6), factor)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * c.get("query_pre_attn_scalar", hd) ** -0.5
        idx = torch.arange(T)
        allowed = idx[None, :] <= idx[:, None]
        if sliding:
            allowed &= idx[:, None] - idx[None, :] < c["sliding_window"]
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        out = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v).reshape(T, H * hd)
        return out @ self.w[p + "o_proj.weight"].T

    def mlp(self, h, i):
        p = self.p + "layers.%d.mlp." % i
        g = h @ self.w[p + "gate_proj.weight"].T
        gelu = 0.5 * g * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))
        return (gelu * (h @ self.w[p + "up_proj.weight"].T)) @ self.w[p + "down_proj.weight"].T

    def logits(self, ids):
        c, p = self.c, self.p
        emb = self.w[p + "embed_tokens.weight"]
        x = emb[torch.tensor(ids)] * math.sqrt(c["hidden_size"])
        positions = torch.arange(len(ids), dtype=torch.float64)
        for i in range(c["num_hidden_layers"]):
            lp = p + "layers.%d." % i
            h = self.attention(self.norm(x, self.w[lp + "input_layernorm.weight"]), i, positions)
            x = x + self.norm(h, self.w[lp + "post_attention_layernorm.weight"])
            h = self.mlp(self.norm(x, self.w[lp + "pre_feedforward_layernorm.weight"]), i)
            x = x + self.norm(h, self.w[lp + "post_feedforward_layernorm.weight"])
        x = self.norm(x, self.w[p + "norm.weight"])
        head = self.w.get("lm_head.weight", emb)
        out = x @ head.T
        cap = c.get("final_logit_softcapping")
        if cap:
            out = cap * torch.tanh(out / cap)
        return out.numpy()
