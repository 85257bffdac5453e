#!/usr/bin/env python3
"""Instructions per multiply-accumulate of the ARM64 int8 GEMM inner loops, from the compiled code.

Speed cannot be measured under emulation; what the compiled code issues can. For each kernel this
disassembles the object (aarch64-linux-gnu-objdump), finds the innermost loop around each sdot /
smmla (a backward branch's span), and reports the loop's instructions, its dot instructions and
the multiply-accumulates they do (sdot: 16, smmla: 32), next to llama.cpp's ARM kernel for the
same weight type (ggml-cpu/arch/arm/quants.c, compiled here with the same compiler at -O3 for
armv8.2-a+dotprod and armv8.6-a+i8mm).

Usage: bench/arm64_instructions.py RADIXLM_GEMM_NEON_OBJ LLAMA_CPP_SOURCE_DIR
  (RADIXLM_GEMM_NEON_OBJ: build-arm64/src/kernels/CMakeFiles/radixlm_kernels.dir/gemm_neon.cc.o,
   from scripts/test-arm64.sh; LLAMA_CPP_SOURCE_DIR: llama.cpp's source, as bench/vs_llamacpp.sh
   unpacks it from node-llama-cpp@3.22.1.)
"""
import re
import subprocess
import sys
import tempfile

OBJDUMP = "aarch64-linux-gnu-objdump"
MACS = {"sdot": 16, "smmla": 32}
BRANCH = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+(b\.\w+|b|cbnz|cbz|tbnz|tbz)\s+([0-9a-f]+)")
INSN = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+(\S+)")


def functions(obj):
    """{demangled name: [(address, mnemonic, line)]} of an object file."""
    out = subprocess.run([OBJDUMP, "-d", "-C", obj], capture_output=True, text=True, check=True).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            name = m.group(1)
            funcs[name] = []
            continue
        m = INSN.match(line)
        if m and name:
            funcs[name].append((int(m.group(1), 16), m.group(2), line))
    return funcs


def dot_loops(insns):
    """[(body instructions, dots, macs, kind)] of the innermost loops holding dot instructions."""
    loops = []
    for _, _, line in insns:
        m = BRANCH.match(line)
        if m and int(m.group(3), 16) < int(m.group(1), 16):
            loops.append((int(m.group(3), 16), int(m.group(1), 16)))
    found = {}
    for addr, mn, _ in insns:
        if mn not in MACS:
            continue
        inner = [l for l in loops if l[0] <= addr <= l[1]]
        if not inner:
            continue
        lo, hi = min(inner, key=lambda l: l[1] - l[0])
        found.setdefault((lo, hi), []).append(mn)
    rows = []
    for (lo, hi), dots in sorted(found.items()):
        body = sum(1 for a, _, _ in insns if lo <= a <= hi)
        rows.append((body, len(dots), sum(MACS[d] for d in dots), dots[0]))
    return rows


def dtype_names():
    names, i = {}, 0
    text = open(__file__.rsplit("/bench/", 1)[0] + "/src/core/dtype.h").read()
    body = re.search(r"enum class DType[^{]*\{([^}]*)\}", text).group(1)
    for part in body.split(","):
        part = re.sub(r"//.*", "", part).strip()
        if not part:
            continue
        if "=" in part:
            part, val = [p.strip() for p in part.split("=")]
            i = int(val, 0)
        names[i] = part[1:]
        i += 1
    return names


def main():
    obj, llama = sys.argv[1], sys.argv[2]
    names = dtype_names()
    ours = functions(obj)
    print("| type | kernel | loop instructions | dot instructions | MACs | instructions / MAC |")
    print("|---|---|---|---|---|---|")
    for name, insns in sorted(ours.items()):
        m = re.search(r"(DotMicro|MmlaMicro)<\(radixlm::core::DType\)(\d+), (\d+), (\d+), (\d+)>", name)
        if not m:
            continue
        kind, dt, mr, np_, u = m.group(1), names.get(int(m.group(2)), m.group(2)), m.group(3), m.group(4), m.group(5)
        for body, dots, macs, mn in dot_loops(insns):
            label = f"radixlm {kind} {mr} row(s) x {int(np_) * 16} cols ({mn})"
            print(f"| {dt} | {label} | {body} | {dots} | {macs} | {body / macs:.3f} |")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ("armv8.2-a+dotprod", "armv8.6-a+dotprod+i8mm"):
            o = f"{tmp}/quants.o"
            subprocess.run(["aarch64-linux-gnu-gcc", "-O3", f"-march={arch}", "-std=c11", f"-I{llama}/ggml/include",
                            f"-I{llama}/ggml/src", f"-I{llama}/ggml/src/ggml-cpu", "-D_GNU_SOURCE", "-c",
                            f"{llama}/ggml/src/ggml-cpu/arch/arm/quants.c", "-o", o], check=True)
            theirs = functions(o)
            for t in ("q4_0", "q8_0", "q4_K", "q5_K", "q6_K"):
                fn = f"ggml_vec_dot_{t}_q8_{'K' if t.endswith('K') else '0'}"
                for body, dots, macs, mn in dot_loops(theirs.get(fn, [])):
                    print(f"| {t.upper()} | llama.cpp {fn} {arch} ({mn}) | {body} | {dots} | {macs} | {body / macs:.3f} |")
            # The repacked layouts (Q4_0_4x8, Q4_K_8x8, ...): llama.cpp's fastest ARM path.
            subprocess.run(["aarch64-linux-gnu-g++", "-O3", f"-march={arch}", "-std=c++17", f"-I{llama}/ggml/include",
                            f"-I{llama}/ggml/src", f"-I{llama}/ggml/src/ggml-cpu", "-D_GNU_SOURCE", "-c",
                            f"{llama}/ggml/src/ggml-cpu/arch/arm/repack.cpp", "-o", o], check=True)
            for fn, insns in sorted(functions(o).items()):
                m = re.match(r"ggml_(gemv|gemm)_(q4_0|q8_0|q4_K|q5_K|q6_K)_\dx\d_q8_[0K]$", fn)
                if not m:
                    continue
                for body, dots, macs, mn in dot_loops(insns):
                    print(f"| {m.group(2).upper()} | llama.cpp {fn} {arch} ({mn}) | {body} | {dots} | {macs} | {body / macs:.3f} |")


if __name__ == "__main__":
    main()
