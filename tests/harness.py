"""What the Python end-to-end tests share: checks with a closing count line, free loopback ports,
a `radixlm serve` started and stopped with a deadline, /metrics values, a process's RSS.
Standard library only; tests import it from their folder's parent (tests/)."""
import socket
import subprocess
import sys
import time
import urllib.request

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def finish():
    """The closing line ctest's log shows, and the exit code."""
    passed = not FAILURES
    print("%d passed, %d failed" % (1 if passed else 0, 0 if passed else 1))
    sys.exit(0 if passed else 1)


def free_port(consecutive=1):
    """A loopback port with `consecutive` - 1 free ports after it."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + consecutive >= 65535:
            continue
        ok = True
        for p in range(base + 1, base + consecutive):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            t.close()
        if ok:
            return base
    raise RuntimeError("no free loopback ports")


def serve(binary, args, port, wait_seconds=20):
    """`radixlm serve ARGS --port PORT`, waited for until /health answers (at most wait_seconds)."""
    proc = subprocess.Popen([binary, "serve"] + list(args) + ["--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    deadline = time.time() + wait_seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(base + "/health", timeout=1)
            break
        except Exception:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    return proc, base


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def metric(base, name):
    """A Prometheus value from /metrics (-1 when absent)."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
