"""Reference Gemma 4 text forward pass in PyTorch (float64), written from Hugging Face's
modeling_gemma4 (Gemma4ForCausalLM, dense layers), independent of radixlm's C++ code. Used by
golden_test.py on a GGUF (llama.cpp's gemma4 layout, read into the Hugging Face roles).

What it computes:
  - embeddings times sqrt(hidden_size); per-layer inputs (hidden_size_per_layer_input > 0):
    embed_tokens_per_layer[ids] * sqrt(n_pl) plus per_layer_projection_norm(
    per_layer_model_projection(embeddings) / sqrt(hidden_size)), times 2^-1/2;
  - per layer: x += post_attention_layernorm(attn(input_layernorm(x))); x +=
    post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))); with per-layer inputs x +=
    post_per_layer_input_norm(per_layer_projection(gelu_tanh(per_layer_input_gate(x)) * pl[l]));
    then x *= layer_scalar;
  - every norm is x / rms(x) * w (no 1 + w); v gets the norm without a weight;
  - attention: q, k per-head normed, then RoPE (rotate_half); scaling 1; a sliding layer uses
    base rope_local_base_freq over its whole head and sees keys j with i - j < sliding_window;
    a full layer uses "proportional" RoPE: the first partial_rotary_factor * head_dim / 2 pairs
    turn with inv_freq = base^(-2i / head_dim), the rest not at all;
  - a layer with no v_proj uses its k projection (before the k norm) as v; the last
    num_kv_shared_layers layers compute only q and attend over the K/V of the last earlier layer
    of their kind;
  - with experts (enable_moe_block, the 26B-A4B): the MLP output is normed
    (post_feedforward_layernorm_1); the router reads norm(x_residual) (no weight) * scale *
    hidden_size^-1/2, softmax over all experts, the top k renormalised, each weight times its
    per_expert_scale; the experts (gelu_tanh(gate) * up, down) read
    pre_feedforward_layernorm_2(x_residual); their sum is normed (post_feedforward_layernorm_2)
    and added to the MLP's before post_feedforward_layernorm;
  - logits from the tied embeddings with the final softcap.
"""
import math

import numpy as np
import torch

from checkpoint_io import read_gguf


def gelu_tanh(g):
    return 0.5 * g * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))


class Gemma4Model:
    def __init__(self, meta, w):
        a = "gemma4."
        self.w = w
        self.L = meta[a + "block_count"]
        self.d = meta[a + "embedding_length"]
        self.H = meta[a + "attention.head_count"]
        kv = meta[a + "attention.head_count_kv"]
        self.kv = kv if isinstance(kv, list) else [kv] * self.L
        self.sliding = [bool(x) for x in meta[a + "attention.sliding_window_pattern"]]
        self.window = meta[a + "attention.sliding_window"]
        self.hd = [meta[a + "attention.key_length_swa"] if s else meta[a + "attention.key_length"] for s in self.sliding]
        self.eps = meta[a + "attention.layer_norm_rms_epsilon"]
        self.theta = meta.get(a + "rope.freq_base", 1e6)
        self.theta_swa = meta.get(a + "rope.freq_base_swa", 1e4)
        self.pl = meta.get(a + "embedding_length_per_layer_input", 0)
        self.cap = meta.get(a + "final_logit_softcapping")
        self.used = meta.get(a + "expert_used_count", 0)
        shared = meta.get(a + "attention.shared_kv_layers", 0)
        first_shared = self.L - shared
        # HF: a shared layer reads the last non-shared layer of its own type.
        self.kv_source = list(range(self.L))
        for i in range(first_shared, self.L):
            self.kv_source[i] = max(j for j in range(first_shared) if self.sliding[j] == self.sliding[i])
        # Proportional RoPE: rope_freqs holds 1 for the pairs that turn, 1e30 for the rest.
        freqs = w.get("rope_freqs.weight")
        self.turning = int((freqs < 1e10).sum()) if freqs is not None else None

    @staticmethod
    def from_gguf(path):
        meta, t = read_gguf(path)
        return Gemma4Model(meta, {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()})

    def vocab(self):
        return self.w["token_embd.weight"].shape[0]

    def norm(self, x, w=None):
        y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.eps)
        return y if w is None else y * w

    def rope(self, x, positions, theta, turning):
        hd = x.shape[-1]
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        if turning is not None:
            inv[turning:] = 0.0
        ang = positions[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
        rot = torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + rot * sin

    def attention(self, h, i, positions, kv_cache):
        p, T, H, hd = "blk.%d." % i, h.shape[0], self.H, self.hd[i]
        s = self.sliding[i]
        theta, turning = (self.theta_swa, None) if s else (self.theta, self.turning)
        q = self.norm((h @ self.w[p + "attn_q.weight"].T).view(T, H, hd), self.w[p + "attn_q_norm.weight"])
        q = self.rope(q, positions, theta, turning)
        if self.kv_source[i] == i:
            KV = self.kv[i]
            k_raw = (h @ self.w[p + "attn_k.weight"].T).view(T, KV, hd)
            v_raw = (h @ self.w[p + "attn_v.weight"].T).view(T, KV, hd) if p + "attn_v.weight" in self.w else k_raw
            k = self.rope(self.norm(k_raw, self.w[p + "attn_k_norm.weight"]), positions, theta, turning)
            kv_cache[i] = (k, self.norm(v_raw))
        k, v = kv_cache[self.kv_source[i]]
        KV = k.shape[1]
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k)
        idx = torch.arange(T)
        allowed = idx[None, :] <= idx[:, None]
        if s:
            allowed &= idx[:, None] - idx[None, :] < self.window
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        out = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v).reshape(T, H * hd)
        return out @ self.w[p + "attn_output.weight"].T

    def mlp(self, h, i):
        p = "blk.%d." % i
        g = h @ self.w[p + "ffn_gate.weight"].T
        return (gelu_tanh(g) * (h @ self.w[p + "ffn_up.weight"].T)) @ self.w[p + "ffn_down.weight"].T

    def experts(self, x, i):
        """The mixture of experts of block i on the residual x (HF Gemma4TextRouter / Experts)."""
        p, d = "blk.%d." % i, x.shape[-1]
        w = self.w
        logits = (self.norm(x) * w[p + "ffn_gate_inp.scale"] * d ** -0.5) @ w[p + "ffn_gate_inp.weight"].T
        probs = torch.softmax(logits, -1)
        top_w, top_i = torch.topk(probs, self.used, dim=-1)
        top_w = top_w / top_w.sum(-1, keepdim=True)
        if p + "ffn_down_exps.scale" in w:
            top_w = top_w * w[p + "ffn_down_exps.scale"][top_i]
        h = self.norm(x, w[p + "pre_ffw_norm_2.weight"])
        if p + "ffn_gate_up_exps.weight" in w:
            gu = w[p + "ffn_gate_up_exps.weight"]
            gate, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        else:
            gate, up = w[p + "ffn_gate_exps.weight"], w[p + "ffn_up_exps.weight"]
        down = w[p + "ffn_down_exps.weight"]
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            for j in range(self.used):
                e = int(top_i[t, j])
                y = (gelu_tanh(gate[e] @ h[t]) * (up[e] @ h[t])) @ down[e].T
                out[t] += top_w[t, j] * y
        return self.norm(out, w[p + "post_ffw_norm_2.weight"])

    def per_layer_inputs(self, ids, x):
        T = len(ids)
        tok = self.w["per_layer_token_embd.weight"][torch.tensor(ids)] * math.sqrt(self.pl)
        proj = (x @ self.w["per_layer_model_proj.weight"].T) / math.sqrt(self.d)
        proj = self.norm(proj.view(T, self.L, self.pl), self.w["per_layer_proj_norm.weight"])
        return (proj + tok.view(T, self.L, self.pl)) * 2 ** -0.5

    def logits(self, ids):
        w = self.w
        x = w["token_embd.weight"][torch.tensor(ids)] * math.sqrt(self.d)
        pl = self.per_layer_inputs(ids, x) if self.pl > 0 else None
        positions = torch.arange(len(ids), dtype=torch.float64)
        kv_cache = {}
        for i in range(self.L):
            p = "blk.%d." % i
            h = self.attention(self.norm(x, w[p + "attn_norm.weight"]), i, positions, kv_cache)
            x = x + self.norm(h, w[p + "post_attention_norm.weight"])
            h = self.mlp(self.norm(x, w[p + "ffn_norm.weight"]), i)
            if p + "ffn_gate_inp.weight" in w:
                h = self.norm(h, w[p + "post_ffw_norm_1.weight"]) + self.experts(x, i)
            x = x + self.norm(h, w[p + "post_ffw_norm.weight"])
            if pl is not None:
                g = gelu_tanh(x @ w[p + "inp_gate.weight"].T) * pl[:, i]
                x = x + self.norm(g @ w[p + "proj.weight"].T, w[p + "post_norm.weight"])
            if p + "layer_output_scale.weight" in w:
                x = x * w[p + "layer_output_scale.weight"][0]
        x = self.norm(x, w["output_norm.weight"])
        out = x @ w.get("output.weight", w["token_embd.weight"]).T
        if self.cap:
            out = self.cap * torch.tanh(out / self.cap)
        return out.numpy()
