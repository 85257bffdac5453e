"""Hostile-client regression test of the HTTP transport of `radixlm serve` over loopback.

Checks how the server behaves against clients that misbehave: slowloris heads (case 1), idle
keep-alive connections (2), oversized chunked and Content-Length bodies (3), a gzip bomb (4),
Range amplification (5), abandoned non-streaming requests (6), request smuggling through
Content-Length + Transfer-Encoding and unknown transfer codings (7), pipelining (8), a NUL byte in
a JSON body (9), more connections than --max-connections (10), oversized heads and request lines
(11), and finally that the server is alive, answers /health and has not grown its RSS by 128 MiB
or more (12). The case numbers are those of the hostile-client probe list; "25.N" cases are issue
25's (bytes 0x80-0xFF in refused headers and the model name, deeply nested and tiny-valued JSON,
clients that send more bytes after their body and leave, 408 on deadlines).
The server runs with --header-timeout 2 --keep-alive-timeout 2 --body-timeout 3
--max-connections 300 --max-body-bytes 1048576 --max-concurrent 4.

Usage: http_test.py RADIXLM. Exit status 1 when any check failed.
Bounded: only 127.0.0.1; every socket has a timeout; at most 302 client connections at a time; every
wait has a deadline; a watchdog kills the server and exits 1 at 110 s; the server is terminated
(killed if it does not exit within 5 s) in a finally block. About 15 s against a conforming server.
"""
import gzip
import io
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"
HEADER_TIMEOUT, KEEP_ALIVE_TIMEOUT, BODY_TIMEOUT = 2, 2, 3
MAX_CONNECTIONS, MAX_BODY_BYTES, MAX_CONCURRENT = 300, 1 << 20, 4
WATCHDOG_SECONDS = 110

FAILURES = []
CHECKS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    CHECKS.append(what)
    if not cond:
        FAILURES.append(what)


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------------------------------------
# Raw HTTP/1.1 on sockets: requests are built byte by byte, responses framed by Content-Length or
# chunked encoding (or the close, when they carry neither).

class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def parse_response(buf, eof=False):
    """(Response, bytes after it) when `buf` starts with a complete response, else None.
    ValueError when the bytes are not an HTTP response."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if eof and buf:
            raise ValueError("truncated head")
        return None
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ValueError("not a status line: %r" % lines[0][:60])
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        headers[key] = headers[key] + ", " + value.strip() if key in headers else value.strip()
    rest = buf[end + 4:]
    if 100 <= status < 200 or status in (204, 304):
        return Response(status, headers, b""), rest
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body, pos = b"", 0
        while True:
            line_end = rest.find(b"\r\n", pos)
            if line_end < 0:
                return None
            size = int(rest[pos:line_end].split(b";")[0].strip(), 16)
            if size == 0:
                trailer_end = rest.find(b"\r\n\r\n", line_end)
                if trailer_end < 0:
                    return None
                return Response(status, headers, body), rest[trailer_end + 4:]
            if len(rest) < line_end + 2 + size + 2:
                return None
            body += rest[line_end + 2:line_end + 2 + size]
            pos = line_end + 2 + size + 2
    if "content-length" in headers:
        n = int(headers["content-length"])
        if len(rest) < n:
            return None
        return Response(status, headers, rest[:n]), rest[n:]
    if eof:
        return Response(status, headers, rest), b""
    return None


class Conn:
    """One client connection with a read buffer (pipelined responses stay in order)."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf = b""
        self.eof = False  # the server closed (EOF or reset)

    def send(self, data):
        self.sock.sendall(data)

    def _recv(self, timeout):
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except OSError:  # reset: what arrived before it is all there is
            self.eof = True
            return True
        if data:
            self.buf += data
        else:
            self.eof = True
        return True

    def response(self, timeout=5.0):
        """The next response, or None when none completes within `timeout` (or the connection
        ends first); a Response with status -1 when the bytes are not HTTP."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = parse_response(self.buf, self.eof)
            except ValueError:
                garbage, self.buf = self.buf, b""
                return Response(-1, {}, garbage)
            if got:
                resp, self.buf = got
                return resp
            if self.eof or not self._recv(deadline - time.monotonic()):
                return None

    def wait_closed(self, timeout):
        """True when the server closes the connection within `timeout` (bytes arriving first
        stay in self.buf)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0 or not self._recv(left):
                return False
        return True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def build(method, path, body=None, headers=(), content_type="application/json"):
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % (method, path)
    if body is not None:
        head += "Content-Type: %s\r\nContent-Length: %d\r\n" % (content_type, len(body))
    for name, value in headers:
        head += "%s: %s\r\n" % (name, value)
    return head.encode("latin-1") + b"\r\n" + (body or b"")


def jbody(obj):
    return json.dumps(obj).encode()


def request(port, method, path, body=None, headers=(), timeout=5.0):
    """One request on a fresh connection (Connection: close): (Response or None, seconds)."""
    t0 = time.monotonic()
    conn, resp = None, None
    try:
        conn = Conn(port, timeout)
        conn.send(build(method, path, body, list(headers) + [("Connection", "close")]))
        resp = conn.response(timeout - (time.monotonic() - t0))
    except OSError:
        resp = None
    finally:
        if conn:
            conn.close()
    return resp, time.monotonic() - t0


def send_pieces(conn, pieces):
    """Sends `pieces` in order until all are sent, the server answers (the socket is readable) or
    the connection fails; returns how many were sent. Each sendall is bounded by the socket's
    timeout."""
    sel = selectors.DefaultSelector()
    sel.register(conn.sock, selectors.EVENT_READ)
    sent = 0
    try:
        for piece in pieces:
            if sel.select(0):
                break
            try:
                conn.sock.sendall(piece)
            except OSError:  # includes socket.timeout: the server stopped reading
                break
            sent += 1
    finally:
        sel.close()
    return sent


def describe(resp, seconds=None):
    if resp is None:
        text = "no response"
    else:
        text = "%d %s" % (resp.status, resp.body[:80].decode("utf-8", "replace"))
    return text if seconds is None else "%s in %.2f s" % (text, seconds)


def metric(text, name):
    """A Prometheus value from /metrics text (-1 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1


def metrics(port):
    resp, _ = request(port, "GET", "/metrics", timeout=2)
    return resp.body.decode("utf-8", "replace") if resp is not None and resp.status == 200 else ""


def completion(port, max_tokens=8, timeout=10.0):
    return request(port, "POST", "/v1/completions", jbody({"prompt": "hello", "max_tokens": max_tokens}), timeout=timeout)


# ---------------------------------------------------------------------------------------------
# The server's memory: VmRSS now, and the peak over a case (VmHWM after resetting it through
# /proc/PID/clear_refs, and VmRSS sampled every 20 ms, whichever is larger).

def status_kib(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def rss_mib(pid):
    return status_kib(pid, "VmRSS") / 1024.0


class PeakRss:
    def __init__(self, pid):
        self.pid, self.growth = pid, 0.0

    def __enter__(self):
        self.before = status_kib(self.pid, "VmRSS")
        try:
            with open("/proc/%d/clear_refs" % self.pid, "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self.hwm_reset = True
        except OSError:
            self.hwm_reset = False
        self.peak = self.before
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, status_kib(self.pid, "VmRSS"))

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(1)
        self.peak = max(self.peak, status_kib(self.pid, "VmRSS"))
        if self.hwm_reset:
            self.peak = max(self.peak, status_kib(self.pid, "VmHWM"))
        self.growth = (self.peak - self.before) / 1024.0
        return False


# ---------------------------------------------------------------------------------------------
# The cases, in the order main() runs them: the quick ones first, then those that wait for the
# server's timeouts one after the other (their connections closed before the next begins).

def case_range(port):
    # Probe case 5: Range amplification.
    plain, _ = request(port, "GET", "/v1/models")
    ranged, _ = request(port, "GET", "/v1/models", headers=[("Range", "bytes=" + ",".join(["0-"] * 400))])
    ok = (plain is not None and ranged is not None and plain.status == 200 and ranged.status == 200 and
          ranged.body == plain.body and "multipart" not in ranged.headers.get("content-type", "").lower())
    check(ok, "5. GET /v1/models with Range: bytes=0-,0-,... (400 ranges): 200 and the body without Range "
              "(%d bytes), no multipart/byteranges (got %s, %s bytes, %s)" %
          (len(plain.body) if plain else -1, ranged.status if ranged else "no response",
           len(ranged.body) if ranged else "-", ranged.headers.get("content-type") if ranged else "-"))


def case_pipelining(port):
    # Probe case 8: two requests in one sendall on one connection, two responses in order.
    resps = []
    conn = Conn(port)
    try:
        conn.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        resps = [conn.response(5), conn.response(5)]
    except OSError:
        pass
    finally:
        conn.close()
    ok = len(resps) == 2 and all(r is not None and r.status == 200 and (r.json() or {}).get("status") == "ok" for r in resps)
    check(ok, "8. two pipelined GET /health in one send: two complete 200 responses (%s)" %
          ", ".join(describe(r) for r in resps))
    # Distinct prompt lengths tell the answers apart: usage.prompt_tokens 3 then 7.
    bodies = [jbody({"prompt": [1, 2, 3], "max_tokens": 2}), jbody({"prompt": [1, 2, 3, 4, 5, 6, 7], "max_tokens": 2})]
    resps = []
    conn = Conn(port, 10)
    try:
        conn.send(b"".join(build("POST", "/v1/completions", b) for b in bodies))
        resps = [conn.response(10), conn.response(10)]
    except OSError:
        pass
    finally:
        conn.close()
    prompt_tokens = [((r.json() or {}).get("usage") or {}).get("prompt_tokens") if r is not None and r.status == 200 else None
                     for r in resps]
    check(prompt_tokens == [3, 7], "8. two pipelined POST /v1/completions (Content-Length bodies) in one send: "
                                   "two 200 responses in order, prompt_tokens %s (want [3, 7]; %s)" %
          (prompt_tokens, ", ".join(describe(r) for r in resps)))


def case_nul_byte(port):
    # Probe case 9: a NUL byte inside a JSON body, Content-Length covering the bytes after it.
    resp, _ = request(port, "POST", "/v1/completions", b'{"prompt": "hi", "max_tokens": 2}\x00junk')
    check(resp is not None and resp.status == 400, "9. NUL byte in a JSON body -> 400 (%s)" % describe(resp))


def case_smuggling(port):
    # Probe case 7: request smuggling; only the chunked transfer coding is understood.
    body = b'{"prompt": "hi", "max_tokens": 2}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    resp, closed = None, False
    conn = Conn(port)
    try:
        conn.send(head + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(body) + chunked)
        resp = conn.response(3)
        closed = resp is not None and conn.wait_closed(2)
    except OSError:
        pass
    finally:
        conn.close()
    check(resp is not None and resp.status == 400 and closed,
          "7. Content-Length together with Transfer-Encoding: chunked -> 400, then the server closes (%s, closed %s)" %
          (describe(resp), closed))
    # Answered from the head: a server waiting for a body it cannot frame would hang here.
    for coding, payload in [("gzip, chunked", chunked), ("chunked, gzip", chunked), ("gzip", body)]:
        resp = None
        conn = Conn(port)
        try:
            conn.send(head + b"Transfer-Encoding: %s\r\n\r\n" % coding.encode() + payload)
            resp = conn.response(2.5)
        except OSError:
            pass
        finally:
            conn.close()
        check(resp is not None and resp.status in (400, 501),
              "7. Transfer-Encoding: %s -> 400 or 501 within 2.5 s (%s)" % (coding, describe(resp)))


def send_head_and_read(port, data):
    """Sends `data` in 8 KiB pieces (stopping when the server answers or closes); returns the
    response and whether the server closed the connection after it."""
    resp, closed = None, False
    conn = Conn(port, 3)
    try:
        send_pieces(conn, [data[i:i + 8192] for i in range(0, len(data), 8192)])
        resp = conn.response(3)
        closed = resp is not None and conn.wait_closed(2)
    except OSError:
        pass
    finally:
        conn.close()
    return resp, closed


def case_huge_head(port):
    # Probe case 11: 100 KiB of headers -> 431 (or 400) and close; a 100 KiB request line -> 414, 431 or 400 (Beast counts the line in the head limit).
    many = "".join("X-Fill-%04d: %s\r\n" % (i, "a" * 100) for i in range(900))  # 900 x 115 B = 101 KiB
    resp, closed = send_head_and_read(port, ("GET /health HTTP/1.1\r\nHost: x\r\n" + many + "\r\n").encode())
    check(resp is not None and resp.status in (431, 400) and closed,
          "11. 100 KiB of headers (900 lines) -> 431 or 400, then closed (%s, closed %s)" % (describe(resp), closed))
    resp, closed = send_head_and_read(port, ("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + "a" * 102400 + "\r\n\r\n").encode())
    check(resp is not None and resp.status in (431, 400) and closed,
          "11. one 100 KiB header line -> 431 or 400, then closed (%s, closed %s)" % (describe(resp), closed))
    resp, _ = send_head_and_read(port, ("GET /" + "a" * 102400 + " HTTP/1.1\r\nHost: x\r\n\r\n").encode())
    check(resp is not None and resp.status in (414, 431, 400), "11. a 100 KiB request line -> 414, 431 or 400 (%s)" % describe(resp))


def case_big_body(port, pid):
    # Probe case 3: bodies over --max-body-bytes (1 MiB): 413, and no buffering of the excess.
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"10000\r\n" + b"a" * 65536 + b"\r\n"  # 64 KiB; 64 of them = 4 MiB
    resp, sent = None, 0
    with PeakRss(pid) as peak:
        conn = Conn(port, 3)
        try:
            sent = send_pieces(conn, [head] + [chunk] * 64 + [b"0\r\n\r\n"])
            resp = conn.response(5)
        except OSError:
            pass
        finally:
            conn.close()
    check(resp is not None and resp.status == 413,
          "3. a 4 MiB chunked body (limit 1 MiB) -> 413 (%s; %d of 66 pieces sent before the answer or close)" %
          (describe(resp), sent))
    check(peak.growth < 64, "3. the server's RSS grew by %.1f MiB (< 64) receiving the 4 MiB chunked body" % peak.growth)
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (4 << 20))
    resp, sent = None, 0
    with PeakRss(pid) as peak:
        conn = Conn(port, 3)
        try:
            sent = send_pieces(conn, [head] + [b"a" * 65536] * 64)
            resp = conn.response(5)
        except OSError:
            pass
        finally:
            conn.close()
    check(resp is not None and resp.status == 413,
          "3. Content-Length: 4 MiB (limit 1 MiB) -> 413 (%s; %d of 65 pieces sent)" % (describe(resp), sent))
    check(peak.growth < 64, "3. the server's RSS grew by %.1f MiB (< 64) on the 4 MiB Content-Length body" % peak.growth)


def gzip_bomb():
    """100 MiB of spaces, gzip-compressed (~100 KB)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0) as g:
        block = b" " * (1 << 20)
        for _ in range(100):
            g.write(block)
    return out.getvalue()


def case_gzip_bomb(port, pid, bomb):
    # Probe case 4: Content-Encoding: gzip is refused (415) without inflating; identity is served.
    data = build("POST", "/v1/completions", bomb, [("Content-Encoding", "gzip")])
    resp = None
    with PeakRss(pid) as peak:
        conn = Conn(port, 3)
        try:
            send_pieces(conn, [data[i:i + 65536] for i in range(0, len(data), 65536)])
            resp = conn.response(5)
        except OSError:
            pass
        finally:
            conn.close()
    check(resp is not None and resp.status == 415,
          "4. a gzip bomb (%d bytes inflating to 100 MiB) with Content-Encoding: gzip -> 415 (%s)" % (len(bomb), describe(resp)))
    check(peak.growth < 64, "4. the server's RSS grew by %.1f MiB (< 64): the bomb was not inflated" % peak.growth)
    resp, secs = request(port, "POST", "/v1/completions", jbody({"prompt": "hello", "max_tokens": 8}),
                         [("Content-Encoding", "identity")], timeout=10)
    check(resp is not None and resp.status == 200, "4. Content-Encoding: identity with a plain JSON body -> 200 (%s)" %
          describe(resp, secs))


def case_slowloris(port):
    # Probe case 1: 100 heads trickling one byte every 0.5 s.
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
    drip = b"X-Trickle: " + b"a" * 400  # never completes a line within the test
    socks, opened = [], []
    for _ in range(100):
        try:
            s = socket.create_connection((HOST, port), timeout=2)
            s.sendall(head)
        except OSError:
            continue
        socks.append(s)
        opened.append(time.monotonic())
    n = len(socks)
    closed_at, got = [None] * n, [b""] * n
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    probes_done = threading.Event()
    # Closes are judged header-timeout + 2 s after each connection opened; trickling goes on
    # until the probes below are done (the completion waits at most 10 s) or all are closed.
    judge_at = (max(opened) if opened else time.monotonic()) + HEADER_TIMEOUT + 2 + 0.2
    hard_end = time.monotonic() + 12

    def mark_closed(i, when):
        if closed_at[i] is None:
            closed_at[i] = when
            sel.unregister(socks[i])

    def trickle():
        pos, next_tick = 0, time.monotonic() + 0.5
        while True:
            now = time.monotonic()
            if now >= hard_end or all(c is not None for c in closed_at):
                return
            if probes_done.is_set() and now >= judge_at:
                return
            if now >= next_tick:
                for i, s in enumerate(socks):
                    if closed_at[i] is None:
                        try:
                            s.send(drip[pos:pos + 1])
                        except OSError:
                            mark_closed(i, now)
                pos = min(pos + 1, len(drip) - 1)
                next_tick += 0.5
            if not sel.get_map():
                return
            for key, _ in sel.select(max(0.0, min(next_tick, hard_end) - time.monotonic())):
                i, now = key.data, time.monotonic()
                try:
                    data = socks[i].recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    data = b""
                if data:
                    got[i] += data
                else:
                    mark_closed(i, now)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    done = {}

    def complete():
        done["resp"], done["secs"] = completion(port, 8, timeout=10)

    completer = threading.Thread(target=complete, daemon=True)
    completer.start()
    health = []
    for _ in range(5):
        resp, secs = request(port, "GET", "/health", timeout=1)
        health.append((resp.status if resp else None, secs))
        time.sleep(0.1)
    completer.join(11)
    probes_done.set()
    trickler.join(13)
    sel.close()
    for s in socks:
        s.close()
    check(n == 100, "1. 100 slowloris connections opened (%d)" % n)
    check(all(st == 200 and secs < 1 for st, secs in health),
          "1. /health during the slowloris: 5 of 5 answered 200 within 1 s (%s)" %
          ", ".join("%s %.2f s" % (st, secs) for st, secs in health))
    check(done.get("resp") is not None and done["resp"].status == 200 and done["secs"] < 10,
          "1. an 8-token completion during the slowloris answers 200 within 10 s (%s)" %
          describe(done.get("resp"), done.get("secs", 10)))
    lifetimes = [c - o for c, o in zip(closed_at, opened) if c is not None]
    in_time = sum(1 for t in lifetimes if t <= HEADER_TIMEOUT + 2)
    # Whatever the server sends before closing must be a 408.
    other = [g[:40] for g in got if g and not (g.startswith(b"HTTP/1.1 408") or g.startswith(b"HTTP/1.0 408"))]
    check(n > 0 and in_time == n and not other,
          "1. the server closed all %d trickling connections within header-timeout + 2 = %d s (%d did%s; "
          "responses other than 408: %s)" % (n, HEADER_TIMEOUT + 2, in_time,
                                             ", slowest %.2f s" % max(lifetimes) if lifetimes else "",
                                             other[:2] or "none"))


def case_idle_keepalive(port):
    # Probe case 2: 200 keep-alive connections each served one /health, then idle.
    socks, closed_early = [], 0
    for _ in range(200):
        try:
            s = socket.create_connection((HOST, port), timeout=2)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        except OSError:
            continue
        socks.append(s)
    n = len(socks)
    bufs, answered_at, closed_at, statuses = [b""] * n, [None] * n, [None] * n, [None] * n
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)

    def pump(until, stop):
        while sel.get_map() and not stop():
            left = until - time.monotonic()
            if left <= 0:
                return
            for key, _ in sel.select(left):
                i, now = key.data, time.monotonic()
                try:
                    data = socks[i].recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    data = b""
                if not data:
                    closed_at[i] = now
                    sel.unregister(socks[i])
                    continue
                bufs[i] += data
                if answered_at[i] is None:
                    try:
                        got = parse_response(bufs[i])
                    except ValueError:
                        got = (Response(-1, {}, b""), b"")
                    if got:
                        answered_at[i], statuses[i], bufs[i] = now, got[0].status, got[1]

    pump(time.monotonic() + 5, lambda: all(a is not None or c is not None for a, c in zip(answered_at, closed_at)))
    answered = sum(1 for st in statuses if st == 200)
    closed_early = sum(1 for a, c in zip(answered_at, closed_at) if a is None and c is not None)
    check(n == 200 and answered == 200, "2. 200 keep-alive connections each answered GET /health with 200 "
                                        "(%d opened, %d answered within 5 s, %d closed unanswered)" % (n, answered, closed_early))
    resp, secs = request(port, "GET", "/health", timeout=1)
    check(resp is not None and resp.status == 200 and secs < 1,
          "2. /health from a new connection answers 200 within 1 s while they idle (%s)" % describe(resp, secs))
    served = [i for i in range(n) if answered_at[i] is not None]
    last = max((answered_at[i] for i in served), default=time.monotonic())
    pump(last + KEEP_ALIVE_TIMEOUT + 2 + 0.2, lambda: all(closed_at[i] is not None for i in served))
    sel.close()
    for s in socks:
        s.close()
    idle = [closed_at[i] - answered_at[i] for i in served if closed_at[i] is not None]
    in_time = sum(1 for t in idle if t <= KEEP_ALIVE_TIMEOUT + 2)
    extra = sum(1 for i in served if bufs[i])
    check(served and in_time == len(served) and not extra,
          "2. the server closed all %d idle keep-alive connections within keep-alive-timeout + 2 = %d s "
          "(%d did%s; %d sent bytes after the response)" % (len(served), KEEP_ALIVE_TIMEOUT + 2, in_time,
                                                            ", slowest %.2f s" % max(idle) if idle else "", extra))


def case_max_connections(port):
    # Probe case 10: 300 silent connections (well within the 2 s header timeout), then one more.
    held = []
    for _ in range(MAX_CONNECTIONS):
        try:
            held.append(Conn(port, 2))
        except OSError:
            pass
    time.sleep(0.3)  # the server accepts them
    within = None
    if held:  # the last one is within the limit: served
        try:
            held[-1].send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            within = held[-1].response(1.5)
        except OSError:
            pass
    resp, closed, how = None, False, ""
    try:
        extra = Conn(port, 2)
        try:
            extra.send(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            resp = extra.response(1.5)
            if resp is not None:
                closed = extra.wait_closed(1.5)
            else:
                closed = extra.eof and not extra.buf
                how = "closed at once" if closed else "no answer in 1.5 s"
        except OSError as e:  # reset while sending: closed at once
            closed, how = True, "reset (%s)" % e.__class__.__name__
        finally:
            extra.close()
    except OSError as e:
        closed, how = True, "connect failed (%s)" % e.__class__.__name__
    ok = (resp is not None and resp.status == 503 and closed) or (resp is None and closed)
    check(len(held) == MAX_CONNECTIONS and ok,
          "10. with %d connections open (%d opened), one more gets 503 and is closed, or is closed at once (%s)" %
          (MAX_CONNECTIONS, len(held), "%s, closed %s" % (describe(resp), closed) if resp is not None else how))
    check(within is not None and within.status == 200,
          "10. the %dth connection (within --max-connections) is served /health 200 (%s)" % (MAX_CONNECTIONS, describe(within)))
    for c in held:
        c.close()
    time.sleep(0.3)
    deadline, resp = time.monotonic() + 3, None
    while time.monotonic() < deadline:
        resp, _ = request(port, "GET", "/health", timeout=1)
        if resp is not None and resp.status == 200:
            break
        time.sleep(0.2)
    check(resp is not None and resp.status == 200, "10. after the %d connections close, /health answers 200 again (%s)" %
          (MAX_CONNECTIONS, describe(resp)))


def case_abandoned(port):
    # Probe case 6: non-streaming requests whose clients leave are cancelled. The parser
    # (src/serve/completion_request.cc) has no ignore_eos: a long max_tokens keeps them running
    # (an end-of-text among 151,936 random-model tokens is rare; the in-flight check catches it).
    body = build("POST", "/v1/completions", jbody({"prompt": "hello", "max_tokens": 2000}))
    socks = []
    for _ in range(8):
        try:
            s = socket.create_connection((HOST, port), timeout=2)
            s.sendall(body)
            socks.append(s)
        except OSError:
            pass
    time.sleep(0.35)
    text = metrics(port)
    in_flight = metric(text, "radixlm_running_requests") + metric(text, "radixlm_queue_length")
    time.sleep(max(0.0, 0.5 - 0.35))
    for s in socks:
        s.close()
    closed_at = time.monotonic()
    check(len(socks) == 8 and in_flight >= 1,
          "6. 8 clients sent 2000-token requests; %d running or queued when they left (>= 1)" % in_flight)
    running = queued = -1
    while time.monotonic() < closed_at + 3:
        text = metrics(port)
        running, queued = metric(text, "radixlm_running_requests"), metric(text, "radixlm_queue_length")
        if running == 0 and queued == 0:
            break
        time.sleep(0.2)
    check(running == 0 and queued == 0,
          "6. within 3 s of the clients closing, /metrics shows radixlm_running_requests 0 and radixlm_queue_length 0 "
          "(%s and %s after %.1f s)" % (running, queued, time.monotonic() - closed_at))
    resp, secs = completion(port, 8, timeout=10)
    check(resp is not None and resp.status == 200 and secs < 10,
          "6. then an 8-token completion answers 200 within 10 s (%s)" % describe(resp, secs))


def case_high_bytes(port):
    # Issue 25.1: bytes 0x80-0xFF in a refused header value are quoted into the error, which
    # must not throw (it aborted the server): 415 / 501 with a valid JSON body, server up.
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    for name, status in [(b"Content-Encoding", 415), (b"Transfer-Encoding", 501)]:
        for value in [b"\xff", b"gzip\x80\xfe", b"\xc3"]:
            resp, _ = send_head_and_read(port, head + name + b": " + value + b"\r\nContent-Length: 2\r\n\r\n{}"
                                         if name == b"Content-Encoding" else head + name + b": " + value + b"\r\n\r\n")
            body = resp.json() if resp is not None else None
            check(resp is not None and resp.status == status and isinstance(body, dict) and "error" in body,
                  "25.1 %s: %r -> %d with a JSON error body (%s)" % (name.decode(), value, status, describe(resp)))
    resp, _ = request(port, "GET", "/health", timeout=2)
    check(resp is not None and resp.status == 200, "25.1 the server is up after them (%s)" % describe(resp))


def case_nested_json(port, pid):
    # Issue 25.2: 1 MiB (the limit here) of '[' is refused by depth without building 64x its
    # size; a megabyte of tiny values is refused by the parse's memory bound; neither is held.
    before = rss_mib(pid)
    for name, body, statuses in [("'[' x 1 MiB", b"[" * (MAX_BODY_BYTES - 64), (400,)),
                                 ("'[],' x 1 MiB", b"[" + b"[]," * ((MAX_BODY_BYTES - 64) // 3) + b"[]]", (413,)),
                                 ("'0,' x 1 MiB", b"[" + b"0," * ((MAX_BODY_BYTES - 64) // 2) + b"0]", (413,))]:
        with PeakRss(pid) as peak:
            for _ in range(3):
                resp, _ = request(port, "POST", "/v1/completions", body, timeout=10)
        check(resp is not None and resp.status in statuses and peak.growth < 24,
              "25.2 %s three times -> %s, peak RSS growth %.1f MiB (< 24) (%s)" % (name, statuses, peak.growth, describe(resp)))
    nested = {"prompt": "hi", "max_tokens": 1, "stop": None}
    deep = json.dumps(nested).encode()[:-1] + b', "x": ' + b"[" * 200 + b"]" * 200 + b"}"
    resp, _ = request(port, "POST", "/v1/completions", deep, timeout=5)
    check(resp is not None and resp.status == 400 and b"deep" in resp.body,
          "25.2 a field nested 200 deep -> 400 naming the depth (%s)" % describe(resp))
    time.sleep(0.3)
    # Under ASan its quarantine holds freed memory by design (scripts/sanitize.sh sets the slack).
    slack = max(16.0, float(os.environ.get("RADIXLM_SOAK_RSS_SLACK_MIB", "16")))
    check(rss_mib(pid) < before + slack,
          "25.2 RSS after them %.1f MiB < before %.1f MiB + %.0f" % (rss_mib(pid), before, slack))


def case_abandoned_with_extra_bytes(port):
    # Issue 25.3: a client that sends a stray byte, or a pipelined request, after its body and
    # then closes is cancelled like one that just closes.
    body = build("POST", "/v1/completions", jbody({"prompt": "hello", "max_tokens": 2000, "ignore_eos": True}))
    for name, extra in [("one extra byte", b"x"), ("a pipelined request", build("GET", "/health")),
                        ("64 KiB of garbage", b"y" * 65536)]:
        socks = []
        for _ in range(4):
            try:
                s = socket.create_connection((HOST, port), timeout=2)
                s.sendall(body + extra)
                socks.append(s)
            except OSError:
                pass
        time.sleep(0.4)
        in_flight = metric(metrics(port), "radixlm_running_requests") + metric(metrics(port), "radixlm_queue_length")
        for s in socks:
            s.close()
        closed_at, running = time.monotonic(), -1
        while time.monotonic() < closed_at + 3:
            text = metrics(port)
            running = metric(text, "radixlm_running_requests") + metric(text, "radixlm_queue_length")
            if running == 0:
                break
            time.sleep(0.2)
        check(len(socks) == 4 and in_flight >= 1 and running == 0,
              "25.3 %s after the body, then close: %d in flight, none within 3 s of the close (%s left)" % (name, in_flight, running))


def case_deadlines_answer_408(port):
    # Issue 25.11: a head or a body that does not arrive in time is answered 408, then closed.
    for part, data in [("head", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"),
                       ("body", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")]:
        conn, resp, closed = Conn(port, 8), None, False
        try:
            conn.send(data)
            resp = conn.response(HEADER_TIMEOUT + BODY_TIMEOUT + 2)
            closed = resp is not None and conn.wait_closed(2)
        except OSError:
            pass
        finally:
            conn.close()
        check(resp is not None and resp.status == 408 and closed,
              "25.11 a %s that never completes -> 408, then closed (%s, closed %s)" % (part, describe(resp), closed))


def case_invalid_utf8_model_name(binary):
    # Issue 25.1: a model name (from a path or --model-name) with a byte that is not UTF-8 is
    # written into /v1/models and /server_info with U+FFFD, not a 500.
    port = free_port()
    proc = subprocess.Popen([binary.encode(), b"serve", b"--model", b"random:tiny", b"--port", str(port).encode(),
                             b"--model-name", b"kjv-\xff\xfe.gguf", b"--no-scoring"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, up = time.monotonic() + 20, None
        while time.monotonic() < deadline and proc.poll() is None and not up:
            up, _ = request(port, "GET", "/health", timeout=1)
            time.sleep(0.1)
        for path in ["/v1/models", "/server_info"]:
            resp, _ = request(port, "GET", path, timeout=3)
            body = resp.json() if resp is not None else None
            check(resp is not None and resp.status == 200 and body is not None and "\ufffd" in json.dumps(body, ensure_ascii=False),
                  "25.1 %s with a non-UTF-8 model name -> 200, the name with U+FFFD (%s)" % (path, describe(resp)))
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def case_survived(port, proc, start_rss):
    # Probe case 12: alive, serving, memory bounded.
    check(proc.poll() is None, "12. the server process is alive after all cases (exit status %s)" % proc.poll())
    resp, secs = request(port, "GET", "/health", timeout=2)
    check(resp is not None and resp.status == 200, "12. /health answers 200 at the end (%s)" % describe(resp, secs))
    rss = rss_mib(proc.pid)
    check(0 < rss < start_rss + 128, "12. RSS %.1f MiB < RSS at start %.1f MiB + 128 MiB" % (rss, start_rss))


def main():
    binary = sys.argv[1]
    bomb = gzip_bomb()  # before the server starts, so its CPU does not count against a case
    port = free_port()
    cmd = [binary, "serve", "--model", "random:tiny", "--port", str(port), "--kv-tokens", "8192",
           "--header-timeout", str(HEADER_TIMEOUT), "--keep-alive-timeout", str(KEEP_ALIVE_TIMEOUT),
           "--body-timeout", str(BODY_TIMEOUT), "--max-connections", str(MAX_CONNECTIONS),
           "--max-body-bytes", str(MAX_BODY_BYTES), "--max-concurrent", str(MAX_CONCURRENT)]
    log = tempfile.TemporaryFile()  # a pipe could fill up and stall a server that logs per connection
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def watchdog():
        print("FAIL the test ran past %d s: killing the server" % WATCHDOG_SECONDS, flush=True)
        proc.kill()
        os._exit(1)
    timer = threading.Timer(WATCHDOG_SECONDS, watchdog)
    timer.daemon = True
    timer.start()
    try:
        ready, deadline = None, time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _ = request(port, "GET", "/health", timeout=1)
            if ready is not None and ready.status == 200:
                break
            time.sleep(0.1)
        if ready is None or ready.status != 200:
            log.seek(0)
            print(log.read()[-2000:].decode("utf-8", "replace"))
            check(False, "the server started and answered /health (exit status %s)" % proc.poll())
            return 1
        warm, secs = completion(port, 8, timeout=10)
        check(warm is not None and warm.status == 200, "baseline: an 8-token completion answers 200 (%s)" % describe(warm, secs))
        start_rss = rss_mib(proc.pid)
        print("     server RSS at start %.1f MiB" % start_rss)
        case_range(port)                    # 5
        case_pipelining(port)               # 8
        case_nul_byte(port)                 # 9
        case_smuggling(port)                # 7
        case_huge_head(port)                # 11
        case_big_body(port, proc.pid)       # 3
        case_gzip_bomb(port, proc.pid, bomb)  # 4
        case_slowloris(port)                # 1: ~4.5 s (header timeout)
        case_idle_keepalive(port)           # 2: ~4.5 s (keep-alive timeout)
        case_max_connections(port)          # 10: ~1 s
        case_abandoned(port)                # 6: ~1-3 s
        case_high_bytes(port)               # issue 25.1
        case_nested_json(port, proc.pid)    # issue 25.2
        case_abandoned_with_extra_bytes(port)  # issue 25.3: ~3 s
        case_deadlines_answer_408(port)     # issue 25.11: ~5 s
        case_survived(port, proc, start_rss)  # 12
        case_invalid_utf8_model_name(binary)  # issue 25.1: its own server
    finally:
        timer.cancel()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
    print("%d checks, %d failed" % (len(CHECKS), len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
