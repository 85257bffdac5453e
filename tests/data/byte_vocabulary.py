"""The 258-token byte-level vocabulary the GGUF fixture writers give their random models
(tests/data/quant, tests/data/swa, bench/make_shaped_gguf.py): the 256 bytes in GPT-2's
byte-to-unicode spelling and two merges (llama.cpp refuses a BPE vocabulary without merges)."""

VOCAB = 258


def add_byte_vocabulary(w, gguf):
    """Writes the vocabulary into gguf-py GGUFWriter `w` (`gguf`: the gguf-py module)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    spelling = dict(zip(bs, (chr(c) for c in cs)))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list([spelling[b] for b in range(256)] + ["\u0120t", "he"])
    w.add_token_types([gguf.TokenType.NORMAL] * VOCAB)
    w.add_token_merges(["\u0120 t", "h e"])
