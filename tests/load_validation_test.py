"""Issue 25.5: model files whose values make every logit NaN or inf, or whose tensors cannot be
right, are refused at load with the reason (13 of 593 GGUF mutants once loaded and produced
garbage). Mutants of a llama.cpp-quantised GGUF (tests/data/quant/tiny-q8_0.gguf: f32 norms,
Q8_0 matrices, its own 258-token tokenizer) and of exported Hugging Face configs; each must make
`radixlm info` exit 1 naming the problem, while the unmodified file loads.

Usage: load_validation_test.py RADIXLM. Exit status 1 when any check failed.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "data", "quant", "tiny-q8_0.gguf")
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def gguf_layout(data):
    """{name: (info_offset_of_type_field, type, data_offset_abs, shape)} from the GGUF header
    (the spec: header, key/values, tensor infos, aligned data)."""
    off = 0

    def take(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize("<" + fmt)
        return v[0]

    def skip_value(t):
        nonlocal off
        if t == 8:
            n = take("Q")  # (not "off += take()": that would add to the offset before the read)
            off += n
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(et)
        else:
            off += {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]

    take("I"), take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    align = 32
    for _ in range(n_kv):
        n = take("Q")
        key = data[off:off + n].decode()
        off += n
        t = take("I")
        if key == "general.alignment":
            align = struct.unpack_from("<I", data, off)[0]
        skip_value(t)
    infos = []
    for _ in range(n_tensors):
        n = take("Q")
        name = data[off:off + n].decode()
        off += n
        nd = take("I")
        dims = [take("Q") for _ in range(nd)]
        type_at = off
        ttype, toff = take("I"), take("Q")
        infos.append((name, type_at, ttype, toff, dims[::-1]))
    start = (off + align - 1) // align * align
    return {name: (type_at, ttype, start + toff, shape) for name, type_at, ttype, toff, shape in infos}


def gguf_keys(data):
    """{key: (type_at, value_at, value_end)} of the GGUF header's key/values (scalars only)."""
    off = 24
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    out = {}

    def skip(t, off):
        if t == 8:
            return off + 8 + struct.unpack_from("<Q", data, off)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, off)
            off += 12
            for _ in range(n):
                off = skip(et, off)
            return off
        return off + {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]
    for _ in range(n_kv):
        n = struct.unpack_from("<Q", data, off)[0]
        key = data[off + 8:off + 8 + n].decode()
        off += 8 + n
        t = struct.unpack_from("<I", data, off)[0]
        end = skip(t, off + 4)
        out[key] = (off, off + 4, end)
        off = end
    return out


def retyped(data, key, new_type, new_value):
    """The file with `key`'s value replaced by one of another GGUF type (bytes new_value); the
    header keeps its length (general.name grows or shrinks to match), so the tensor data stays
    where it was."""
    keys = gguf_keys(data)
    type_at, value_at, end = keys[key]
    delta = (end - value_at) - len(new_value)
    b = bytearray(data[:type_at]) + struct.pack("<I", new_type) + new_value + bytearray(data[end:])
    n_at, _, _ = gguf_keys(bytes(b))["general.name"]  # its string: u64 length, bytes
    _, name_value_at, name_end = gguf_keys(bytes(b))["general.name"]
    n = struct.unpack_from("<Q", b, name_value_at)[0]
    b[name_value_at:name_end] = struct.pack("<Q", n + delta) + bytes(b[name_value_at + 8:name_end]) + b"x" * delta
    return bytes(b)


def info(binary, path):
    r = subprocess.run([binary, "info", path, "--json"], capture_output=True, text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def mutant(tmp, name, data, edit):
    b = bytearray(data)
    edit(b)
    path = os.path.join(tmp, name + ".gguf")
    with open(path, "wb") as f:
        f.write(b)
    return path


def main():
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp()
    try:
        data = open(BASE, "rb").read()
        layout = gguf_layout(data)
        rc, out = info(binary, BASE)
        check(rc == 0, "the unmodified file loads (%s)" % out[-120:])

        _, norm_type, norm_at, _ = layout["output_norm.weight"]
        q8 = next(n for n, (_, t, _, _) in layout.items() if t == 8)  # a Q8_0 matrix
        _, _, q8_at, _ = layout[q8]
        nan32, inf16 = struct.pack("<f", float("nan")), struct.pack("<H", 0x7C00)
        cases = [
            ("nan-norm", lambda b: b.__setitem__(slice(norm_at + 8, norm_at + 12), nan32), "not finite"),
            ("inf-norm", lambda b: b.__setitem__(slice(norm_at, norm_at + 4), struct.pack("<f", float("inf"))), "not finite"),
            # Block 3's f16 scale d (34-byte Q8_0 blocks: d, then 32 codes).
            ("inf-q8-scale", lambda b: b.__setitem__(slice(q8_at + 3 * 34, q8_at + 3 * 34 + 2), inf16), "block 3"),
        ]
        # Two tensors made to share bytes: the second's offset moved onto the first's.
        names = sorted(layout, key=lambda n: layout[n][2])
        a, b_ = names[3], names[4]
        a_rel = struct.unpack_from("<Q", data, layout[a][0] + 4)[0]  # the offset field follows the type

        def overlap(b):
            struct.pack_into("<Q", b, layout[b_][0] + 4, a_rel)
        cases.append(("overlap", overlap, "overlap"))
        # A tensor whose type is changed to a wider one runs into its neighbour (Q8_0 -> F16).
        cases.append(("type-overlap", lambda b: struct.pack_into("<I", b, layout[q8][0], 1), "overlap|past the end"))
        for name, edit, want in cases:
            rc, out = info(binary, mutant(tmp, name, data, edit))
            check(rc == 1 and re.search(want, out) is not None, "%s: refused naming it (%s)" % (name, out[-160:]))

        # Issue 45's probe: mutants that loaded and gave other finite logits.
        keys = gguf_keys(data)
        arch = next(k.split(".")[0] for k in keys if k.endswith(".block_count"))

        def set_value(key, fmt, value):
            return lambda b: struct.pack_into("<" + fmt, b, keys[key][1], value)
        probe = [
            ("block-count-3", set_value(arch + ".block_count", "I", 1), "belongs to block"),
            ("eps-1e-45", set_value(arch + ".attention.layer_norm_rms_epsilon", "f", 1e-45), "epsilon"),
            ("rope-base-1e38", set_value(arch + ".rope.freq_base", "f", 1e38), "rope_theta"),
            # A Q8_0 matrix relabelled Q4_0 (18-byte blocks): it no longer fills its bytes.
            ("type-narrower", lambda b: struct.pack_into("<I", b, layout[q8][0], 2), "not at|after the last"),
            # One tensor fewer in the header: the data no longer starts where the tensors say.
            ("n-tensors-minus-1", lambda b: struct.pack_into("<Q", b, 8, struct.unpack_from("<Q", data, 8)[0] - 1),
             "not at|after the last|tensor|missing"),
        ]
        for name, edit, want in probe:
            rc, out = info(binary, mutant(tmp, name, data, edit))
            check(rc == 1 and re.search(want, out) is not None, "%s: refused naming it (%s)" % (name, out[-160:]))
        eps_key = arch + ".attention.layer_norm_rms_epsilon"
        for t, value in [(2, struct.pack("<H", 1)), (7, b"\x01")]:  # UINT16 1, BOOL true
            path = os.path.join(tmp, "eps-type-%d.gguf" % t)
            with open(path, "wb") as f:
                f.write(retyped(data, eps_key, t, value))
            rc, out = info(binary, path)
            check(rc == 1 and "not a float" in out, "the norm epsilon stored as GGUF type %d: refused (%s)" % (t, out[-160:]))

        # Sliding-window files (tests/data/swa/gpt-oss-tiny.gguf): a window that is missing or
        # implausible, a NaN attention sink.
        swa = open(os.path.join(HERE, "data", "swa", "gpt-oss-tiny.gguf"), "rb").read()
        swa_keys, swa_layout = gguf_keys(swa), gguf_layout(swa)
        window_at = swa_keys["gpt-oss.attention.sliding_window"][1]
        sink_at = swa_layout["blk.0.attn_sinks.weight"][2]
        rc, out = info(binary, os.path.join(HERE, "data", "swa", "gpt-oss-tiny.gguf"))
        check(rc == 0, "the unmodified gpt-oss file loads (%s)" % out[-120:])
        for name, edit, want in [
                ("gpt-oss-no-window", lambda b: struct.pack_into("<I", b, window_at, 0), "sliding_window"),
                ("gpt-oss-window-2^30", lambda b: struct.pack_into("<I", b, window_at, 1 << 30), "sliding_window"),
                ("gpt-oss-nan-sink", lambda b: b.__setitem__(slice(sink_at + 4, sink_at + 8), nan32), "not finite")]:
            rc, out = info(binary, mutant(tmp, name, swa, edit))
            check(rc == 1 and re.search(want, out) is not None, "%s: refused naming it (%s)" % (name, out[-160:]))

        # Fewer embedding rows than the file's tokenizer has tokens (258): the rows dimension of
        # token_embd (the outer one, last in GGUF's innermost-first order) set to 64.
        def shrink(b):
            type_at = layout["token_embd.weight"][0]
            struct.pack_into("<Q", b, type_at - 8, 64)
        rc, out = info(binary, mutant(tmp, "small-embedding", data, shrink))
        check(rc == 1 and ("tokenizer has 258 tokens" in out or "shape" in out),
              "token_embd with 64 rows under a 258-token tokenizer: refused (%s)" % out[-160:])

        # Hugging Face configs: Granite scales and Llama-3 RoPE scaling no model can have.
        hf = os.path.join(tmp, "granite")
        subprocess.run([binary, "export", "-m", "random:granite-h-tiny", "--format", "hf", "--out", hf], check=True,
                       capture_output=True, timeout=120)
        base_cfg = json.load(open(os.path.join(hf, "config.json")))
        rc, out = info(binary, hf)
        check(rc == 0, "the exported Granite-H folder loads (%s)" % out[-120:])
        for key, value in [("logits_scaling", 0), ("logits_scaling", 1e-45), ("embedding_multiplier", 1e39),
                           ("residual_multiplier", 1e39), ("attention_multiplier", -1.0)]:
            cfg = dict(base_cfg, **{key: value})
            json.dump(cfg, open(os.path.join(hf, "config.json"), "w"))
            rc, out = info(binary, hf)
            check(rc == 1 and key in out, "granite %s = %g: refused naming it (%s)" % (key, value, out[-140:]))
        json.dump(base_cfg, open(os.path.join(hf, "config.json"), "w"))
        q3 = os.path.join(tmp, "qwen3")
        subprocess.run([binary, "export", "-m", "random:tiny", "--format", "hf", "--out", q3], check=True,
                       capture_output=True, timeout=120)
        cfg = json.load(open(os.path.join(q3, "config.json")))
        for factor in [1e-45, 0.5, 1e30]:
            cfg["rope_scaling"] = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192}
            with open(os.path.join(q3, "config.json"), "w") as f:
                f.write(json.dumps(cfg))
            rc, out = info(binary, q3)
            check(rc == 1 and "rope_scaling" in out, "rope_scaling llama3 factor %g: refused (%s)" % (factor, out[-140:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
