#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/: a few small valid
inputs of each format and near-valid variants (truncated, a field of the wrong type, a count
too large). Standard library only (struct, json); deterministic, so running it again rewrites
the same files. Usage: python3 fuzz/make_seeds.py [OUT_DIR]   (default: fuzz/corpus)
"""
import json
import os
import struct
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- GGUF v3 (ggml/docs/gguf.md) ---------------------------------------------------------------
# Header: magic "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata key/value
# pairs (string key, u32 type, value); tensor infos (string name, u32 n_dims, u64 dims innermost
# first, u32 ggml type, u64 offset into the data); padding to general.alignment; tensor data.
# Strings are u64 length + UTF-8 bytes; arrays are u32 element type + u64 count + items.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
          U64: "<Q", I64: "<q", F64: "<d"}
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30


def gguf_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    if vtype == STRING:
        return gguf_string(v)
    if vtype == ARRAY:
        elem, items = v
        return struct.pack("<IQ", elem, len(items)) + b"".join(gguf_value(elem, x) for x in items)
    return struct.pack(SCALAR[vtype], v)


def gguf(metadata, tensors, version=3, alignment=32):
    """metadata: [(key, type, value)]; tensors: [(name, dims innermost first, ggml type, bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, vtype, v in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, v)
    offset, blobs = 0, []
    for name, dims, gtype, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, offset)
        blobs.append((offset, data))
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    data_start = len(out)
    for off, data in blobs:
        out += b"\0" * (data_start + off - len(out)) + data
    return out


def bytes_to_unicode():
    """GPT-2's reversible map from byte values to printable code points (byte-level BPE)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_PIECES = [bytes_to_unicode()[b] for b in range(256)]
MERGED = ["ye", "yes", "no", "he", "ll", "hell", "hello"]
MERGES = ["y e", "ye s", "n o", "h e", "l l", "he ll", "hell o"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def gguf_seeds():
    f32 = struct.pack("<6f", 0.5, -1.0, 2.0, 0.0, 1e-3, 3.25)       # [2, 3]
    f16 = struct.pack("<4e", 1.0, -2.0, 0.5, 65504.0)                  # [4]
    bf16 = struct.pack("<4H", 0x3F80, 0xC000, 0x0000, 0x7F80)          # [4]: 1, -2, 0, inf
    q8 = struct.pack("<e", 0.25) + bytes(range(32))                     # one Q8_0 block of 32
    tensors = [("token_embd.weight", [3, 2], GGML_F32, f32), ("output_norm.weight", [4], GGML_F16, f16),
               ("blk.0.attn_norm.weight", [4], GGML_BF16, bf16), ("blk.0.ffn_up.weight", [32, 1], GGML_Q8_0, q8)]
    general = [("general.architecture", STRING, "qwen3"), ("general.name", STRING, "fuzz seed"),
               ("general.alignment", U32, 32), ("qwen3.block_count", U32, 1), ("qwen3.rope.freq_base", F32, 10000.0),
               ("qwen3.attention.layer_norm_rms_epsilon", F64, 1e-6), ("general.file_type", I32, 7),
               ("general.flag", BOOL, 1), ("general.tags", ARRAY, (STRING, ["a", "b"])),
               ("general.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (I64, [-1])])), ("general.u64", U64, 2**63 + 1),
               ("general.i8", I8, -5), ("general.u16", U16, 65535), ("general.i16", I16, -32768)]
    write("gguf", "valid_v3_tensors.gguf", gguf(general, tensors))
    write("gguf", "valid_v2_empty.gguf", gguf([("general.architecture", STRING, "llama")], [], version=2))
    tokens = BYTE_PIECES + MERGED + SPECIALS
    types = [1] * (256 + len(MERGED)) + [3] * len(SPECIALS)
    gpt2_tok = [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "qwen2"),
                ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
                ("tokenizer.ggml.merges", ARRAY, (STRING, MERGES)), ("tokenizer.ggml.bos_token_id", U32, 263),
                ("tokenizer.ggml.eos_token_id", U32, 265), ("tokenizer.ggml.add_bos_token", BOOL, 0),
                ("tokenizer.chat_template", STRING, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")]
    write("gguf", "gpt2_tokenizer.gguf", gguf([("general.architecture", STRING, "qwen3")] + gpt2_tok, tensors[:1]))
    # SentencePiece ("llama"): byte fallback pieces, "▁"-prefixed words, scores ranking the merges.
    sp = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "h", "e", "l", "o", "he", "ll", "\u2581he", "\u2581hell", "\u2581hello"]
    sp_types = [2, 3, 3] + [6] * 256 + [1] * 10
    scores = [0.0] * 259 + [-1.0, -2.0, -2.0, -2.0, -2.0, -3.0, -3.0, -4.0, -5.0, -6.0]
    llama_tok = [("tokenizer.ggml.model", STRING, "llama"), ("tokenizer.ggml.tokens", ARRAY, (STRING, sp)),
                 ("tokenizer.ggml.token_type", ARRAY, (I32, sp_types)), ("tokenizer.ggml.scores", ARRAY, (F32, scores)),
                 ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
                 ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_space_prefix", BOOL, 1)]
    write("gguf", "llama_tokenizer.gguf", gguf([("general.architecture", STRING, "llama")] + llama_tok, []))
    # Near-valid: truncated inside the tensor data; alignment not a power of two; a tensor offset
    # past the end; an array count larger than the file.
    valid = gguf(general, tensors)
    write("gguf", "truncated.gguf", valid[: len(valid) - 20])
    write("gguf", "bad_alignment.gguf", gguf([("general.alignment", U32, 24)], tensors[:1], alignment=32))
    bad_offset = bytearray(gguf([], [tensors[0]]))
    name_end = 24 + 8 + len("token_embd.weight") + 4 + 16 + 4
    bad_offset[name_end:name_end + 8] = struct.pack("<Q", 1 << 20)
    write("gguf", "offset_past_end.gguf", bytes(bad_offset))
    write("gguf", "array_too_long.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") +
          struct.pack("<IIQ", ARRAY, U32, 1 << 40))


# ---- safetensors -------------------------------------------------------------------------------
# u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
# "__metadata__": {str: str}; then the data, offsets relative to its start.
def safetensors(header, data, pad=True):
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    a = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    b = struct.pack("<4H", 0x3F80, 0x4000, 0x4040, 0x4080)  # bf16 1, 2, 3, 4
    c = struct.pack("<2e", 0.5, -0.5)
    header = {"__metadata__": {"format": "pt"},
              "model.embed_tokens.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "model.norm.weight": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
              "lm_head.bias": {"dtype": "F16", "shape": [2], "data_offsets": [32, 36]}}
    write("safetensors", "valid.safetensors", safetensors(header, a + b + c))
    write("safetensors", "empty_header.safetensors", safetensors({}, b""))
    write("safetensors", "scalar_and_empty.safetensors",
          safetensors({"s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
                       "z": {"dtype": "F16", "shape": [0, 3], "data_offsets": [4, 4]}}, struct.pack("<f", 7.0)))
    write("safetensors", "bad_offsets.safetensors",
          safetensors({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}}, a))
    write("safetensors", "unsupported_dtype.safetensors",
          safetensors({"t": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)))
    write("safetensors", "header_too_long.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
    valid = safetensors(header, a + b + c)
    write("safetensors", "truncated.safetensors", valid[:-6])


# ---- tokenizer.json ----------------------------------------------------------------------------
def byte_level_tokenizer(pre_tokenizer=None, normalizer=None, post_processor=None, ignore_merges=None):
    vocab = {p: i for i, p in enumerate(BYTE_PIECES)}
    for i, m in enumerate(MERGED):
        vocab[m] = 256 + i
    added = [{"id": 263 + i, "content": s, "special": True, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False} for i, s in enumerate(SPECIALS)]
    model = {"type": "BPE", "dropout": None, "unk_token": None, "vocab": vocab, "merges": MERGES}
    if ignore_merges is not None:
        model["ignore_merges"] = ignore_merges
    return {"version": "1.0", "added_tokens": added, "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer or {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": model}


QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
CONFIG_SEPARATOR = "\n#tokenizer_config.json#\n"  # tokenizer_json_fuzz.cc: what follows is tokenizer_config.json


def tokenizer_seeds():
    write("tokenizer_json", "byte_level_minimal.json", json.dumps(byte_level_tokenizer(), indent=1))
    qwen_like = byte_level_tokenizer(
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        normalizer={"type": "NFC"})
    config = {"bos_token": None, "eos_token": "<|im_end|>", "add_bos_token": False,
              "chat_template": "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"}
    write("tokenizer_json", "qwen_like_with_config.json", json.dumps(qwen_like) + CONFIG_SEPARATOR + json.dumps(config))
    llama3_like = byte_level_tokenizer(
        post_processor={"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                                                 {"Sequence": {"id": "A", "type_id": 0}}],
                        "pair": [], "special_tokens": {}},
        ignore_merges=True)
    write("tokenizer_json", "template_processing_ignore_merges.json", json.dumps(llama3_like))
    # SentencePiece-style BPE (Llama 2): "▁" for spaces, <0xNN> byte fallback, merges by rank.
    sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        sp_vocab["<0x%02X>" % b] = 3 + b
    for p in ["\u2581", "h", "e", "l", "o", "he", "ll", "\u2581he", "\u2581hell", "\u2581hello"]:
        sp_vocab[p] = len(sp_vocab)
    spm = {"version": "1.0",
           "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                            {"id": 2, "content": "</s>", "special": True}],
           "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
           "pre_tokenizer": None,
           "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                       {"Sequence": {"id": "A", "type_id": 0}}]},
           "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                        {"type": "ByteFallback"}, {"type": "Fuse"}]},
           "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "vocab": sp_vocab,
                     "merges": [["h", "e"], ["l", "l"], ["\u2581", "he"], ["\u2581he", "ll"], ["\u2581hell", "o"]]}}
    write("tokenizer_json", "sentencepiece_byte_fallback.json", json.dumps(spm))
    bad = byte_level_tokenizer()
    bad["model"]["merges"] = MERGES + ["q z"]
    write("tokenizer_json", "merge_not_in_vocab.json", json.dumps(bad))
    bad = byte_level_tokenizer()
    bad["added_tokens"][0]["id"] = 2 ** 40
    write("tokenizer_json", "id_out_of_range.json", json.dumps(bad))
    write("tokenizer_json", "unigram.json", json.dumps({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}))


# ---- chat templates ----------------------------------------------------------------------------
# chat_template_fuzz.cc: the template text, a line "%%", then the variables as a JSON object.
CONV = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \"x\" <b>"},
                     {"role": "assistant", "content": "Hello", "tool_calls": [
                         {"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, None]}}}]},
                     {"role": "tool", "content": "{}"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>"}


def chat_seeds():
    templates = {
        "chatml": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        "llama3": "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
                  "{{ m['content'] | trim }}<|eot_id|>{% endfor %}",
        "tools": "{%- if tools %}{% for t in tools %}{{ t | tojson(indent=2) }}\n{% endfor %}{% endif -%}"
                 "{% for m in messages %}{% if m.tool_calls is defined %}{% for c in m.tool_calls %}"
                 "<tool_call>{\"name\": {{ c.function.name | tojson }}, \"arguments\": {{ c.function.arguments | tojson }}}"
                 "</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
        "namespace_loop": "{% set ns = namespace(last=-1, n=0) %}{% for m in messages[::-1] %}"
                          "{% if m.role == 'user' and ns.last < 0 %}{% set ns.last = loop.revindex0 %}{% endif %}"
                          "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.last }}/{{ ns.n }} {{ '%s' }}",
        "macro": "{% macro render(c, d=2) %}{% if c is string %}{{ c }}{% else %}{% for p in c %}{{ render(p, d - 1) }}"
                 "{% endfor %}{% endif %}{% endmacro %}{% for m in messages %}{{ render(m.content) }}{% endfor %}",
        "filters": "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}"
                   "{{ (messages | length) ** 2 // 3 }}{{ '{:>8}|{:.2f}'.format('a', 1.5) }}{{ 'x' * 3 }}"
                   "{{ none | selectattr('a') | list }}{{ range(3) | list | reverse | list }}",
        "errors": "{{ raise_exception('bad role') if messages[0].role != 'system' }}{{ 1 // 0 }}",
    }
    for name, t in templates.items():
        write("chat_template", name + ".txt", t + "\n%%\n" + json.dumps(CONV))
    write("chat_template", "no_vars.txt", "{{ messages[1].content.split(' ')[0] }}")


# ---- grammars and schemas ----------------------------------------------------------------------
# gbnf_fuzz.cc: the grammar, a line "%%", then text to feed; json_schema_fuzz.cc: the schema, a
# line "%%", then an instance.
def grammar_seeds():
    grammars = {
        "json": 'root ::= object\nvalue ::= object | array | string | number | ("true" | "false" | "null") ws\n'
                'object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws\n'
                'array ::= "[" ws ( value ("," ws value)* )? "]" ws\n'
                'string ::= "\\"" ( [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\\"" ws\n'
                'number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n'
                'ws ::= | " " | "\\n" [ \\t]{0,20}\n%%\n{"a": [1, "x"]}',
        "arith": 'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]+ | "(" expr ")"\n%%\n(1+2)-3',
        "repeat": 'root ::= ("ab" | "a" "b"){2,5} [x-z]? "." \n%%\nababx.',
        "ambiguous": 'root ::= x\nx ::= "a" x "b" | "a" x "c" |\n%%\naaabcb',
        "empty": 'root ::= [^\\x00-\\U0010FFFF]\n%%\na',
        "deep": "root ::= " + "(" * 130 + '"a"' + ")" * 130,
    }
    for name, g in grammars.items():
        write("gbnf", name + ".txt", g)
    schemas = {
        "object": ({"type": "object", "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer",
                    "minimum": 0}}, "required": ["name"], "additionalProperties": False}, {"name": "x", "age": 3}),
        "refs": ({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
                  "$ref": "#/$defs/node"}, {"next": {"next": {}}}),
        "unions": ({"anyOf": [{"type": "null"}, {"enum": ["a", "b", 3]}, {"type": "array", "items": {"type": "number"},
                    "maxItems": 3}]}, [1, 2.5]),
        "pattern": ({"type": "object", "patternProperties": {"^p[0-9]+$": {"type": "string", "pattern": "^a.+z$"}},
                     "additionalProperties": False}, {"p1": "abz"}),
        "formats": ({"type": "object", "properties": {"d": {"type": "string", "format": "date-time"},
                     "u": {"type": "string", "format": "uuid"}}}, {"d": "2025-01-15T12:00:00Z"}),
        "oneof": ({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, {"a": 1}),
    }
    for name, (schema, instance) in schemas.items():
        write("json_schema", name + ".txt", json.dumps(schema) + "\n%%\n" + json.dumps(instance))


# ---- agent APIs (agent_api_fuzz.cc: one body, read by the Messages and the Responses doors) ----
def agent_seeds():
    tool = {"name": "get_weather", "description": "w", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    messages = {"model": "m", "max_tokens": 64, "stream": True,
                "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1;"},
                           {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                             {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": ""},
                                                               {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "x"}}]},
                             {"role": "system", "content": "reminder"},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "3C"}]}]}],
                "tools": [tool, {"type": "web_search_20250305", "name": "web_search"}],
                "tool_choice": {"type": "auto"}, "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
                "metadata": {"user_id": "u"}, "context_management": {"edits": []}}
    write("agent_api", "messages.json", json.dumps(messages))
    write("agent_api", "messages_bad_result.json", json.dumps(dict(messages, messages=[
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}])))
    responses = {"model": "m", "stream": True, "store": False, "prompt_cache_key": "k", "include": ["reasoning.encrypted_content"],
                 "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sys"}]},
                           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                           {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
                           {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                           {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
                 "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False},
                           {"type": "web_search"}, {"type": "namespace", "name": "n", "tools": []}],
                 "tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"summary": "auto"},
                 "text": {"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}}}
    write("agent_api", "responses.json", json.dumps(responses))
    write("agent_api", "responses_previous.json", json.dumps({"input": "hi", "previous_response_id": "resp_x"}))


# ---- request bodies ----------------------------------------------------------------------------
def request_seeds():
    bodies = {
        "chat_basic.json": {"model": "radixlm", "messages": [{"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "Hello"}], "max_tokens": 32},
        "chat_full.json": {"messages": [{"role": "user", "content": [{"type": "text", "text": "yes or "}, {"type": "text", "text": "no?"}]},
                                        {"role": "assistant", "content": None}],
                           "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 1, "n": 2, "stop": ["\n\n", "END"],
                           "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True,
                           "cache_salt": "tenant-a", "logprobs": False, "response_format": {"type": "text"}},
        "completion_text.json": {"prompt": "Once upon a time", "max_completion_tokens": 16, "best_of": 3, "n": 1},
        "completion_ids.json": {"prompt": [1, 2, 3, 263], "max_tokens": 4, "temperature": 0},
        "completion_bad_types.json": {"prompt": "x", "max_tokens": 4294967296, "temperature": "hot", "tools": [{"type": "function"}]},
        "embeddings.json": {"input": ["hello", "yes no"], "encoding_format": "base64", "dimensions": 8, "instruction": "Find it"},
        "embeddings_ids.json": {"input": [[1, 2, 3], [4, 5]], "model": "radixlm"},
        "embed.json": {"inputs": ["hello world"], "normalize": True, "truncate": True},
        "rerank.json": {"query": "what is yes?", "texts": ["yes", "no", "hello"], "raw_scores": False, "return_text": True},
    }
    for name, body in bodies.items():
        write("request_json", name, json.dumps(body))
    write("request_json", "batch_line_chat.json", json.dumps(
        {"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": bodies["chat_basic.json"]}))
    write("request_json", "batch_line_rerank.json", json.dumps(
        {"custom_id": "r2", "method": "POST", "url": "/rerank", "body": bodies["rerank.json"]}))
    write("request_json", "not_an_object.json", "[1, 2, 3]")


# ---- HTTP requests (the bytes a client sends) ---------------------------------------------------
def http_seeds():
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    write("http_request", "post.txt", head + "Content-Length: %d\r\n\r\n%s" % (len(body), body))
    chunked = "%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    write("http_request", "chunked.txt", head + "Transfer-Encoding: chunked\r\n\r\n" + chunked)
    write("http_request", "pipelined.txt", head + "Content-Length: %d\r\n\r\n%s" % (len(body), body) +
          "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    write("http_request", "gzip.txt", head + "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}")
    write("http_request", "high_bytes.bin", (head + "Content-Encoding: ").encode() + b"\xff\xfe" + b"\r\nContent-Length: 2\r\n\r\n{}")
    write("http_request", "cl_te.txt", head + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}")
    write("http_request", "expect.txt", head + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n{}")
    write("http_request", "nested.txt", head + "Content-Length: 200\r\n\r\n" + "[" * 200)
    write("http_request", "partial.txt", head + "Content-Length: 50\r\n\r\n{\"messages\"")


# ---- traces ------------------------------------------------------------------------------------
def trace_seeds():
    marconi = [{"session_id": 0, "turn_id": 0, "ts": 0.0, "num_input_tokens": 4, "num_output_tokens": 2,
                "input_tokens": [1, 2, 3, 4], "output_tokens": [5, 6]},
               {"session_id": 0, "turn_id": 1, "ts": 1.5, "num_input_tokens": 7, "num_output_tokens": 1,
                "input_tokens": [1, 2, 3, 4, 5, 6, 7], "output_tokens": [8]},
               {"session_id": 1, "turn_id": 0, "ts": 2.25, "num_input_tokens": 2, "num_output_tokens": 0,
                "input_tokens": [9, 10], "output_tokens": []}]
    write("trace_line", "marconi.jsonl", "".join(json.dumps(r) + "\n" for r in marconi))
    # A line the flat scanner leaves to nlohmann (an escaped key), and blank lines.
    write("trace_line", "marconi_slow_path.jsonl", '\n  \n{"ses\\u0073ion_id": 2, "ts": 3, "input_tokens": [1], "output_tokens": [2]}\n')
    mooncake = [{"timestamp": 0, "input_length": 1000, "output_length": 3, "hash_ids": [0, 1]},
                {"timestamp": 27, "input_length": 512, "output_length": 1, "hash_ids": [0]},
                {"timestamp": 27, "input_length": 0, "output_length": 0, "hash_ids": []}]
    write("trace_line", "mooncake.jsonl", "".join(json.dumps(r) + "\n" for r in mooncake))
    write("trace_line", "out_of_order.jsonl", '{"ts": 5, "input_tokens": [1], "output_tokens": []}\n'
                                             '{"ts": 4, "input_tokens": [1], "output_tokens": []}\n')
    write("trace_line", "mooncake_bad_cover.jsonl", '{"timestamp": 1, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}\n')


if __name__ == "__main__":
    gguf_seeds()
    safetensors_seeds()
    tokenizer_seeds()
    chat_seeds()
    grammar_seeds()
    agent_seeds()
    request_seeds()
    http_seeds()
    trace_seeds()
