#!/bin/bash
# Functions of src/ by length, from Universal Ctags' start and end lines (lambdas count as
# functions of their own), outside src/kernels/ and test files: the longest first, then how many
# pass 100 and 60 lines (issue 47's measure).
#   scripts/function_lengths.sh [TOP]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v ctags >/dev/null || { echo "needs Universal Ctags (apt-get install universal-ctags)" >&2; exit 1; }
ctags --fields=+ne --kinds-C++=+fl -o - -R --languages=C++ src 2>/dev/null |
  awk -F'\t' '$2 !~ /^src\/kernels\// && $2 !~ /_test\.(cc|h)$/ {
    kind = ""; line = 0; end = 0
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
      if ($i == "f" || $i == "kind:function") kind = "f"
    }
    if (kind == "f" && end > 0) print end - line + 1 "\t" $2 ":" line "\t" $1
  }' | sort -rn > /tmp/radixlm_function_lengths.txt
head -"${1:-10}" /tmp/radixlm_function_lengths.txt
echo "over 100 lines: $(awk '$1 > 100' /tmp/radixlm_function_lengths.txt | wc -l); over 60: $(awk '$1 > 60' /tmp/radixlm_function_lengths.txt | wc -l)"
