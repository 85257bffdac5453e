"""Tokenization of a GGUF equal to llama.cpp's on the same file (the qwen35 pre-tokenizer).

Usage: tokenizer_llamacpp_test.py RADIXLM [LLAMACPP_TOKENIZE]
LLAMACPP_TOKENIZE defaults to build/vs_llamacpp/llamacpp_tokenize, which bench/vs_llamacpp.sh
--build-only builds (with llama.cpp's llama-tokenize) from node-llama-cpp@3.22.1's llama.cpp;
without it the test reports SKIPPED (llama.cpp is a reference, never a dependency).

The file: random:qwen35-tiny exported with a tokenizer.json that is Qwen3's with Qwen3.5's split
pattern (letter runs that take combining marks); the exporter names its pre-tokenizer 'qwen35'
in tokenizer.ggml.pre, so llama.cpp runs its hand-written Qwen3.5 splitter on it and radixlm its
PCRE2 one. Qwen3.5's own 248k vocabulary is not published on the npm registry; the pre-tokenizer
is what differs from Qwen3. Corpus: tokenizer_corpus_test.py's (the KJV Bible, the hand-written
edge cases, and ../shared's SWE-agent and MT-Bench texts when present). Checks: the same ids for
every text but those containing "</s>", which llama.cpp alone makes a control token (below)."""
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


def main():
    radixlm = sys.argv[1]
    tool = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "vs_llamacpp", "llamacpp_tokenize")
    if not os.access(tool, os.X_OK):
        print("SKIP: %s not built (bench/vs_llamacpp.sh --build-only builds it)" % tool)
        return SKIPPED
    if not os.path.isdir(corpora.NODE_MODULES):
        print("FAIL: tokenizer data missing (scripts/setup.sh installs it)")
        return 1
    texts = corpora.corpus("qwen35", "repo")
    if corpora.SHARED and os.path.isdir(corpora.SHARED):
        texts += corpora.shared_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        tok = corpora.write_qwen35_tokenizer(os.path.join(tmp, "qwen35"))
        gguf = os.path.join(tmp, "qwen35.gguf")
        subprocess.run([radixlm, "export", "--model", "random:qwen35-tiny", "--dtype", "bf16", "--tokenizer", tok,
                        "--out", gguf], check=True, stdout=subprocess.DEVNULL)
        with open(gguf, "rb") as f:
            head = f.read(1 << 16)
        key = b"tokenizer.ggml.pre"
        at = head.find(key)
        named = at >= 0 and head[at + len(key) + 4 + 8:at + len(key) + 4 + 8 + 6] == b"qwen35"
        src, ref_path, got_path = (os.path.join(tmp, n) for n in ("in.jsonl", "llama.jsonl", "radixlm.jsonl"))
        with open(src, "w") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        subprocess.run([tool, gguf, src, ref_path], check=True, stderr=subprocess.DEVNULL)
        subprocess.run([radixlm, "tokenize", "--tokenizer", gguf, "--input", src, "--output", got_path], check=True)
        ref = [json.loads(l)["ids"] for l in open(ref_path)]
        got = [json.loads(l)["ids"] for l in open(got_path)]
    # llama.cpp makes any vocabulary entry spelled "</s>" a control token (an end-of-generation
    # name list in llama-vocab.cpp, for PaddleOCR), though Qwen's vocabulary has it as ordinary
    # text (Hugging Face's tokenizer and radixlm split it as text): texts containing it are not
    # compared.
    overridden = [i for i, t in enumerate(texts) if "</s>" in t]
    mismatches = [i for i, (a, b) in enumerate(zip(got, ref)) if a != b and i not in overridden]
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    print("qwen35 GGUF (tokenizer.ggml.pre = 'qwen35': %s): %d texts, %.1f MB, %d tokens, %d mismatches with llama.cpp "
          "(%d texts with '</s>' not compared)" % (named, len(texts), n_bytes / 1e6, sum(map(len, ref)), len(mismatches),
                                                   len(overridden)))
    for i in mismatches[:5]:
        print("  text %r\n    radixlm   %s\n    llama.cpp %s" % (texts[i][:200], got[i][:40], ref[i][:40]))
    ok = named and not mismatches and len(got) == len(ref) == len(texts)
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
