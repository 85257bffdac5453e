#!/usr/bin/env bash
# Coverage-guided fuzzing of radixlm's input parsers (fuzz/, libFuzzer + ASan + UBSan).
#
#   bash scripts/fuzz.sh SECONDS [TARGET...]     (targets: all by default; see fuzz/README.md)
#
# Installs what fuzzing needs (scripts/setup-fuzz.sh), builds build-fuzz/ with clang (niced, one
# job), then runs each target for SECONDS on a copy of its seed corpus: new inputs go to
# build-fuzz/corpus/<target> (kept between runs), never into fuzz/corpus/. A crash, leak,
# sanitizer report, hang (-timeout=10) or allocation past 2 GB is written to
# build-fuzz/findings/<target>/ and the target stops there. Prints one line per target and exits
# 1 if any target found something.
# RADIXLM_FUZZ_KEEP_GOING=1 runs each target in libFuzzer's fork mode, which records a finding
# and carries on (several findings per target; use it when one known finding hides the rest).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(gguf safetensors tokenizer_json chat_template request_json trace_line http_request gbnf json_schema agent_api)
# The longest input worth trying per format: GGUF and tokenizer.json seeds carry a 256-token
# vocabulary (4-7 KB); the others are a header or a few lines.
declare -A MAX_LEN=([gguf]=16384 [safetensors]=4096 [tokenizer_json]=16384 [chat_template]=4096
                    [request_json]=4096 [trace_line]=4096 [http_request]=4096 [gbnf]=4096 [json_schema]=4096
                    [agent_api]=4096)

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
  echo "usage: $0 SECONDS [TARGET...]   (targets: ${ALL_TARGETS[*]})" >&2
  exit 2
fi
seconds="$1"
shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
  [ -n "${MAX_LEN[$t]:-}" ] || { echo "fuzz: unknown target '$t' (known: ${ALL_TARGETS[*]})" >&2; exit 2; }
done

bash scripts/setup-fuzz.sh
clang_version="${RADIXLM_FUZZ_CLANG:-16}"
out=build-fuzz
if [ ! -f "$out/build.ninja" ]; then
  nice -n 19 cmake -S fuzz -B "$out" -G Ninja -DCMAKE_CXX_COMPILER="clang++-$clang_version" >/dev/null
fi
nice -n 19 cmake --build "$out" -j 1 >"$out/build.log" 2>&1 || { tail -30 "$out/build.log" >&2; echo "fuzz: build failed (full log: $out/build.log)" >&2; exit 1; }

# Symbolised stack traces in the logs (llvm-symbolizer), and UBSan's too.
export PATH="/usr/lib/llvm-$clang_version/bin:$PATH"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# Scratch files the targets write their inputs to (their entry points read paths); on tmpfs when
# there is one, and removed at the end (a process that crashes leaves its own behind).
scratch="$(mktemp -d /dev/shm/radixlm-fuzz-run.XXXXXX 2>/dev/null || mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export RADIXLM_FUZZ_SCRATCH="$scratch"

found=0
for t in "${targets[@]}"; do
  corpus="$out/corpus/$t"
  findings="$out/findings/$t"
  log="$out/logs/$t.log"
  mkdir -p "$corpus" "$findings" "$out/logs"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  mode=()
  [ "${RADIXLM_FUZZ_KEEP_GOING:-0}" = 1 ] && mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  stamp="$out/logs/$t.start"
  : >"$stamp"
  set +e
  nice -n 19 "$out/${t}_fuzz" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -max_len="${MAX_LEN[$t]}" -artifact_prefix="$findings/" -print_final_stats=1 "${dict[@]}" "${mode[@]}" >"$log" 2>&1
  rc=$?
  set -e
  # Runs: the final stats (one process) or the last status line (fork mode: "#N: cov: ...").
  runs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)"
  [ -n "$runs" ] || runs="$(sed -n 's/^#\([0-9]*\):\{0,1\}[[:space:]].*/\1/p' "$log" | tail -1)"
  # Reproducers this run wrote (fork mode does not name them in the log).
  artifacts="$(find "$findings" -type f -newer "$stamp" | sort | tr '\n' ' ' | sed 's/ $//')"
  n_artifacts="$(echo "$artifacts" | wc -w)"
  [ "$n_artifacts" -gt 3 ] && artifacts="$n_artifacts reproducers in $findings/ (first: ${artifacts%% *})"
  if [ -n "$artifacts" ] || [ "$rc" -ne 0 ]; then
    found=1
    summary="$(grep -m1 -E 'runtime error|SUMMARY: |ERROR: libFuzzer|fuzz invariant failed|ALARM|out-of-memory|terminate called' "$log" || true)"
    echo "$t: ${runs:-?} runs, FINDING: ${artifacts:-(no reproducer written; exit $rc)} -- ${summary:-see the log} (log: $log)"
  else
    echo "$t: ${runs:-?} runs, no finding"
  fi
done
exit "$found"
