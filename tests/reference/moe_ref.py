"""Reference mixture-of-experts blocks in PyTorch (float64), written from the Hugging Face model
definitions (Qwen3MoeSparseMoeBlock, Qwen3_5MoeSparseMoeBlock, GraniteMoeHybridMoE +
shared_mlp, NemotronHMOE) and, for GGUF files, llama.cpp's build_moe_ffn; independent of
radixlm's C++ code. Sum order is irrelevant in float64."""
import torch
import torch.nn.functional as F


def route(logits, k, gating="softmax", norm=True, scale=1.0, bias=None, groups=1, groups_used=1,
          softmax_chosen=False, norm_eps=0.0):
    """Returns (ids [T, k], weights [T, k]) as the family defines them."""
    if gating == "softmax":
        probs = torch.softmax(logits, dim=-1)
    elif gating == "sigmoid":
        probs = torch.sigmoid(logits)
    else:
        probs = logits
    rank = probs + bias if bias is not None else probs
    if groups > 1:  # DeepSeek-V3 / Nemotron-H: keep the groups whose two best experts score highest
        T, E = rank.shape
        g = rank.view(T, groups, E // groups)
        score = g.topk(2, dim=-1).values.sum(-1)
        keep = torch.zeros_like(score).scatter_(1, score.topk(groups_used, dim=-1).indices, 1.0)
        mask = keep.unsqueeze(-1).expand(T, groups, E // groups).reshape(T, E)
        rank = rank.masked_fill(mask == 0, float("-inf"))
    ids = rank.topk(k, dim=-1).indices
    if softmax_chosen:  # Granite: top-k of the logits, softmax over those
        w = torch.softmax(logits.gather(1, ids), dim=-1)
    else:
        w = probs.gather(1, ids)
    if norm:
        w = w / (w.sum(-1, keepdim=True) + norm_eps)
    return ids, w * scale


def swiglu(h, gate, up, down):
    return (F.silu(h @ gate.T) * (h @ up.T)) @ down.T


def relu2(h, up, down):
    return torch.relu(h @ up.T).pow(2) @ down.T


def experts(h, ids, w, expert_fn):
    """sum_j w[t, j] * expert_fn(ids[t, j], h[t]) for every row t."""
    out = torch.zeros_like(h)
    for t in range(h.shape[0]):
        for j in range(ids.shape[1]):
            out[t] += w[t, j] * expert_fn(int(ids[t, j]), h[t:t + 1])[0]
    return out
