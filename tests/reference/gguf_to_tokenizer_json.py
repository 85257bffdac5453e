"""Writes a Hugging Face tokenizer.json + tokenizer_config.json for a GGUF's SentencePiece
("llama") vocabulary, the way transformers' convert_slow_tokenizer does (SentencePieceExtractor:
a merge for every split of a piece into two pieces, ordered by the merged piece's score), so
the JavaScript reference can tokenize with the GGUF's own vocabulary.
Usage: gguf_to_tokenizer_json.py MODEL.gguf OUT_DIR"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_io import read_gguf  # noqa: E402


def main():
    meta, _ = read_gguf(sys.argv[1])
    out = sys.argv[2]
    assert meta["tokenizer.ggml.model"] == "llama", "only SentencePiece (llama) vocabularies"
    tokens, scores, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.scores"], meta["tokenizer.ggml.token_type"]
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, score in sorted(((t, s) for t, s in zip(tokens, scores)), key=lambda x: vocab[x[0]]):
        if types[vocab[piece]] != 1:
            continue
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab
                 and types[vocab[piece[:k]]] == 1 and types[vocab[piece[k:]]] == 1]
        merges += sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]]))
    merges = [[a, b] for a, b, _ in sorted(merges, key=lambda m: m[2], reverse=True)]
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, t in enumerate(tokens) if types[i] in (2, 3)]
    bos = tokens[meta["tokenizer.ggml.bos_token_id"]]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": tokens[meta["tokenizer.ggml.unknown_token_id"]],
                  "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
                  "byte_fallback": True, "vocab": vocab, "merges": merges},
    }
    config = {"tokenizer_class": "LlamaTokenizer", "legacy": True, "add_bos_token": True, "add_eos_token": False,
              "bos_token": bos, "eos_token": tokens[meta["tokenizer.ggml.eos_token_id"]],
              "unk_token": tokens[meta["tokenizer.ggml.unknown_token_id"]], "clean_up_tokenization_spaces": False}
    os.makedirs(out, exist_ok=True)
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"), ensure_ascii=False)
    json.dump(config, open(os.path.join(out, "tokenizer_config.json"), "w"))


if __name__ == "__main__":
    main()
