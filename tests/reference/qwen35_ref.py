"""Reference forward pass of Qwen3.5's text model (Hugging Face Qwen3_5ForConditionalGeneration
language model) in PyTorch, float64, written from the published definition (transformers'
modeling_qwen3_5: Qwen3_5DecoderLayer, Qwen3_5Attention, Qwen3_5GatedDeltaNet with
torch_recurrent_gated_delta_rule, Qwen3_5RMSNorm, Qwen3NextRMSNormGated), token by token —
never the chunked WY form:
  - RMSNorm multiplies by (1 + w) (zero-centred weights), except the DeltaNet's gated output
    norm, which multiplies by w and then by silu(z);
  - gated attention: q_proj gives [heads, 2 head_dim] per token, q then gate; q_norm, k_norm;
    rotary on the first partial_rotary_factor x head_dim dims (rotate_half pairs (i, i + d/2);
    for text every multimodal section carries the token position); GQA h // (heads / kv);
    softmax(q k^T / sqrt(head_dim)); out * sigmoid(gate); o_proj;
  - Gated DeltaNet: in_proj_qkv -> depthwise causal conv1d -> SiLU -> q, k, v; l2norm(q),
    l2norm(k) (eps 1e-6); q / sqrt(d_k); beta = sigmoid(in_proj_b); g = -exp(A_log) *
    softplus(in_proj_a + dt_bias); value head j uses key head j // (Hv / Hk) (repeat_interleave);
    S = S e^g; S += k ((v - S^T k) beta)^T; o = S^T q; rmsnorm(o) w silu(z); out_proj.
Qwen3.5-MoE (Qwen3_5MoeSparseMoeBlock): softmax router over all experts, top-k renormalised,
experts stacked as gate_up_proj [E, 2I, H] (gate rows first) and down_proj [E, H, I], plus the
shared expert times sigmoid(shared_expert_gate . x).
Reads a Hugging Face folder, or a GGUF written for llama.cpp (its conventions undone here:
norms store 1 + w, ssm_a = -exp(A_log), value heads tiled j % Hk). Used by golden_test.py."""
import math

import numpy as np
import torch

from checkpoint_io import read_gguf, read_hf_folder
from moe_ref import experts, route, swiglu

QWEN35_TYPES = ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
F = torch.nn.functional


class Qwen35Model:
    def __init__(self, c, w, prefix):
        self.c, self.w, self.p = c, w, prefix

    @staticmethod
    def from_hf(path):
        cfg, t = read_hf_folder(path)
        c = cfg.get("text_config", cfg)
        prefix = ("model.language_model." if "text_config" in cfg or cfg.get("model_type") in ("qwen3_5", "qwen3_5_moe")
                  else "model.")
        return Qwen35Model(c, {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()}, prefix)

    @staticmethod
    def from_gguf(path):
        meta, t = read_gguf(path)
        a = meta["general.architecture"] + "."
        blocks = meta[a + "block_count"] - meta.get(a + "nextn_predict_layers", 0)
        rec = meta.get(a + "attention.recurrent_layers")
        hk, hv, s = meta[a + "ssm.group_count"], meta[a + "ssm.time_step_rank"], meta[a + "ssm.state_size"]
        rope_dim = meta.get(a + "rope.dimension_count")
        hd = meta[a + "attention.key_length"]
        c = {"num_hidden_layers": blocks, "hidden_size": meta[a + "embedding_length"],
             "num_attention_heads": meta[a + "attention.head_count"],
             "num_key_value_heads": meta[a + "attention.head_count_kv"], "head_dim": hd,
             "rms_norm_eps": meta[a + "attention.layer_norm_rms_epsilon"],
             "linear_num_key_heads": hk, "linear_num_value_heads": hv, "linear_key_head_dim": s,
             "linear_value_head_dim": s, "linear_conv_kernel_dim": meta[a + "ssm.conv_kernel"],
             "layer_types": ["linear_attention" if (rec[i] if rec else (i + 1) % 4 != 0) else "full_attention"
                             for i in range(blocks)],
             "rope_parameters": {"rope_theta": meta[a + "rope.freq_base"],
                                 "partial_rotary_factor": (rope_dim or hd) / hd}}
        if a == "qwen35moe.":
            c.update(num_experts=meta[a + "expert_count"], num_experts_per_tok=meta[a + "expert_used_count"],
                     moe_intermediate_size=meta[a + "expert_feed_forward_length"])
        w = {}
        r = hv // hk
        # GGUF value head j = r_ * hk + g holds HF value head g * r + r_.
        to_gguf = [(hf % r) * hk + hf // r for hf in range(hv)]

        def group_rows(x, first, per):
            head = [x[first + j * per:first + (j + 1) * per] for j in range(hv)]
            return np.concatenate([x[:first]] + [head[to_gguf[hf]] for hf in range(hv)] + [x[first + hv * per:]])

        names = {"attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
                 "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
                 "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
                 "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
                 "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
                 "ffn_down.weight": "mlp.down_proj.weight", "attn_qkv.weight": "linear_attn.in_proj_qkv.weight",
                 "attn_gate.weight": "linear_attn.in_proj_z.weight", "ssm_beta.weight": "linear_attn.in_proj_b.weight",
                 "ssm_alpha.weight": "linear_attn.in_proj_a.weight", "ssm_conv1d.weight": "linear_attn.conv1d.weight",
                 "ssm_dt.bias": "linear_attn.dt_bias", "ssm_a": "linear_attn.A_log", "ssm_norm.weight": "linear_attn.norm.weight",
                 "ssm_out.weight": "linear_attn.out_proj.weight", "ffn_gate_inp.weight": "mlp.gate.weight",
                 "ffn_down_exps.weight": "mlp.experts.down_proj", "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
                 "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
                 "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
                 "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight"}
        for layer in range(blocks):  # llama.cpp's separate gate and up experts, fused as HF stacks them
            g = t.get("blk.%d.ffn_gate_exps.weight" % layer)
            if g is not None:
                w["model.layers.%d.mlp.experts.gate_up_proj" % layer] = np.concatenate(
                    [g, t["blk.%d.ffn_up_exps.weight" % layer]], axis=1)
        for name, x in t.items():
            if name == "token_embd.weight":
                w["model.embed_tokens.weight"] = x
            elif name == "output_norm.weight":
                w["model.norm.weight"] = x - 1.0
            elif name == "output.weight":
                w["lm_head.weight"] = x
            elif name.startswith("blk."):
                _, layer, rest = name.split(".", 2)
                if int(layer) >= blocks or rest not in names:
                    continue
                hf = names[rest]
                if rest.endswith("norm.weight") and rest != "ssm_norm.weight":
                    x = x - 1.0
                if rest == "ssm_a":
                    x = np.log(-x)
                if rest in ("attn_qkv.weight", "ssm_conv1d.weight"):
                    x = group_rows(x, 2 * hk * s, s)
                elif rest == "attn_gate.weight":
                    x = group_rows(x, 0, s)
                elif rest in ("ssm_beta.weight", "ssm_alpha.weight", "ssm_dt.bias", "ssm_a"):
                    x = group_rows(x, 0, 1)
                elif rest == "ssm_out.weight":
                    x = group_rows(x.T, 0, s).T
                if rest == "ssm_conv1d.weight":
                    x = x[:, None, :]
                w["model.layers.%s.%s" % (layer, hf)] = x
        return Qwen35Model(c, {k: torch.from_numpy(np.ascontiguousarray(v).astype(np.float64)) for k, v in w.items()}, "model.")

    def eps(self):
        return self.c.get("rms_norm_eps", 1e-6)

    def norm1p(self, x, w):  # Qwen3_5RMSNorm: x / rms(x) * (1 + w)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps()) * (1.0 + w)

    def rope(self, x, positions):  # x [T, heads, head_dim]; rotate_half on the first rope_dim dims
        hd = x.shape[-1]
        r = self.c.get("rope_parameters", self.c)
        rd = int(hd * r.get("partial_rotary_factor", 0.25))
        theta = r.get("rope_theta", 1e7)
        inv = 1.0 / theta ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd)
        ang = positions[:, None].double() * inv[None, :]
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
        rot, rest = x[..., :rd], x[..., rd:]
        x1, x2 = rot[..., :rd // 2], rot[..., rd // 2:]
        rotated = torch.cat([-x2, x1], -1)
        return torch.cat([rot * cos[:, None, :] + rotated * sin[:, None, :], rest], -1)

    def attention(self, h, p, positions):
        c, w = self.c, self.w
        T, nh, nkv, hd = h.shape[0], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        qg = (h @ w[p + "self_attn.q_proj.weight"].T).view(T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(T, nkv, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(T, nkv, hd)
        q, k = self.norm1p(q, w[p + "self_attn.q_norm.weight"]), self.norm1p(k, w[p + "self_attn.k_norm.weight"])
        q, k = self.rope(q, positions), self.rope(k, positions)
        rep = nh // nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.einsum("hts,shd->thd", scores.softmax(-1), v).reshape(T, nh * hd)
        return (out * torch.sigmoid(gate)) @ w[p + "self_attn.o_proj.weight"].T

    def delta_net(self, h, p):
        c, w = self.c, self.w
        T = h.shape[0]
        hk, hv, dk, dv = c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"]
        K = c["linear_conv_kernel_dim"]
        key_dim, conv_dim = hk * dk, 2 * hk * dk + hv * dv
        mixed = h @ w[p + "linear_attn.in_proj_qkv.weight"].T
        z = (h @ w[p + "linear_attn.in_proj_z.weight"].T).view(T, hv, dv)
        b = h @ w[p + "linear_attn.in_proj_b.weight"].T
        a = h @ w[p + "linear_attn.in_proj_a.weight"].T
        cw = w[p + "linear_attn.conv1d.weight"][:, 0, :]  # [conv_dim, K], cross-correlation, left zero padding
        padded = torch.cat([torch.zeros(K - 1, conv_dim, dtype=torch.float64), mixed], dim=0)
        conv = F.silu(torch.stack([(padded[t:t + K].T * cw).sum(-1) for t in range(T)]))
        q = conv[:, :key_dim].view(T, hk, dk)
        k = conv[:, key_dim:2 * key_dim].view(T, hk, dk)
        v = conv[:, 2 * key_dim:].view(T, hv, dv)

        def l2norm(x):
            return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)

        q, k = l2norm(q) / math.sqrt(dk), l2norm(k)
        q, k = q.repeat_interleave(hv // hk, dim=1), k.repeat_interleave(hv // hk, dim=1)
        beta = torch.sigmoid(b)
        g = -w[p + "linear_attn.A_log"].exp() * F.softplus(a + w[p + "linear_attn.dt_bias"])
        S = torch.zeros(hv, dk, dv, dtype=torch.float64)
        out = torch.zeros(T, hv, dv, dtype=torch.float64)
        for t in range(T):
            S = S * g[t].exp()[:, None, None]
            kv_mem = (S * k[t][:, :, None]).sum(-2)
            delta = (v[t] - kv_mem) * beta[t][:, None]
            S = S + k[t][:, :, None] * delta[:, None, :]
            out[t] = (S * q[t][:, :, None]).sum(-2)
        normed = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + self.eps()) * w[p + "linear_attn.norm.weight"]
        gated = (normed * F.silu(z)).reshape(T, hv * dv)
        return gated @ w[p + "linear_attn.out_proj.weight"].T

    def logits(self, ids):
        c, w, pre = self.c, self.w, self.p
        x = w[pre + "embed_tokens.weight"][torch.tensor(ids)]
        positions = torch.arange(len(ids))
        types = c.get("layer_types") or ["linear_attention" if (i + 1) % c.get("full_attention_interval", 4) else "full_attention"
                                         for i in range(c["num_hidden_layers"])]
        for i in range(c["num_hidden_layers"]):
            p = "%slayers.%d." % (pre, i)
            h = self.norm1p(x, w[p + "input_layernorm.weight"])
            x = x + (self.delta_net(h, p) if types[i] == "linear_attention" else self.attention(h, p, positions))
            h = self.norm1p(x, w[p + "post_attention_layernorm.weight"])
            if "num_experts" in c:
                ids_, wt = route(h @ w[p + "mlp.gate.weight"].T, c["num_experts_per_tok"], norm=True)
                gu, dn, n_i = w[p + "mlp.experts.gate_up_proj"], w[p + "mlp.experts.down_proj"], c["moe_intermediate_size"]
                moe = experts(h, ids_, wt, lambda e, r: swiglu(r, gu[e][:n_i], gu[e][n_i:], dn[e]))
                sh = swiglu(h, *(w[p + "mlp.shared_expert.%s_proj.weight" % n] for n in ("gate", "up", "down")))
                x = x + moe + sh * torch.sigmoid(h @ w[p + "mlp.shared_expert_gate.weight"].T)
                continue
            x = x + (F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        x = self.norm1p(x, w[pre + "norm.weight"])
        head = w.get("lm_head.weight", w[pre + "embed_tokens.weight"])
        return (x @ head.T).numpy()
