"""Reference Llama / Qwen2 / Qwen3 / Qwen3-MoE forward pass in PyTorch (float64), written from
the model definitions (Hugging Face modeling_llama / modeling_qwen2 / modeling_qwen3 /
modeling_qwen3_moe and llama.cpp's GGUF conventions), independent of radixlm's C++ code. Used
by golden_test.py."""
import math
import re

import numpy as np
import torch

from checkpoint_io import read_gguf, read_hf_folder
from moe_ref import experts, route, swiglu


class Model:
    """Holds a config dict and float64 weights under GGUF names."""

    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w

    @staticmethod
    def from_gguf(path):
        meta, t = read_gguf(path)
        arch = meta["general.architecture"]
        a = arch + "."
        heads = meta[a + "attention.head_count"]
        d = meta[a + "embedding_length"]
        cfg = dict(arch=arch, d=d, blocks=meta[a + "block_count"], heads=heads,
                   kv_heads=meta.get(a + "attention.head_count_kv", heads),
                   head_dim=meta.get(a + "attention.key_length", d // heads),
                   eps=meta[a + "attention.layer_norm_rms_epsilon"],
                   theta=meta.get(a + "rope.freq_base", 10000.0),
                   # llama.cpp permutes llama q/k rows so that adjacent-pair RoPE is right.
                   rope="interleaved" if arch == "llama" else "neox",
                   freq_factors=t.get("rope_freqs.weight"), scaling=None)
        if arch == "qwen3moe":  # llama.cpp always renormalises the chosen weights
            cfg["moe"] = dict(k=meta[a + "expert_used_count"], norm=True)
        w = {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()}
        return Model(cfg, w)

    @staticmethod
    def from_hf(path):
        c, t = read_hf_folder(path)
        names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                 "lm_head.weight": "output.weight"}
        per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                     "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                     "self_attn.v_proj.weight": "attn_v.weight", "self_attn.q_proj.bias": "attn_q.bias",
                     "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
                     "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
                     "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                     "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
        w, exps = {}, {}
        for k, v in t.items():
            m = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$", k)
            if m:  # Qwen3-MoE: one tensor per expert
                exps.setdefault("blk.%s.ffn_%s_exps.weight" % (m[1], m[3]), {})[int(m[2])] = v
            elif k.endswith(".mlp.gate.weight"):
                w["blk.%s.ffn_gate_inp.weight" % k.split(".")[2]] = v
            elif k in names:
                w[names[k]] = v
            else:
                parts = k.split(".")
                w["blk.%s.%s" % (parts[2], per_layer[".".join(parts[3:])])] = v
        for name, by_id in exps.items():
            w[name] = np.stack([by_id[e] for e in range(len(by_id))])
        w = {k: torch.from_numpy(v.astype(np.float64)) for k, v in w.items()}
        if c.get("tie_word_embeddings"):
            w.pop("output.weight", None)
        cfg = dict(arch=c["model_type"], d=c["hidden_size"], blocks=c["num_hidden_layers"],
                   heads=c["num_attention_heads"], kv_heads=c.get("num_key_value_heads", c["num_attention_heads"]),
                   head_dim=c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                   eps=c["rms_norm_eps"], theta=c.get("rope_theta", 10000.0), rope="neox",
                   freq_factors=None, scaling=c.get("rope_scaling"))
        if c["model_type"] == "qwen3_moe":
            cfg["moe"] = dict(k=c["num_experts_per_tok"], norm=c.get("norm_topk_prob", False))
        return Model(cfg, w)

    def inv_freq(self):
        c = self.cfg
        hd = c["head_dim"]
        f = 1.0 / (c["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        if c["freq_factors"] is not None:
            f = f / torch.from_numpy(c["freq_factors"].astype(np.float64))
        s = c["scaling"]
        if s:  # Llama 3.1 (HF _compute_llama3_parameters)
            low_wl = s["original_max_position_embeddings"] / s["low_freq_factor"]
            high_wl = s["original_max_position_embeddings"] / s["high_freq_factor"]
            out = []
            for x in f.tolist():
                wl = 2 * math.pi / x
                if wl < high_wl:
                    out.append(x)
                elif wl > low_wl:
                    out.append(x / s["factor"])
                else:
                    sm = (s["original_max_position_embeddings"] / wl - s["low_freq_factor"]) / (
                        s["high_freq_factor"] - s["low_freq_factor"])
                    out.append((1 - sm) * x / s["factor"] + sm * x)
            f = torch.tensor(out, dtype=torch.float64)
        return f

    def rope(self, x, pos):
        # x: [T, H, hd]
        ang = pos[:, None].double() * self.inv_freq()[None, :]  # [T, hd/2]
        cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
        if self.cfg["rope"] == "neox":
            h = x.shape[-1] // 2
            x1, x2 = x[..., :h], x[..., h:]
            return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x1 * cos - x2 * sin
        out[..., 1::2] = x1 * sin + x2 * cos
        return out

    def rmsnorm(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg["eps"]) * w

    def logits(self, ids):
        c, w = self.cfg, self.w
        T = len(ids)
        pos = torch.arange(T)
        x = w["token_embd.weight"][torch.tensor(ids)]
        H, KV, hd = c["heads"], c["kv_heads"], c["head_dim"]
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        for b in range(c["blocks"]):
            p = "blk.%d." % b
            h = self.rmsnorm(x, w[p + "attn_norm.weight"])
            q, k, v = (h @ w[p + n + ".weight"].T + (w[p + n + ".bias"] if p + n + ".bias" in w else 0)
                       for n in ("attn_q", "attn_k", "attn_v"))
            q, k, v = q.view(T, H, hd), k.view(T, KV, hd), v.view(T, KV, hd)
            if p + "attn_q_norm.weight" in w:
                q = self.rmsnorm(q, w[p + "attn_q_norm.weight"])
                k = self.rmsnorm(k, w[p + "attn_k_norm.weight"])
            q, k = self.rope(q, pos), self.rope(k, pos)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
            o = torch.einsum("hts,shd->thd", torch.softmax(att, dim=-1), v).reshape(T, H * hd)
            x = x + o @ w[p + "attn_output.weight"].T
            h = self.rmsnorm(x, w[p + "ffn_norm.weight"])
            if "moe" in c:  # softmax router, top-k, renormalised when the model says so
                ids, wt = route(h @ w[p + "ffn_gate_inp.weight"].T, c["moe"]["k"], norm=c["moe"]["norm"])
                g, u, d = (w[p + "ffn_%s_exps.weight" % n] for n in ("gate", "up", "down"))
                x = x + experts(h, ids, wt, lambda e, r: swiglu(r, g[e], u[e], d[e]))
                continue
            g = h @ w[p + "ffn_gate.weight"].T
            x = x + (torch.nn.functional.silu(g) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        x = self.rmsnorm(x, w["output_norm.weight"])
        head = w.get("output.weight", w["token_embd.weight"])
        return (x @ head.T).numpy()
