#!/usr/bin/env python3
"""The repo stands alone: no program, script, benchmark or test reaches for ../shared by itself.

Optional shared data has one door: CMake's RADIXLM_SHARED_DATA (CMakeLists.txt), handed to tests
in their environment; each test that reads it reports SKIPPED when it is absent. This test fails
on any other code that builds a path to ../shared (comments and docstrings may mention it). CI
runs the suite in a clone with no ../shared, which shows the skips are real.

Usage: standalone_test.py SOURCE_DIR"""
import ast
import os
import re
import subprocess
import sys

# Ways code spells a path into the workplace's shared folder.
PATTERNS = [re.compile(p) for p in (
    r"\.\./shared\b",                          # "../shared/...", "${X}/../shared"
    r"""["']shared["']\s*,\s*["']data["']""",  # os.path.join(..., "shared", "data")
    r"""/\s*"shared"\s*/""",                   # std::filesystem path / "shared" / ...
    r"\.\.\"\s*,\s*\"shared\"",                # join("..", "shared")
    r"""(join|dirname|parent|/)[^\n]*["']shared["']""",  # join(dirname(ROOT), "shared"), p.parent / 'shared'
    r"\)/shared\b",                            # shell: $(dirname "$0")/shared
)]
# The door itself.
ALLOWED = {("CMakeLists.txt", 'set(RADIXLM_SHARED_DATA "${CMAKE_SOURCE_DIR}/../shared/data"')}
EXTENSIONS = (".cc", ".h", ".cpp", ".hpp", ".c", ".py", ".sh", ".txt", ".cmake", ".in", ".js")
SKIP_DIRS = ("docs/", "models/", "third_party_data/", "build")


def tracked_files(root):
    """The repo's files, tracked or new (git), else everything under root."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        files = [f for f in out if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for base, _, names in os.walk(root):
            files += [os.path.relpath(os.path.join(base, n), root) for n in names]
    return [f for f in files if not f.startswith(SKIP_DIRS) and not f.startswith(".git/")]


def python_docstring_lines(text):
    lines = set()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return lines
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_part(rel, line):
    """The line without its comment (// for C++, # elsewhere; a # inside a string is rare here)."""
    if rel.endswith((".cc", ".h", ".cpp", ".hpp", ".c", ".js")):
        return re.sub(r"(^|\s)//.*$", "", line)  # not the // of "http://" inside a string
    if rel.endswith((".py", ".sh", ".txt", ".cmake")) or "/" not in rel:
        return re.sub(r"(^|\s)#.*$", "", line)
    return line


def violations(root):
    found = []
    for rel in tracked_files(root):
        if not (rel.endswith(EXTENSIONS) or rel.startswith(".ci/") or rel == ".ci/run") or rel == "tests/standalone_test.py":
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        doc = python_docstring_lines(text) if rel.endswith(".py") else set()
        for n, line in enumerate(text.split("\n"), 1):
            if n in doc:
                continue
            code = code_part(rel, line)
            if any(p.search(code) for p in PATTERNS) and not any(rel == f and a in line for f, a in ALLOWED):
                found.append("%s:%d: %s" % (rel, n, line.strip()))
    return found


def self_check():
    """The scan must catch what it is for (a test that cannot fail is a defect)."""
    bad = ['p = os.path.join(ROOT, "..", "shared", "data", "x")', 'auto p = fs::path(src) / ".." / "shared" / "data";',
           'std::string s = std::string(src) + "/../shared/data/m.gguf";', 'p = os.path.join(os.path.dirname(ROOT), "shared")',
           "p = Path(ROOT).parent / 'shared'", 'auto p = root.parent_path() / "shared";']
    good = ['// reads ../shared/data when told to', '# ../shared is optional', 'x = os.environ["RADIXLM_SHARED_DATA"]',
            'if part == "shared":']
    for line in bad:
        rel = "x.cc" if line.startswith(("auto", "std::")) else "x.py"
        assert any(p.search(code_part(rel, line)) for p in PATTERNS), line
    assert any(p.search(code_part("x.sh", 'd="$(dirname "$0")/shared/data"')) for p in PATTERNS)
    for line in good:
        rel = "x.cc" if line.startswith("//") else "x.py"
        assert not any(p.search(code_part(rel, line)) for p in PATTERNS), line


def main():
    root = os.path.abspath(sys.argv[1])
    self_check()
    found = violations(root)
    if found:
        print("code that reaches for ../shared outside RADIXLM_SHARED_DATA (tests must read the variable and skip "
              "when it is absent; programs and scripts take the path as an option):")
        print("\n".join("  " + f for f in found))
        return 1
    print("no code outside CMake's RADIXLM_SHARED_DATA builds a path to ../shared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
