"""Reference gpt-oss forward pass in PyTorch (float64), written from Hugging Face's
modeling_gpt_oss (GptOssForCausalLM) and read from a GGUF (llama.cpp's names), independent of
radixlm's C++ code. Used by golden_test.py.

What it computes, per block: h = rmsnorm(x) * w; q, k, v with biases; NeoX RoPE with YaRN
(_compute_yarn_parameters: ramp between the correction dims of beta_fast 32 and beta_slow 1,
rounded out as llama.cpp always does, cos / sin times 0.1 ln(factor) + 1); eager attention whose
softmax runs over the scores and the head's sink logit (the sink column dropped after), with a
sliding window on the layers that slide (key j visible from i when i - j < window); o_proj with
bias; x += that. Then h = rmsnorm(x) * post_attention_norm; router logits (with bias), top-k,
softmax over the chosen; each chosen expert: gate = min(gate, 7), up = clamp(up, -7, 7),
(up + 1) * gate * sigmoid(1.702 gate), down with bias, times its weight; x += their sum. Logits
from output.weight after the final norm.
"""
import math

import numpy as np
import torch

from checkpoint_io import read_gguf


class GptOssModel:
    def __init__(self, meta, w):
        a = "gpt-oss."
        self.w = w
        self.blocks = meta[a + "block_count"]
        self.d = meta[a + "embedding_length"]
        self.heads = meta[a + "attention.head_count"]
        self.kv = meta[a + "attention.head_count_kv"]
        self.hd = meta.get(a + "attention.key_length", self.d // self.heads)
        self.eps = meta[a + "attention.layer_norm_rms_epsilon"]
        self.theta = meta.get(a + "rope.freq_base", 10000.0)
        self.k = meta[a + "expert_used_count"]
        self.window = meta[a + "attention.sliding_window"]
        pattern = meta.get(a + "attention.sliding_window_pattern", 2)
        if isinstance(pattern, list):
            self.sliding = [bool(x) for x in pattern[:self.blocks]]
        else:
            self.sliding = [pattern == 0 or i % pattern < pattern - 1 for i in range(self.blocks)]
        self.yarn = None
        if meta.get(a + "rope.scaling.type") == "yarn":
            self.yarn = (meta[a + "rope.scaling.factor"], meta.get(a + "rope.scaling.original_context_length", 4096))

    @staticmethod
    def from_gguf(path):
        meta, t = read_gguf(path)
        return GptOssModel(meta, {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()})

    def vocab(self):
        return self.w["token_embd.weight"].shape[0]

    def norm(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def inv_freq(self):
        dim = self.hd
        inv = 1.0 / (self.theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if not self.yarn:
            return inv, 1.0
        factor, orig = self.yarn

        def correction_dim(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(self.theta))

        low = max(math.floor(correction_dim(32)), 0)
        high = min(math.ceil(correction_dim(1)), dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp
        inv = inv / factor * (1 - extrapolation) + inv * extrapolation
        return inv, 0.1 * math.log(factor) + 1.0

    def rope(self, x, positions):
        inv, mscale = self.inv_freq()
        ang = positions[:, None] * inv[None, :]
        cos = (torch.cat([ang.cos(), ang.cos()], -1) * mscale)[:, None, :]
        sin = (torch.cat([ang.sin(), ang.sin()], -1) * mscale)[:, None, :]
        half = self.hd // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    def attention(self, h, i, positions):
        p, w = "blk.%d." % i, self.w
        T = h.shape[0]
        q = (h @ w[p + "attn_q.weight"].T + w[p + "attn_q.bias"]).view(T, self.heads, self.hd)
        k = (h @ w[p + "attn_k.weight"].T + w[p + "attn_k.bias"]).view(T, self.kv, self.hd)
        v = (h @ w[p + "attn_v.weight"].T + w[p + "attn_v.bias"]).view(T, self.kv, self.hd)
        q, k = self.rope(q, positions), self.rope(k, positions)
        k = k.repeat_interleave(self.heads // self.kv, dim=1)
        v = v.repeat_interleave(self.heads // self.kv, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) * self.hd ** -0.5
        idx = torch.arange(T)
        allowed = idx[None, :] <= idx[:, None]
        if self.sliding[i]:
            allowed &= idx[:, None] - idx[None, :] < self.window
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        sinks = w[p + "attn_sinks.weight"].view(self.heads, 1, 1).expand(self.heads, T, 1)
        probs = torch.softmax(torch.cat([scores, sinks], -1), -1)[..., :-1]
        out = torch.einsum("hts,shd->thd", probs, v).reshape(T, self.heads * self.hd)
        return out @ w[p + "attn_output.weight"].T + w[p + "attn_output.bias"]

    def experts(self, h, i):
        p, w = "blk.%d." % i, self.w
        logits = h @ w[p + "ffn_gate_inp.weight"].T + w[p + "ffn_gate_inp.bias"]
        top, ids = torch.topk(logits, self.k, dim=-1)
        weights = torch.softmax(top, -1)
        out = torch.zeros_like(h)
        for t in range(h.shape[0]):
            for j in range(self.k):
                e = int(ids[t, j])
                gate = h[t] @ w[p + "ffn_gate_exps.weight"][e].T + w[p + "ffn_gate_exps.bias"][e]
                up = h[t] @ w[p + "ffn_up_exps.weight"][e].T + w[p + "ffn_up_exps.bias"][e]
                gate, up = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
                act = (up + 1) * gate * torch.sigmoid(gate * 1.702)
                y = act @ w[p + "ffn_down_exps.weight"][e].T + w[p + "ffn_down_exps.bias"][e]
                out[t] += weights[t, j] * y
        return out

    def logits(self, ids):
        w = self.w
        x = w["token_embd.weight"][torch.tensor(ids)]
        positions = torch.arange(len(ids), dtype=torch.float64)
        for i in range(self.blocks):
            p = "blk.%d." % i
            x = x + self.attention(self.norm(x, w[p + "attn_norm.weight"]), i, positions)
            x = x + self.experts(self.norm(x, w[p + "post_attention_norm.weight"]), i)
        x = self.norm(x, w["output_norm.weight"])
        return (x @ w.get("output.weight", w["token_embd.weight"]).T).numpy()
