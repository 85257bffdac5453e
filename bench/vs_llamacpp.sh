#!/usr/bin/env bash
# radixlm and llama.cpp side by side on the same GGUF files (benchmark only: llama.cpp is never a
# dependency of radixlm's build or runtime).
#
#   bench/vs_llamacpp.sh [--rounds 3] [--threads 2] [--models dense,hybrid,qwen35,moe,gemma3,gemma4,gpt-oss,lfm2,lfm2moe]
#                        [--types bf16,q8_0,q4_0,q4_k_m] [--work DIR] [--no-logits] [--build-only]
#                        [--prepare-only] [--isa native|avx2]
#
# 1. Builds llama.cpp from the source bundled in the npm package node-llama-cpp@3.22.1
#    (llama/gitRelease.bundle, llama.cpp v0.5.0): CPU release build, native ISA; llama-bench,
#    llama-quantize, llama-tokenize, llama-server, bench/llamacpp_logits.cc (logits for given
#    ids) and bench/llamacpp_tokenize.cc (llama_tokenize over a JSONL of texts). --build-only
#    stops here (other benchmarks and tests use these binaries).
#    --isa avx2 measures the AVX2 path of both engines on any x86-64 CPU: llama.cpp built a second
#    time (in DIR/llama.cpp-avx2) with GGML_NATIVE=OFF, AVX/AVX2/FMA/F16C/BMI2 on and every AVX-512
#    (and AVX-VNNI, AMX) option off, and radixlm run with RADIXLM_ISA=avx2; the table says so.
# 2. Makes the models: `radixlm export` writes random-weight BF16 GGUFs (with their tokenizer,
#    so llama.cpp loads them) of the Qwen3-0.6B shape (dense), the Granite-4.0-H-layout 0.4B
#    hybrid, Qwen3.5-0.8B's shape (qwen35: Gated DeltaNet + gated attention) and, with --models moe,
#    Qwen3-30B-A3B's layer shape cut to 8 of its 48 blocks (qwen3moe: 128 experts, 8 used, 5.6B
#    parameters, 0.9B active; an 11 GB BF16 file, so not among the defaults); llama-quantize makes
#    Q8_0, Q4_0 and Q4_K_M from them. --models gemma3,gemma4,gpt-oss,lfm2,lfm2moe: sliding-window and LFM2 models written by
#    llama.cpp's gguf-py (bench/make_shaped_gguf.py; gpt-oss in MXFP4_MOE only). --prepare-only stops here (bench/contention.sh uses them).
# 3. For each round, file and engine, alternating which engine runs first: llama-bench
#    -p 512 -n 64 -d 0,512 -r 2 and `radixlm bench --prompt-tokens 512 --gen-tokens 64 --repeats 2`.
#    radixlm's decode runs after its 512-token prompt, so it is compared with llama.cpp's tg64 at
#    depth 512 (-d 512, the same condition); llama.cpp's tg64 from an empty context (plain
#    llama-bench -n 64, which reads no KV) is listed too, and the ratio against it is the stricter.
#    Ratios are taken per round (both engines measured minutes apart at most) and the table
#    reports their medians, with each engine's median tokens/s.
# 4. Logits on 256 random ids from both engines on every file: top-1 agreement and the max
#    difference relative to the largest logit (also against radixlm's exact f32 run of the same
#    file: dequantised weights, f32 activations and KV). Not for moe: its f32 form (22 GB) does not
#    fit; bench/logits_vs_llamacpp.py compares it with llama.cpp on text instead.
# Raw results: DIR/results.jsonl; the table: DIR/table.md (also printed). DIR defaults to
# build/vs_llamacpp.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 THREADS=2 MODELS=dense,hybrid,qwen35 TYPES=bf16,q8_0,q4_0,q4_k_m WORK=build/vs_llamacpp LOGITS=1 BUILD_ONLY=0 PREPARE_ONLY=0 ISA=native
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --types) TYPES=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --no-logits) LOGITS=0; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --prepare-only) PREPARE_ONLY=1; shift ;;
    --isa) ISA=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
RADIXLM=$PWD/build/src/cli/radixlm
[ -x "$RADIXLM" ] || bash scripts/build.sh
PY=/usr/bin/python3

# ---- 1. llama.cpp ----------------------------------------------------------------------------
case "$ISA" in
  native) LL=$WORK/llama.cpp LL_ISA_FLAGS="-DGGML_NATIVE=ON" ;;
  avx2) LL=$WORK/llama.cpp-avx2 LL_ISA_FLAGS="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
          -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
          -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
        export RADIXLM_ISA=avx2 ;;
  *) echo "--isa native|avx2" >&2; exit 2 ;;
esac
LOGITS_BIN=$WORK/llamacpp_logits TOKENIZE_BIN=$WORK/llamacpp_tokenize
[ "$ISA" = native ] || LOGITS_BIN=$WORK/llamacpp_logits-$ISA TOKENIZE_BIN=$WORK/llamacpp_tokenize-$ISA
if [ ! -x "$LL/build/bin/llama-server" ] || [ ! -x "$LOGITS_BIN" ]; then
  echo "building llama.cpp (node-llama-cpp@3.22.1's bundle) in $LL ..." >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null && tar xzf node-llama-cpp-3.22.1.tgz)
  rm -rf "$LL"
  git clone -q "$tmp/package/llama/gitRelease.bundle" "$LL" 2>/dev/null
  cp "$tmp/package/llama/llama.cpp.info.json" "$LL/" 2>/dev/null || true
  rm -rf "$tmp"
  # shellcheck disable=SC2086
  cmake -S "$LL" -B "$LL/build" -DCMAKE_BUILD_TYPE=Release $LL_ISA_FLAGS -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF >/dev/null
  cmake --build "$LL/build" -j "$(nproc)" --target llama-bench llama-quantize llama-tokenize llama-server >/dev/null
  g++ -O2 -std=c++17 bench/llamacpp_logits.cc -I"$LL/include" -I"$LL/ggml/include" -L"$LL/build/bin" \
      -lllama -lggml -lggml-base -Wl,-rpath,"$LL/build/bin" -o "$LOGITS_BIN"
fi
if [ ! -x "$TOKENIZE_BIN" ]; then
  g++ -O2 -std=c++17 bench/llamacpp_tokenize.cc -I"$LL/include" -I"$LL/ggml/include" -L"$LL/build/bin" \
      -lllama -lggml -lggml-base -Wl,-rpath,"$LL/build/bin" -o "$TOKENIZE_BIN"
fi
export LD_LIBRARY_PATH="$LL/build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LL_VERSION=$(cat "$LL/llama.cpp.info.json" 2>/dev/null | tr -d '\n ' || echo '{}')
[ "$BUILD_ONLY" = 1 ] && exit 0

# ---- 2. models -------------------------------------------------------------------------------
declare -A PRESET=([dense]=random:qwen3-0.6b [hybrid]=random:hybrid-0.4b [qwen35]=random:qwen35-0.8b [moe]=random:qwen3moe-a3b-8l)
# The hybrid's vocabulary fits no bundled tokenizer but GPT-2's; Qwen3.5-0.8B's shape with Qwen3's.
declare -A TOKENIZER=([dense]="" [hybrid]="--tokenizer gpt2" [qwen35]="--tokenizer qwen3" [moe]="")
declare -A QTYPE=([q8_0]=Q8_0 [q4_0]=Q4_0 [q4_k_m]=Q4_K_M)
# The sliding-window and LFM2 models are written by llama.cpp's gguf-py (bench/make_shaped_gguf.py: Gemma 3
# 1B's block x 6, gpt-oss-20b's attention with 8 of its experts x 2) and measured in the types
# people run them in: gemma3, gemma4, lfm2 as TYPES, gpt-oss as released (mxfp4: MXFP4_MOE), lfm2moe
# (LFM2-8B-A1B's shape, 4 blocks) in Q4_K_M.
types_of() {
  case $1 in gpt-oss) echo mxfp4 ;; lfm2moe) echo q4_k_m ;; *) echo "${TYPES//,/ }" ;; esac
}
for m in ${MODELS//,/ }; do
  if [ "$m" = gemma3 ] || [ "$m" = gemma4 ] || [ "$m" = gpt-oss ] || [ "$m" = lfm2 ] || [ "$m" = lfm2moe ]; then
    for t in $(types_of "$m"); do
      f=$WORK/$m-$t.gguf
      [ -f "$f" ] && continue
      q=${QTYPE[$t]:-${t^^}}
      [ "$t" = mxfp4 ] && q=MXFP4_MOE
      $PY bench/make_shaped_gguf.py "$LL" "$WORK/shaped" "$m" --types "$q" >/dev/null
      mv "$WORK/shaped/$m-shaped-${q,,}.gguf" "$f"
    done
    rm -f "$WORK/shaped/$m-shaped-f32.gguf"
    continue
  fi
  base=$WORK/$m-bf16.gguf
  [ -f "$base" ] || "$RADIXLM" export --model "${PRESET[$m]}" --dtype bf16 ${TOKENIZER[$m]} --out "$base"
  for t in ${TYPES//,/ }; do
    [ "$t" = bf16 ] && continue
    f=$WORK/$m-$t.gguf
    [ -f "$f" ] || "$LL/build/bin/llama-quantize" "$base" "$f" "${QTYPE[$t]}" "$THREADS" >/dev/null 2>&1
  done
done

[ "$PREPARE_ONLY" = 1 ] && exit 0

# ---- 3. speed, alternating -------------------------------------------------------------------
RESULTS=$WORK/results.jsonl
[ "$ISA" = native ] || RESULTS=$WORK/results-$ISA.jsonl
: > "$RESULTS"
for r in $(seq 1 "$ROUNDS"); do
  for m in ${MODELS//,/ }; do
    for t in $(types_of "$m"); do
      f=$WORK/$m-$t.gguf
      run_llama() {
        "$LL/build/bin/llama-bench" -m "$f" -t "$THREADS" -p 512 -n 64 -d 0,512 -r 2 -o json 2>/dev/null |
          $PY -c "import json,sys; d=json.load(sys.stdin); pick=lambda p,g,dp: [x['avg_ts'] for x in d if x['n_prompt']==p and x['n_gen']==g and x['n_depth']==dp][0]
print(json.dumps({'engine':'llama.cpp','round':$r,'model':'$m','type':'$t','prefill':pick(512,0,0),'decode':pick(0,64,512),'decode_empty':pick(0,64,0)}))" >> "$RESULTS"
      }
      run_radixlm() {
        "$RADIXLM" bench -m "$f" --threads "$THREADS" --prompt-tokens 512 --gen-tokens 64 --repeats 2 --json 2>/dev/null |
          $PY -c "import json,sys; j=json.loads(sys.stdin.readline()); print(json.dumps({'engine':'radixlm','round':$r,'model':'$m','type':'$t',
                  'prefill':j['prefill_tokens_per_s'],'decode':j['decode_tokens_per_s'],'isa':j['isa'],'matmul':j['matmul'],
                  'kv_dtype':j['kv_dtype'],'weight_type':j['weight_type']}))" >> "$RESULTS"
      }
      if [ $((r % 2)) = 1 ]; then run_llama; run_radixlm; else run_radixlm; run_llama; fi
      echo "round $r $m $t done" >&2
    done
  done
done

# ---- 4. logits -------------------------------------------------------------------------------
if [ "$LOGITS" = 1 ]; then
  for m in ${MODELS//,/ }; do
    [ "$m" = moe ] && continue
    first=$(types_of "$m" | cut -d' ' -f1)
    vocab=$("$RADIXLM" info "$WORK/$m-$first.gguf" --json | $PY -c "import json,sys; print(json.load(sys.stdin)['vocab_size'])")
    ids=$($PY -c "import random; random.seed(2); print(','.join(str(random.randrange($vocab)) for _ in range(256)))")
    for t in $(types_of "$m"); do
      f=$WORK/$m-$t.gguf
      "$LOGITS_BIN" "$f" "$ids" "$WORK/l_llama.f32" "$THREADS" 2>/dev/null
      "$RADIXLM" logits -m "$f" --ids "$ids" --out "$WORK/l_radixlm.f32" --threads "$THREADS"
      "$RADIXLM" logits -m "$f" --ids "$ids" --out "$WORK/l_exact.f32" --threads "$THREADS" --dtype f32 --kv-dtype f32
      $PY - "$WORK" "$m" "$t" >> "$RESULTS" <<'EOF'
import json, sys
import numpy as np
work, m, t = sys.argv[1:4]
L, R, E = (np.fromfile(f"{work}/l_{n}.f32", np.float32).reshape(256, -1) for n in ("llama", "radixlm", "exact"))
agree = lambda a, b: float((a.argmax(1) == b.argmax(1)).mean())
err = lambda a, b: float(np.abs(a - b).max() / np.abs(b).max())
print(json.dumps({"logits": True, "model": m, "type": t, "top1_radixlm_vs_llama": agree(R, L),
                  "top1_llama_vs_exact": agree(L, E), "top1_radixlm_vs_exact": agree(R, E),
                  "err_radixlm_vs_llama": err(R, L), "err_llama_vs_exact": err(L, E), "err_radixlm_vs_exact": err(R, E)}))
EOF
    done
  done
fi

# ---- 5. the table ------------------------------------------------------------------------------
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni)$' | tr '\n' ' ')
TABLE=$WORK/table.md
[ "$ISA" = native ] || TABLE=$WORK/table-$ISA.md
$PY - "$RESULTS" "$CPU" "$FLAGS" "$THREADS" "$ROUNDS" "$LL_VERSION" "$ISA" <<'EOF' | tee "$TABLE"
import json, statistics, sys
path, cpu, flags, threads, rounds, version, isa = sys.argv[1:8]
rows = [json.loads(l) for l in open(path)]
speed = [r for r in rows if not r.get("logits")]
logits = {(r["model"], r["type"]): r for r in rows if r.get("logits")}
isa_note = ("native builds" if isa == "native" else
            f"ISA {isa} in both: radixlm RADIXLM_ISA={isa}, llama.cpp built with GGML_NATIVE=OFF, AVX2/FMA/F16C on, AVX-512 off")
print(f"CPU: {cpu} ({flags.strip()}), {threads} threads; {isa_note}; llama.cpp {version}; {rounds} rounds, engines alternated; "
      "tokens/s of prefill 512 and of decode 64 after a 512-token context (llama.cpp -d 512; its decode from an "
      "empty context in brackets); ratio = median over rounds of radixlm / llama.cpp (in brackets: against "
      "llama.cpp's empty-context decode)\n")
print("| model | weights | llama.cpp prefill / decode (empty) | radixlm prefill / decode | ratio prefill / decode (vs empty) | radixlm matmul | top-1 vs llama.cpp (llama.cpp vs exact) |")
print("|---|---|---|---|---|---|---|")
keys = sorted({(r["model"], r["type"]) for r in speed}, key=lambda k: (k[0], ["bf16", "q8_0", "q4_0", "q4_k_m"].index(k[1]) if k[1] in ["bf16", "q8_0", "q4_0", "q4_k_m"] else 9))
for m, t in keys:
    ll = {r["round"]: r for r in speed if r["model"] == m and r["type"] == t and r["engine"] == "llama.cpp"}
    rx = {r["round"]: r for r in speed if r["model"] == m and r["type"] == t and r["engine"] == "radixlm"}
    both = sorted(set(ll) & set(rx))
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    rp = med([rx[i]["prefill"] / ll[i]["prefill"] for i in both]); rd = med([rx[i]["decode"] / ll[i]["decode"] for i in both])
    re = med([rx[i]["decode"] / ll[i]["decode_empty"] for i in both])
    lg = logits.get((m, t))
    agree = f"{lg['top1_radixlm_vs_llama']:.3f} ({lg['top1_llama_vs_exact']:.3f})" if lg else "-"
    matmul = next(iter(rx.values()))["matmul"] if rx else "-"
    print(f"| {m} | {t} | {med([r['prefill'] for r in ll.values()]):.0f} / {med([r['decode'] for r in ll.values()]):.1f} "
          f"({med([r['decode_empty'] for r in ll.values()]):.1f}) "
          f"| {med([r['prefill'] for r in rx.values()]):.0f} / {med([r['decode'] for r in rx.values()]):.1f} "
          f"| {rp:.2f}x / {rd:.2f}x ({re:.2f}x) | {matmul} | {agree} |")
EOF
