#!/usr/bin/env python3
"""Adds (or replaces) one f32/u32/string metadata key of a GGUF v3 file in place, leaving tensor
infos and data untouched (their offsets are relative to the aligned data section, which is
re-padded). Used once on models/kjv-hybrid.gguf, written before train_kjv.py also wrote
nemotron_h.attention.layer_norm_epsilon (which llama.cpp's loader requires).

Usage: gguf_set_key.py FILE KEY f32|u32|str VALUE"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(buf, pos, t):
    if t in SIZES:
        return pos + SIZES[t]
    if t == 8:
        (n,) = struct.unpack_from("<Q", buf, pos)
        return pos + 8 + n
    if t == 9:
        et, n = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        for _ in range(n):
            pos = skip_value(buf, pos, et)
        return pos
    raise ValueError("unknown GGUF type %d" % t)


def main():
    path, key, kind, value = sys.argv[1:5]
    buf = open(path, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    assert magic == b"GGUF" and version == 3, "not a GGUF v3 file"
    pos, kvs, align = 24, [], 32
    for _ in range(n_kv):
        start = pos
        (n,) = struct.unpack_from("<Q", buf, pos)
        name = buf[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (t,) = struct.unpack_from("<I", buf, pos)
        pos = skip_value(buf, pos + 4, t)
        if name == "general.alignment":
            (align,) = struct.unpack_from("<I", buf, pos - 4)
        if name != key:
            kvs.append(buf[start:pos])
    infos_start = pos
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n
        (dims,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + 8 * dims + 4 + 8
    infos = buf[infos_start:pos]
    data = buf[(pos + align - 1) // align * align:]
    kb = key.encode()
    enc = {"f32": (6, lambda v: struct.pack("<f", float(v))), "u32": (4, lambda v: struct.pack("<I", int(v))),
           "str": (8, lambda v: struct.pack("<Q", len(v.encode())) + v.encode())}[kind]
    kvs.append(struct.pack("<Q", len(kb)) + kb + struct.pack("<I", enc[0]) + enc[1](value))
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, len(kvs)) + b"".join(kvs) + infos
    with open(path, "wb") as f:
        f.write(head + b"\0" * (-len(head) % align) + data)


if __name__ == "__main__":
    main()
