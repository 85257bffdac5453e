"""Reference forward pass of Mamba2, Nemotron-H and Granite-4.0-H (dense MLP) in PyTorch,
float64, written from the model definitions (Hugging Face modeling_mamba2 /
modeling_nemotron_h / modeling_granitemoehybrid) and the Mamba2 paper's *sequential*
recurrence — token by token, never the chunked (SSD) algorithm radixlm uses for prefill:
    h_t = exp(dt_t * A) * h_{t-1} + dt_t * x_t B_t^T,   y_t = h_t C_t + D * x_t
Mixtures of experts (moe_ref.py): Granite-4.0-H-Tiny/Small (GraniteMoeHybridMoE: top-k of the
router logits, softmax over those, SwiGLU experts from input_linear [E, 2I, H] + the shared
MLP) and Nemotron-H 'E' blocks (NemotronHMOE: sigmoid scores, e_score_correction_bias ranks,
group-limited top-k, weights / (sum + 1e-20) when norm_topk_prob, times
routed_scaling_factor; relu^2 experts + the relu^2 shared expert).
Reads a Hugging Face folder (config.json + model.safetensors) by its own tensor names.
Used by golden_test.py."""
import math

import numpy as np
import torch

from checkpoint_io import read_hf_folder
from moe_ref import experts, relu2, route, swiglu

HYBRID_TYPES = ("mamba2", "nemotron_h", "granitemoehybrid")
F = torch.nn.functional


class HybridModel:
    def __init__(self, c, w):
        self.c, self.w = c, w
        self.type = c["model_type"]

    @staticmethod
    def from_hf(path):
        c, t = read_hf_folder(path)
        return HybridModel(c, {k: torch.from_numpy(v.astype(np.float64)) for k, v in t.items()})

    def eps(self):
        return self.c.get("layer_norm_epsilon", self.c.get("rms_norm_eps", 1e-5))

    def rmsnorm(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps()) * w

    def ssm_dims(self):
        c = self.c
        if self.type == "mamba2":
            return c["num_heads"], c["head_dim"], c["state_size"], c["n_groups"], c["conv_kernel"]
        if self.type == "nemotron_h":
            return c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"], c["n_groups"], c["conv_kernel"]
        return c["mamba_n_heads"], c["mamba_d_head"], c["mamba_d_state"], c["mamba_n_groups"], c["mamba_d_conv"]

    def mamba(self, h, p):
        w = self.w
        H, P, N, G, K = self.ssm_dims()
        T, inner = h.shape[0], H * P
        conv_dim = inner + 2 * G * N
        zxbcdt = h @ w[p + "in_proj.weight"].T
        z, xbc, dt = zxbcdt[:, :inner], zxbcdt[:, inner:inner + conv_dim], zxbcdt[:, inner + conv_dim:]
        # Depthwise causal conv over time (zero history), then SiLU on all of x, B, C.
        cw = w[p + "conv1d.weight"][:, 0, :]  # [conv_dim, K]
        padded = torch.cat([torch.zeros(K - 1, conv_dim, dtype=torch.float64), xbc], dim=0)
        conv = torch.stack([(padded[t:t + K].T * cw).sum(-1) for t in range(T)])
        if p + "conv1d.bias" in w:
            conv = conv + w[p + "conv1d.bias"]
        conv = F.silu(conv)
        x = conv[:, :inner].view(T, H, P)
        B = conv[:, inner:inner + G * N].view(T, G, N)
        C = conv[:, inner + G * N:].view(T, G, N)
        dt = F.softplus(dt + w[p + "dt_bias"])  # [T, H]
        A = -torch.exp(w[p + "A_log"])
        D = w[p + "D"]
        group = torch.arange(H) // (H // G)
        state = torch.zeros(H, P, N, dtype=torch.float64)
        ys = []
        for t in range(T):
            decay = torch.exp(dt[t] * A)  # [H]
            Bh, Ch = B[t, group], C[t, group]  # [H, N]
            state = decay[:, None, None] * state + dt[t][:, None, None] * x[t][:, :, None] * Bh[:, None, :]
            ys.append(torch.einsum("hpn,hn->hp", state, Ch) + D[:, None] * x[t])
        y = torch.stack(ys).reshape(T, inner) * F.silu(z)
        group_size = inner // G if self.type == "nemotron_h" else inner
        y = y.view(T, inner // group_size, group_size)
        y = (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps())).reshape(T, inner) * w[p + "norm.weight"]
        return y @ w[p + "out_proj.weight"].T

    def attention(self, h, p):
        c, w = self.c, self.w
        T = h.shape[0]
        Hq, Hkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        hd = c.get("head_dim") or c["hidden_size"] // Hq
        q = (h @ w[p + "q_proj.weight"].T).view(T, Hq, hd)
        k = (h @ w[p + "k_proj.weight"].T).view(T, Hkv, hd).repeat_interleave(Hq // Hkv, dim=1)
        v = (h @ w[p + "v_proj.weight"].T).view(T, Hkv, hd).repeat_interleave(Hq // Hkv, dim=1)
        # No positional embedding: Nemotron-H and Granite-4.0-H ("nope") attention.
        scale = c.get("attention_multiplier") or 1.0 / math.sqrt(hd)
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
        att = torch.softmax(torch.einsum("thd,shd->hts", q, k) * scale + mask, dim=-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, Hq * hd)
        return o @ w[p + "o_proj.weight"].T

    def logits(self, ids):
        c, w = self.c, self.w
        if self.type in ("mamba2", "nemotron_h"):
            x = w["backbone.embeddings.weight"][torch.tensor(ids)]
            if self.type == "mamba2":
                kinds = "M" * c["num_hidden_layers"]
            else:
                kinds = c["hybrid_override_pattern"]
            for i, kind in enumerate(kinds):
                p = "backbone.layers.%d." % i
                h = self.rmsnorm(x, w[p + "norm.weight"])
                if kind == "M":
                    x = x + self.mamba(h, p + "mixer.")
                elif kind == "*":
                    x = x + self.attention(h, p + "mixer.")
                elif kind == "E":
                    m = p + "mixer."
                    ids_, wt = route(h @ w[m + "gate.weight"].T, c["num_experts_per_tok"], gating="sigmoid",
                                     norm=c.get("norm_topk_prob", False), scale=c.get("routed_scaling_factor", 1.0),
                                     bias=w[m + "gate.e_score_correction_bias"], groups=c.get("n_group", 1),
                                     groups_used=c.get("topk_group", 1), norm_eps=1e-20)
                    ex = lambda e, r: relu2(r, w[m + "experts.%d.up_proj.weight" % e], w[m + "experts.%d.down_proj.weight" % e])
                    x = x + experts(h, ids_, wt, ex) + relu2(h, w[m + "shared_experts.up_proj.weight"],
                                                             w[m + "shared_experts.down_proj.weight"])
                else:  # relu^2 MLP, no gate
                    x = x + torch.relu(h @ w[p + "mixer.up_proj.weight"].T).pow(2) @ w[p + "mixer.down_proj.weight"].T
            x = self.rmsnorm(x, w["backbone.norm_f.weight"])
            head = w.get("lm_head.weight", w["backbone.embeddings.weight"])
            return (x @ head.T).numpy()
        # Granite-4.0-H: mixer then shared SwiGLU MLP per layer, scaled residuals.
        rm = c.get("residual_multiplier", 1.0)
        x = w["model.embed_tokens.weight"][torch.tensor(ids)] * c.get("embedding_multiplier", 1.0)
        for i, kind in enumerate(c["layer_types"]):
            p = "model.layers.%d." % i
            h = self.rmsnorm(x, w[p + "input_layernorm.weight"])
            h = self.mamba(h, p + "mamba.") if kind == "mamba" else self.attention(h, p + "self_attn.")
            x = x + h * rm
            h = self.rmsnorm(x, w[p + "post_attention_layernorm.weight"])
            gate, up = (h @ w[p + "shared_mlp.input_linear.weight"].T).chunk(2, dim=-1)
            out = (F.silu(gate) * up) @ w[p + "shared_mlp.output_linear.weight"].T
            if c.get("num_local_experts", 0) > 0:
                m = p + "block_sparse_moe."
                ids_, wt = route(h @ w[m + "router.layer.weight"].T, c["num_experts_per_tok"], gating="none",
                                 norm=False, softmax_chosen=True)
                gu, dn, n_i = w[m + "input_linear.weight"], w[m + "output_linear.weight"], c["intermediate_size"]
                out = out + experts(h, ids_, wt, lambda e, r: swiglu(r, gu[e][:n_i], gu[e][n_i:], dn[e]))
            x = x + out * rm
        x = self.rmsnorm(x, w["model.norm.weight"])
        head = w["lm_head.weight"] if "lm_head.weight" in w and not c.get("tie_word_embeddings") else w["model.embed_tokens.weight"]
        return (x @ head.T / c.get("logits_scaling", 1.0)).numpy()
