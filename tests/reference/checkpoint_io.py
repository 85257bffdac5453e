"""Independent readers for GGUF and safetensors checkpoints (numpy), written from the format
specs, sharing no code with radixlm's C++ readers."""
import json
import os
import struct

import numpy as np

import quant_ref

GGML_TYPES = {0: np.float32, 1: np.float16}  # 30 (BF16) handled separately
# Block-quantised ggml types, dequantised by the independent numpy reading (quant_ref.py).
QUANT_TYPES = {tid: name for name, (_, _, tid) in quant_ref.FORMATS.items()}


def read_gguf(path):
    """Returns (metadata dict, {name: np.ndarray in PyTorch shape order, float32})."""
    with open(path, "rb") as f:
        data = f.read()
    off = 0

    def take(fmt):
        nonlocal off
        vals = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def string():
        nonlocal off
        n = take("Q")
        s = data[off:off + n].decode("utf-8")
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    magic, version, n_tensors, n_kv = take("I"), take("I"), take("Q"), take("Q")
    assert magic == 0x46554747 and version in (2, 3)
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("I")
        dims = [take("Q") for _ in range(nd)]
        infos.append((name, dims[::-1], take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    start = (off + align - 1) // align * align
    tensors = {}
    for name, shape, ttype, toff in infos:
        n = int(np.prod(shape))
        if ttype == 30:
            raw = np.frombuffer(data, dtype=np.uint16, count=n, offset=start + toff)
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        elif ttype in QUANT_TYPES:
            per, size, _ = quant_ref.FORMATS[QUANT_TYPES[ttype]]
            arr = quant_ref.dequantize(QUANT_TYPES[ttype], data[start + toff:start + toff + n // per * size], n)
        else:
            arr = np.frombuffer(data, dtype=GGML_TYPES[ttype], count=n, offset=start + toff)
        tensors[name] = arr.astype(np.float32).reshape(shape)
    return meta, tensors


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack_from("<Q", data, 0)[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        if info["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype={"F32": np.float32, "F16": np.float16}[info["dtype"]])
        out[name] = arr.astype(np.float32).reshape(info["shape"])
    return out


def read_hf_folder(path):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(path, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            for shard in sorted(set(json.load(f)["weight_map"].values())):
                tensors.update(read_safetensors(os.path.join(path, shard)))
    else:
        tensors = read_safetensors(os.path.join(path, "model.safetensors"))
    return config, tensors
