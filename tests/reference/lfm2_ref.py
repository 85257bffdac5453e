"""Reference LFM2 / LFM2-MoE forward pass in PyTorch (float64), written from Hugging Face's
modeling_lfm2 (Lfm2ForCausalLM) and modeling_lfm2_moe (Lfm2MoeForCausalLM), independent of
radixlm's C++ code. Used by golden_test.py on a GGUF (llama.cpp's lfm2 / lfm2moe layout, read
into the Hugging Face roles).

What it computes: per layer x += mixer(operator_norm(x)); x += feed_forward(ffn_norm(x)), every
norm x / rms(x) * w.
  - conv layers (Lfm2ShortConv): B, C, x = in_proj(h).chunk(3); y = C * conv1d(B * x) with a
    depthwise causal kernel of conv_L_cache taps (no bias), out_proj(y);
  - attention layers: q, k per-head normed (q_layernorm, k_layernorm), rotate_half RoPE, scaled
    dot product 1/sqrt(head_dim), GQA, out_proj;
  - feed-forward: w2(silu(w1 h) * w3 h); or (MoE past num_dense_layers) sigmoid router scores,
    the top k chosen by scores + expert_bias, weights the scores renormalised (norm_topk_prob),
    times routed_scaling_factor, each expert the same SwiGLU;
  - logits: embedding_norm then the tied embeddings (or lm_head).
"""
import math

import numpy as np
import torch

from checkpoint_io import read_gguf, read_hf_folder

LFM2_TYPES = ("lfm2", "lfm2_moe")
# Hugging Face names -> the GGUF names this reference computes with.
HF_NAMES = [(r"^model\.embed_tokens\.weight$", "token_embd.weight"),
            (r"^model\.embedding_norm\.weight$", "token_embd_norm.weight"),
            (r"^lm_head\.weight$", "output.weight"),
            (r"^model\.layers\.(\d+)\.operator_norm\.weight$", r"blk.\1.attn_norm.weight"),
            (r"^model\.layers\.(\d+)\.ffn_norm\.weight$", r"blk.\1.ffn_norm.weight"),
            (r"^model\.layers\.(\d+)\.conv\.(in_proj|out_proj)\.weight$", r"blk.\1.shortconv.\2.weight"),
            (r"^model\.layers\.(\d+)\.conv\.conv\.weight$", r"blk.\1.shortconv.conv.weight"),
            (r"^model\.layers\.(\d+)\.self_attn\.(q|k|v)_proj\.weight$", r"blk.\1.attn_\2.weight"),
            (r"^model\.layers\.(\d+)\.self_attn\.out_proj\.weight$", r"blk.\1.attn_output.weight"),
            (r"^model\.layers\.(\d+)\.self_attn\.(q|k)_layernorm\.weight$", r"blk.\1.attn_\2_norm.weight"),
            (r"^model\.layers\.(\d+)\.feed_forward\.w1\.weight$", r"blk.\1.ffn_gate.weight"),
            (r"^model\.layers\.(\d+)\.feed_forward\.w3\.weight$", r"blk.\1.ffn_up.weight"),
            (r"^model\.layers\.(\d+)\.feed_forward\.w2\.weight$", r"blk.\1.ffn_down.weight"),
            (r"^model\.layers\.(\d+)\.feed_forward\.gate\.weight$", r"blk.\1.ffn_gate_inp.weight"),
            (r"^model\.layers\.(\d+)\.feed_forward\.expert_bias$", r"blk.\1.exp_probs_b.bias")]


class Lfm2Model:
    def __init__(self, meta, w, arch):
        a = arch + "."
        self.w = w
        self.L = meta[a + "block_count"]
        self.d = meta[a + "embedding_length"]
        self.H = meta[a + "attention.head_count"]
        kv = meta[a + "attention.head_count_kv"]
        self.kv = kv if isinstance(kv, list) else [kv] * self.L
        self.hd = meta.get(a + "attention.key_length", self.d // self.H)
        self.eps = meta[a + "attention.layer_norm_rms_epsilon"]
        self.theta = meta.get(a + "rope.freq_base", 1e6)
        self.conv = meta[a + "shortconv.l_cache"]
        self.used = meta.get(a + "expert_used_count", 0)
        self.dense = meta.get(a + "leading_dense_block_count", self.L)
        self.norm_topk = bool(meta.get(a + "expert_weights_norm", True))
        self.scale = meta.get(a + "expert_weights_scale", 0.0) or 1.0

    @staticmethod
    def from_gguf(path):
        meta, t = read_gguf(path)
        return Lfm2Model(meta, {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()},
                         meta["general.architecture"])

    @staticmethod
    def from_hf(path):
        """A Hugging Face folder (Lfm2Config / Lfm2MoeConfig), read into the GGUF roles."""
        import re
        cfg, t = read_hf_folder(path)
        arch = "lfm2moe" if cfg["model_type"] == "lfm2_moe" else "lfm2"
        a = arch + "."
        L = cfg["num_hidden_layers"]
        meta = {a + "block_count": L, a + "embedding_length": cfg["hidden_size"],
                a + "attention.head_count": cfg["num_attention_heads"],
                a + "attention.head_count_kv": [cfg["num_key_value_heads"] if x == "full_attention" else 0
                                                for x in cfg["layer_types"]],
                a + "attention.layer_norm_rms_epsilon": cfg["norm_eps"], a + "rope.freq_base": cfg["rope_theta"],
                a + "shortconv.l_cache": cfg["conv_L_cache"],
                a + "expert_used_count": cfg.get("num_experts_per_tok", 0),
                a + "leading_dense_block_count": cfg.get("num_dense_layers", L),
                a + "expert_weights_norm": cfg.get("norm_topk_prob", True),
                a + "expert_weights_scale": cfg.get("routed_scaling_factor", 1.0)}
        w, experts = {}, {}
        for name, arr in t.items():
            x = torch.from_numpy(arr.astype(np.float64))
            m = re.match(r"^model\.layers\.(\d+)\.feed_forward\.experts\.(\d+)\.(w1|w2|w3)\.weight$", name)
            if m:
                experts.setdefault((int(m[1]), m[3]), {})[int(m[2])] = x
                continue
            for pattern, gguf_name in HF_NAMES:
                if re.match(pattern, name):
                    w[re.sub(pattern, gguf_name, name)] = x.reshape(x.shape[0], -1) if "conv.conv" in name else x
                    break
            else:
                raise KeyError("unexpected tensor " + name)
        stem = {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps"}
        for (b, kind), per in experts.items():
            w["blk.%d.%s.weight" % (b, stem[kind])] = torch.stack([per[e] for e in sorted(per)])
        return Lfm2Model(meta, w, arch)

    def vocab(self):
        return self.w["token_embd.weight"].shape[0]

    def norm(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, positions):
        hd = x.shape[-1]
        inv = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        ang = positions[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
        rot = torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + rot * sin

    def short_conv(self, h, i):
        p, T, d = "blk.%d.shortconv." % i, h.shape[0], self.d
        bcx = h @ self.w[p + "in_proj.weight"].T
        B, C, x = bcx[:, :d], bcx[:, d:2 * d], bcx[:, 2 * d:]
        bx = B * x
        k = self.w[p + "conv.weight"]  # [d, L]
        padded = torch.cat([torch.zeros(self.conv - 1, d, dtype=torch.float64), bx], 0)
        out = torch.stack([(padded[t:t + self.conv] * k.T).sum(0) for t in range(T)])
        return (C * out) @ self.w[p + "out_proj.weight"].T

    def attention(self, h, i, positions):
        p, T, H, KV, hd = "blk.%d." % i, h.shape[0], self.H, self.kv[i], self.hd
        q = self.norm((h @ self.w[p + "attn_q.weight"].T).view(T, H, hd), self.w[p + "attn_q_norm.weight"])
        k = self.norm((h @ self.w[p + "attn_k.weight"].T).view(T, KV, hd), self.w[p + "attn_k_norm.weight"])
        v = (h @ self.w[p + "attn_v.weight"].T).view(T, KV, hd)
        q, k = self.rope(q, positions), self.rope(k, positions)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        idx = torch.arange(T)
        scores = scores.masked_fill(~(idx[None, :] <= idx[:, None])[None], float("-inf"))
        out = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v).reshape(T, H * hd)
        return out @ self.w[p + "attn_output.weight"].T

    def swiglu(self, h, gate, up, down):
        g = h @ gate.T
        return (g * torch.sigmoid(g) * (h @ up.T)) @ down.T

    def feed_forward(self, h, i):
        p = "blk.%d." % i
        if i < self.dense or p + "ffn_gate_inp.weight" not in self.w:
            return self.swiglu(h, self.w[p + "ffn_gate.weight"], self.w[p + "ffn_up.weight"], self.w[p + "ffn_down.weight"])
        scores = torch.sigmoid(h @ self.w[p + "ffn_gate_inp.weight"].T)
        _, top = torch.topk(scores + self.w[p + "exp_probs_b.bias"], self.used, dim=-1)
        weights = scores.gather(-1, top)
        if self.norm_topk:
            weights = weights / weights.sum(-1, keepdim=True)
        weights = weights * self.scale
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for j in range(self.used):
                e = int(top[t, j])
                out[t] += weights[t, j] * self.swiglu(h[t:t + 1], self.w[p + "ffn_gate_exps.weight"][e],
                                                      self.w[p + "ffn_up_exps.weight"][e],
                                                      self.w[p + "ffn_down_exps.weight"][e])[0]
        return out

    def logits(self, ids):
        w = self.w
        x = w["token_embd.weight"][torch.tensor(ids)]
        positions = torch.arange(len(ids), dtype=torch.float64)
        for i in range(self.L):
            h = self.norm(x, w["blk.%d.attn_norm.weight" % i])
            x = x + (self.attention(h, i, positions) if self.kv[i] > 0 else self.short_conv(h, i))
            x = x + self.feed_forward(self.norm(x, w["blk.%d.ffn_norm.weight" % i]), i)
        x = self.norm(x, w["token_embd_norm.weight"])
        return (x @ w.get("output.weight", w["token_embd.weight"]).T).numpy()
