"""KV cache events end to end: `radixlm serve --kv-events` on a small KV pool (so blocks are
evicted), a workload of prompts sharing prefixes, and two subscribers in vLLM's wire format:
- one from the start, which rebuilds the block index from BlockStored / BlockRemoved alone;
  at the end it must equal the server's own tree (/kv_cache/blocks), with evictions seen;
- one that joins halfway (it misses the first batches: a gap), asks the replay socket for
  everything from sequence 0, and must reach the same index, with the replayed payloads
  byte-identical to the live ones.
And on the hybrid default model with --kv-events-ssm-checkpoints: SSM checkpoints announced as the
cache places and evicts them, mirrored exactly. Also: every message is [topic, 8-byte big-endian seq, msgpack [ts, events, 0]], sequence numbers
run 0, 1, 2, ... without gaps, and stored blocks carry block_size tokens each.
Usage: kv_events_test.py RADIXLM. Needs python3-zmq and python3-msgpack (scripts/setup.sh); exits
77 (SKIPPED) without them. Bounded: loopback, 60 requests, every wait has a deadline."""
import json
import os
import random
import sys
import threading
import time
import urllib.request

try:
    import msgpack
    import zmq
except ImportError:
    print("SKIPPED: python3-zmq / python3-msgpack not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish, free_port, serve, stop  # noqa: E402

TOPIC = b"kv@test@random:tiny"


class Subscriber:
    """Collects (seq, payload) from the PUB socket on a thread of its own."""

    def __init__(self, ctx, endpoint):
        self.sock = ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.sock.setsockopt(zmq.RCVTIMEO, 200)
        self.sock.connect(endpoint)
        self.messages = []  # (topic, seq, payload)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                frames = self.sock.recv_multipart()
            except zmq.Again:
                continue
            self.messages.append((frames[0], int.from_bytes(frames[1], "big"), frames[2], len(frames)))

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close(0)


def apply(index, payload, block_size, stats):
    """Applies one batch to a set of block keys; returns False on an inconsistency."""
    batch = msgpack.unpackb(payload, raw=False)
    ok = isinstance(batch, list) and len(batch) == 3 and isinstance(batch[0], float) and batch[2] == 0
    for ev in batch[1]:
        tag = ev[0]
        if tag == "BlockStored":
            keys, parent, tokens, bs = ev[1], ev[2], ev[3], ev[4]
            ok &= bs == block_size and len(tokens) == len(keys) * bs and len(ev) == 8
            ok &= parent is None or parent in index
            for k in keys:
                ok &= k not in index
                index.add(k)
            stats["stored"] += len(keys)
        elif tag == "BlockRemoved":
            for k in ev[1]:
                ok &= k in index
                index.discard(k)
            stats["removed"] += len(ev[1])
        elif tag == "AllBlocksCleared":
            index.clear()
        else:
            ok = False
    return ok


def replay(ctx, endpoint, start):
    """All buffered batches from `start` through a DEALER: [(seq, payload)]."""
    d = ctx.socket(zmq.DEALER)
    d.setsockopt(zmq.RCVTIMEO, 5000)
    d.connect(endpoint)
    d.send_multipart([b"", start.to_bytes(8, "big")])
    out = []
    try:
        while True:
            frames = d.recv_multipart()  # ["", topic, seq, payload]
            if not frames[-1]:
                break
            out.append((frames[1], int.from_bytes(frames[2], "big"), frames[3]))
    finally:
        d.close(0)
    return out


def check_hybrid(binary):
    """The SSM extension on the hybrid default model (Gated DeltaNet states): checkpoints announced as Marconi places
    and evicts them (6 slots), mirrored exactly, next to its KV blocks."""
    import os
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "kjv-qwen35.gguf")
    events_port = free_port(2)
    endpoint = "tcp://127.0.0.1:%d" % events_port
    proc, base = serve(binary, ["--model", model, "--checkpoint-slots", "6", "--kv-events", endpoint,
                                "--kv-events-ssm-checkpoints"], free_port())
    ctx = zmq.Context()
    sub = Subscriber(ctx, endpoint)
    sub.sock.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        time.sleep(0.5)
        rng = random.Random(3)
        words = ["go", "speak", "unto", "the", "people", "of", "Israel"]
        for _ in range(30):
            prompt = "And the LORD said unto Moses, " + " ".join(rng.choice(words) for _ in range(rng.randrange(3, 30)))
            body = json.dumps({"prompt": prompt, "max_tokens": 6, "temperature": 0}).encode()
            urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", data=body,
                                                          headers={"Content-Type": "application/json"}), timeout=60).read()
        time.sleep(1.0)
        states, blocks, kinds, ok = set(), set(), {}, True
        for _, _, payload, _ in sub.messages:
            for ev in msgpack.unpackb(payload, raw=False)[1]:
                kinds[ev[0]] = kinds.get(ev[0], 0) + 1
                if ev[0] == "SsmCheckpointStored":
                    ok &= ev[1] not in states and len(ev) == 4 and ev[2] > 0
                    states.add(ev[1])
                elif ev[0] == "SsmCheckpointRemoved":
                    ok &= ev[1] in states
                    states.discard(ev[1])
                elif ev[0] == "BlockStored":
                    blocks.update(ev[1])
                elif ev[0] == "BlockRemoved":
                    blocks.difference_update(ev[1])
        snap = json.loads(urllib.request.urlopen(base + "/kv_cache/blocks").read())
        check(ok and kinds.get("SsmCheckpointRemoved", 0) > 0, "hybrid: checkpoint events consistent, evictions seen (%s)" % kinds)
        check(states == set(snap.get("ssm_checkpoints", [])) and 0 < len(states) <= 6,
              "hybrid: checkpoints mirrored from events equal the server's (%d)" % len(states))
        check(blocks == set(snap["block_hashes"]), "hybrid: its KV blocks too (%d)" % len(blocks))
    finally:
        sub.close()
        ctx.term()
        stop(proc)


def check_tier(binary, remote=None):
    """With a disk tier under the pool (--cache-dir), each stored or removed block names its medium: "cpu" events
    mirror the pool's tree exactly; "disk" events announce the blocks handed to the tier, each once, each after its
    parent, before the pool lets them go. remote: a Redis URL stacked under the disk (--cache-remote): "remote"
    events the same way."""
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix="radixlm_events_tier_")
    endpoint = "tcp://127.0.0.1:%d" % free_port(2)
    media_wanted = {"cpu", "disk"} | ({"remote"} if remote else set())
    proc, base = serve(binary, ["--model", "random:tiny", "--kv-tokens", "640", "--kv-events", endpoint,
                                "--cache-dir", folder, "--cache-disk-gb", "1"] + (["--cache-remote", remote] if remote else []),
                       free_port())
    ctx = zmq.Context()
    sub = Subscriber(ctx, endpoint)
    sub.sock.setsockopt(zmq.SUBSCRIBE, b"")
    try:
        time.sleep(0.5)
        rng = random.Random(11)
        systems = [[rng.randrange(1, 200) for _ in range(rng.randrange(40, 90))] for _ in range(4)]
        for i in range(40):
            prompt = systems[i % 4] + [rng.randrange(1, 200) for _ in range(rng.randrange(1, 40))]
            body = json.dumps({"prompt": prompt, "max_tokens": 6, "temperature": 0}).encode()
            urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", data=body,
                                                          headers={"Content-Type": "application/json"}), timeout=60).read()
        time.sleep(1.0)
        index = {m: set() for m in media_wanted}
        ok, media, ever_cpu = True, {}, set()
        for _, _, payload, _ in sub.messages:
            for ev in msgpack.unpackb(payload, raw=False)[1]:
                if ev[0] not in ("BlockStored", "BlockRemoved"):
                    continue
                medium = ev[6] if ev[0] == "BlockStored" else ev[2]
                media[(ev[0], medium)] = media.get((ev[0], medium), 0) + len(ev[1])
                held = index.setdefault(medium, set())
                if ev[0] == "BlockStored":
                    ok &= ev[2] is None or ev[2] in held
                    ok &= all(k not in held for k in ev[1])
                    held.update(ev[1])
                    if medium == "cpu":
                        ever_cpu.update(ev[1])
                else:
                    ok &= all(k in held for k in ev[1])
                    held.difference_update(ev[1])
        snap = set(json.loads(urllib.request.urlopen(base + "/kv_cache/blocks").read())["block_hashes"])
        check(set(index) == media_wanted and ok, "tier: every block event names its medium, consistently (%s)" % media)
        check(index["cpu"] == snap, "tier: the cpu events mirror the pool's tree (%d blocks)" % len(snap))
        for m in sorted(media_wanted - {"cpu"}):
            check(media.get(("BlockRemoved", "cpu"), 0) > 0 and ever_cpu <= index[m],
                  "tier: the pool evicted blocks; every block the pool held was written through to %s (%d)" % (m, len(index[m])))
    finally:
        sub.close()
        ctx.term()
        stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


def check_remote_tier(binary):
    """check_tier with a Redis of the test's own under the disk (skipped where redis-server is not installed)."""
    import shutil
    import subprocess
    import tempfile
    if shutil.which("redis-server") is None:
        print("skip: redis-server not installed: no remote-medium events checked")
        return
    folder = tempfile.mkdtemp(prefix="radixlm_events_redis_")
    sock = os.path.join(folder, "redis.sock")
    redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.02)
        check_tier(binary, "unix://" + sock)
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(folder, ignore_errors=True)


def main():
    binary = sys.argv[1]
    events_port = free_port(2)
    endpoint, replay_endpoint = "tcp://127.0.0.1:%d" % events_port, "tcp://127.0.0.1:%d" % (events_port + 1)
    # 640 KV tokens = 40 blocks of 16: the workload below does not fit, so blocks are evicted.
    proc, base = serve(binary, ["--model", "random:tiny", "--kv-tokens", "640", "--kv-events", endpoint,
                                "--kv-events-topic", TOPIC.decode()], free_port())
    ctx = zmq.Context()
    subs = []
    try:
        info = json.loads(urllib.request.urlopen(base + "/server_info").read())
        check(info["kv_events"] and info["kv_events"]["endpoint"] == endpoint and
              info["kv_events"]["replay_endpoint"] == replay_endpoint, "/server_info announces the events and replay endpoints")
        block_size = info["block_size"]
        early = Subscriber(ctx, endpoint)
        subs.append(early)
        time.sleep(0.5)  # the slow joiner: let the subscription reach the publisher
        rng = random.Random(7)
        systems = [[rng.randrange(1, 200) for _ in range(rng.randrange(20, 70))] for _ in range(4)]

        def request(i):
            prompt = systems[i % 4] + [rng.randrange(1, 200) for _ in range(rng.randrange(1, 40))]
            body = json.dumps({"prompt": prompt, "max_tokens": 8, "temperature": 0}).encode()
            req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status

        late = None
        statuses = []
        for i in range(60):
            if i == 30:
                late = Subscriber(ctx, endpoint)  # joins halfway: misses batches 0..k
                subs.append(late)
                time.sleep(0.3)
            # pairs of concurrent requests, so that steps hold several sequences
            threads = [threading.Thread(target=lambda j=j: statuses.append(request(j))) for j in (2 * i, 2 * i + 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
        check(statuses.count(200) == 120, "120 completions answered (%d)" % statuses.count(200))
        time.sleep(1.0)  # the last batches reach the subscribers
        server_keys = set(json.loads(urllib.request.urlopen(base + "/kv_cache/blocks").read())["block_hashes"])

        # The early subscriber: everything from seq 0, in order, no gaps.
        msgs = early.messages
        seqs = [m[1] for m in msgs]
        check(len(msgs) > 10 and seqs == list(range(len(msgs))), "sequence numbers 0..%d without gaps" % (len(msgs) - 1))
        check(all(m[0] == TOPIC and m[3] == 3 for m in msgs), "every message is [topic, seq, payload]")
        index, stats = set(), {"stored": 0, "removed": 0}
        consistent = all(apply(index, m[2], block_size, stats) for m in msgs)
        check(consistent, "every event is consistent (stored once, removed only if held, parents held, block_size tokens)")
        check(stats["removed"] > 0, "the small pool evicted blocks (%d stored, %d removed)" % (stats["stored"], stats["removed"]))
        check(index == server_keys and len(index) > 0,
              "the index rebuilt from events equals the server's tree (%d vs %d blocks)" % (len(index), len(server_keys)))

        # The late subscriber: a gap at the start, filled by replay from 0.
        live = late.messages
        first = live[0][1] if live else -1
        check(first > 0, "the late subscriber missed the first %d batches" % first)
        replayed = replay(ctx, replay_endpoint, 0)
        check([r[1] for r in replayed] == list(range(len(replayed))) and len(replayed) == len(msgs),
              "replay from 0 returns every batch in order (%d)" % len(replayed))
        by_seq = {m[1]: m[2] for m in msgs}
        check(all(by_seq.get(s) == p for _, s, p in replayed) and all(t == TOPIC for t, _, _ in replayed),
              "replayed payloads are the live bytes, with the topic")
        merged = {s: p for _, s, p in replayed if s < first}
        merged.update({m[1]: m[2] for m in live})
        index2, stats2 = set(), {"stored": 0, "removed": 0}
        ok2 = all(apply(index2, merged[s], block_size, stats2) for s in sorted(merged))
        check(ok2 and sorted(merged) == list(range(len(merged))) and index2 == server_keys,
              "late subscriber + replay reaches the same index as the server's tree")
        tail = replay(ctx, replay_endpoint, len(msgs) - 2)
        check([r[1] for r in tail] == [len(msgs) - 2, len(msgs) - 1], "replay from a sequence number returns only what follows")
        check(replay(ctx, replay_endpoint, len(msgs) + 100) == [], "replay past the newest returns just the end marker")
    finally:
        for s in subs:
            s.close()
        ctx.term()
        stop(proc)
    check_hybrid(binary)
    check_tier(binary)
    check_remote_tier(binary)
    finish()


if __name__ == "__main__":
    main()
