"""The layering check itself, on copies of the tree: it passes on the tree as it is, and it
rejects each way a forbidden edge can be written (a quoted include, an indented <> include
with spaces after '#', a CMake link line), naming the file and the edge.
Usage: check_layers_test.py SOURCE_DIR"""
import os
import shutil
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, "scripts", "check_layers.py")
ok = True


def run(src, doc):
    r = subprocess.run([sys.executable, script, src, doc], capture_output=True, text=True)
    return r.returncode, r.stdout


def expect(name, code, want, src, doc):
    global ok
    rc, out = run(src, doc)
    passed = rc == code and want in out
    ok &= passed
    print("%s %s: exit %d%s" % ("PASS" if passed else "FAIL", name, rc, "" if passed else "; output: " + out))


with tempfile.TemporaryDirectory() as tmp:
    doc = os.path.join(root, "docs", "architecture.md")
    expect("the tree as it is", 0, "layering: ok", os.path.join(root, "src"), doc)
    cases = [
        ("quoted include engine -> models", "engine/engine.cc", '#include "models/transformer.h"\n',
         "engine may not depend on models"),
        ("indented <> include sim -> models", "sim/trace.cc", '   #  include <models/loader.h>\n',
         "sim may not depend on models"),
        ("CMake link engine -> models", "engine/CMakeLists.txt", None, "engine may not depend on models"),
        ("kernels -> cache", "kernels/ops.cc", '#include "cache/radix_tree.h"\n', "kernels may not depend on cache"),
    ]
    for i, (name, rel, inject, want) in enumerate(cases):
        src = os.path.join(tmp, "src%d" % i)
        shutil.copytree(os.path.join(root, "src"), src)
        path = os.path.join(src, rel)
        text = open(path).read()
        if inject is None:
            text = text.replace("target_link_libraries(radixlm_engine PUBLIC", "target_link_libraries(radixlm_engine PUBLIC radixlm_models")
        else:
            text = inject + text
        open(path, "w").write(text)
        expect(name, 1, want, src, doc)
    # A module the table does not know is an error too.
    src = os.path.join(tmp, "src_new")
    shutil.copytree(os.path.join(root, "src"), src)
    os.makedirs(os.path.join(src, "newmod"))
    open(os.path.join(src, "newmod", "x.h"), "w").write("#pragma once\n")
    expect("unknown module", 1, "module 'newmod' is not in the allowed-dependencies table", src, doc)
sys.exit(0 if ok else 1)
