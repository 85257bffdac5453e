#!/usr/bin/env python3
"""The disk tier under the KV pool, end to end (`radixlm serve --cache-dir D`), on random:tiny
with a pool small enough that prefixes leave it (greedy decoding; answers compared bitwise,
tokens and log-probabilities, with a server that caches nothing):

  1. served through the tier (pool hits, disk hits, evictions): every answer equals the plain one;
  2. restart after SIGTERM: the first request on a known prefix is a hit from disk (cached_tokens
     = its full blocks), the same answer;
  3. kill -9 in the middle of a flood of writes, then restart: no leftover temporary files, the
     answers unchanged;
  4. fault injection: block files corrupted (a flipped byte), truncated, emptied, deleted, swapped
     with another block's, junk files: every answer unchanged, the bad files dropped, counted and
     rewritten with the recomputed blocks;
  5. another model (qwen2-tiny) and another quant of the same one (--dtype f32) on the same folder:
     no disk hits, a folder of their own;
  6. two servers at once on one folder: the second one's first request on the first one's prefix
     is a disk hit;
  7. attach: 8 identical prompts 10 ms apart compute the prefix about once;
  8. a hybrid (Gated DeltaNet) model: its recurrent states go to disk too; after a restart a repeated
     prompt resumes from one;
  9. a sliding-window model with window rings (gemma3-tiny, --swa-cache window): the same, with
     windows as the states.

Usage: tier_test.py RADIXLM_BINARY
"""
import glob
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish, free_port, metric, serve, stop  # noqa: E402

BS = 16


def complete(base, prompt, max_tokens=6):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "return_token_ids": True, "logprobs": 3}
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        out = json.loads(r.read())
    c = out["choices"][0]
    answer = (c.get("token_ids"), c["text"], c["logprobs"]["token_logprobs"], c["logprobs"]["top_logprobs"])
    return answer, out["usage"]["prompt_tokens_details"]["cached_tokens"]


def tier_metric(base, name, medium="disk"):
    return metric(base, '%s{medium="%s"}' % (name, medium))


def files(folder, pattern):
    return glob.glob(os.path.join(folder, "v1", "*", pattern), recursive=True)


def main():
    binary = sys.argv[1]
    rng = random.Random(29)
    tok = lambda n: [rng.randrange(1000, 150000) for _ in range(n)]  # noqa: E731
    system = tok(700)
    prompts = [system + tok(rng.randrange(20, 200)) for _ in range(6)] + [tok(rng.randrange(300, 900)) for _ in range(6)]
    work = tempfile.mkdtemp(prefix="radixlm_tier_")
    folder = os.path.join(work, "cache")
    common = ["-m", "random:tiny", "--kv-tokens", "2048", "--block-tokens", str(BS), "--threads", "2"]
    tiered = common + ["--cache-dir", folder, "--cache-disk-gb", "1"]
    plain, pbase = serve(binary, ["-m", "random:tiny", "--kv-tokens", "4096", "--no-prefix-cache"], free_port())
    try:
        want = [complete(pbase, p)[0] for p in prompts]

        # 1. Through the tier: pool hits, disk hits and evictions, the same answers.
        proc, base = serve(binary, tiered, free_port())
        got = [complete(base, p)[0] for p in prompts] + [complete(base, p)[0] for p in prompts]
        check(got == want + want, "1. answers through the pool and the disk tier equal the plain server's")
        check(tier_metric(base, "radixlm_cache_tier_hit_tokens_total") > 0, "1. some hits came from disk")
        check(metric(base, "radixlm_cache_evicted_tokens_total") > 0, "1. the pool evicted prefixes")
        stop(proc)
        check(proc.returncode == 0, "1. SIGTERM exits cleanly")
        check(not files(folder, "tmp/*"), "1. no temporary files after SIGTERM")
        held = len(files(folder, "kv/*/*.kv"))
        check(held > 0, "1. block files on disk (%d)" % held)

        # 2. Restart: the first request on a known prefix is a disk hit.
        proc, base = serve(binary, tiered, free_port())
        answer, cached = complete(base, prompts[0])
        full = (len(prompts[0]) - 1) // BS * BS
        check(cached == full, "2. after a restart the first request hits disk: cached_tokens %d of %d" % (cached, full))
        check(answer == want[0], "2. ... with the same answer")
        check(metric(base, "radixlm_computed_tokens_total") <= len(prompts[0]) - full + 6,
              "2. ... computing only the tail and the output")
        info = json.loads(urllib.request.urlopen(base + "/server_info").read())
        media = [t["medium"] for t in info["cache_tiers"]]
        check(media == ["cpu", "disk"], "2. /server_info cache_tiers: %s" % media)

        # 3. kill -9 in the middle of a flood of writes.
        flood = [tok(rng.randrange(600, 1500)) for _ in range(8)]
        flood_want = [complete(pbase, p)[0] for p in flood]
        threads = [threading.Thread(target=lambda p=p: _swallow(lambda: complete(base, p))) for p in flood]
        for t in threads:
            t.start()
        time.sleep(0.4 + rng.random() * 0.4)
        proc.kill()
        proc.wait()
        for t in threads:
            t.join()
        proc, base = serve(binary, tiered, free_port())
        check(not files(folder, "tmp/*"), "3. a killed writer's temporary files are gone at the next start")
        check([complete(base, p)[0] for p in flood] == flood_want, "3. after kill -9, the answers are unchanged")
        check([complete(base, p)[0] for p in prompts] == want, "3. ... for the earlier prompts too")
        stop(proc)

        # 4. Fault injection on the block files.
        blocks = sorted(files(folder, "kv/*/*.kv"))
        rng.shuffle(blocks)
        flipped, truncated, emptied, deleted, swapped = blocks[0:4], blocks[4:6], blocks[6:7], blocks[7:10], blocks[10:12]
        for f in flipped:
            with open(f, "r+b") as fh:
                fh.seek(rng.randrange(0, os.path.getsize(f)))
                b = fh.read(1)
                fh.seek(-1, 1)
                fh.write(bytes([b[0] ^ (1 << rng.randrange(8))]))
        for f in truncated:
            os.truncate(f, os.path.getsize(f) // 2)
        for f in emptied:
            open(f, "wb").close()
        for f in deleted:
            os.unlink(f)
        shutil.copyfile(swapped[0], swapped[1])  # another block's file under this name
        damaged = {f: open(f, "rb").read() for f in flipped + truncated + emptied + swapped[1:]}
        kvdir = os.path.dirname(blocks[20])
        with open(os.path.join(kvdir, "junk.kv"), "wb") as fh:
            fh.write(b"not a block")
        with open(os.path.join(kvdir, "0" * 64 + ".kv"), "wb") as fh:
            fh.write(os.urandom(5000))
        proc, base = serve(binary, tiered, free_port())
        check(proc.poll() is None, "4. starts on a damaged folder")
        ok = all(complete(base, p)[0] == w for p, w in zip(prompts + flood, want + flood_want))
        ok = ok and all(complete(base, p)[0] == w for p, w in zip(prompts + flood, want + flood_want))
        check(ok, "4. with corrupted, truncated, emptied, deleted and swapped block files every answer is unchanged")
        failures = tier_metric(base, "radixlm_cache_tier_load_failures_total")
        check(failures >= 1, "4. failed loads are counted (%d) and recomputed" % failures)
        # A damaged block is deleted when a load reaches it, then written again from the recompute.
        left = [f for f, b in damaged.items() if os.path.exists(f) and open(f, "rb").read() == b]
        check(len(left) < len(damaged) and failures >= len(damaged) - len(left),
              "4. damaged files reached by a load are replaced by good ones (%d of %d still damaged: never reached)" %
              (len(left), len(damaged)))
        stop(proc)

        # 5. Another model, another quant of the same model: nothing shared.
        for other in (["-m", "random:qwen2-tiny"], ["-m", "random:tiny", "--dtype", "bf16"], ["-m", "random:tiny", "--kv-dtype", "f32"]):
            args = other + ["--kv-tokens", "2048", "--cache-dir", folder, "--cache-disk-gb", "1"]
            proc, base = serve(binary, args, free_port())
            _, cached = complete(base, prompts[1])
            check(cached == 0, "5. %s on the same folder: no hit (%d cached)" % (" ".join(other), cached))
            stop(proc)
        check(len(glob.glob(os.path.join(folder, "v1", "*"))) == 4, "5. each fingerprint has its own folder")

        # 6. Two servers at once on one folder.
        p1, b1 = serve(binary, tiered, free_port())
        p2, b2 = serve(binary, tiered, free_port())
        fresh = tok(900)
        first = complete(b1, fresh)[0]
        deadline = time.time() + 20
        while time.time() < deadline and tier_metric(b1, "radixlm_cache_tier_blocks") < 1:
            time.sleep(0.1)
        time.sleep(0.5)  # the writer publishes behind the step loop
        answer, cached = complete(b2, fresh)
        check(cached == (len(fresh) - 1) // BS * BS, "6. the second server's first request hits the first's blocks (%d)" % cached)
        check(answer == first == complete(pbase, fresh)[0], "6. ... with the same answer")
        stop(p1)
        stop(p2)

        # 7. Attach: 8 identical prompts 10 ms apart compute the prefix about once.
        proc, base = serve(binary, common[:2] + ["--kv-tokens", "32768", "--step-tokens", "256"], free_port())
        long_prompt = tok(3000)
        answers = []
        threads = []
        for i in range(8):
            threads.append(threading.Thread(target=lambda: answers.append(complete(base, long_prompt, max_tokens=4)[0])))
            threads[-1].start()
            time.sleep(0.01)
        for t in threads:
            t.join()
        computed = metric(base, "radixlm_computed_tokens_total") - metric(base, "radixlm_deduplicated_tokens_total")
        bound = 1.3 * len(long_prompt) + 8 * 4 + 8 * BS
        check(computed < bound, "7. 8 identical prompts 10 ms apart: %d tokens computed (< %d; one prompt is %d)" %
              (computed, bound, len(long_prompt)))
        check(len(set(json.dumps(a) for a in answers)) == 1, "7. ... and the same answer for all")
        stop(proc)

        # 8. A hybrid (Gated DeltaNet + attention): its states go to disk with their blocks; after a
        # restart a repeated prompt resumes from the state at its end.
        states_survive_restart(binary, work, system, tok, rng, "8. hybrid", "recurrent states",
                               ["-m", "random:qwen35-tiny", "--kv-tokens", "4096", "--block-tokens", str(BS)])
        # 9. A sliding-window model served with window rings (Gemma 3's layout, a 32-token
        # window): the windows go to disk as states, the same way.
        states_survive_restart(binary, work, system, tok, rng, "9. window rings", "windows",
                               ["-m", "random:gemma3-tiny", "--kv-tokens", "4096", "--block-tokens", str(BS),
                                "--swa-cache", "window"])
    finally:
        stop(plain)
        shutil.rmtree(work, ignore_errors=True)
    finish()


def states_survive_restart(binary, work, system, tok, rng, label, what, model_args):
    """A model whose sequences carry states, served through the tier: the plain answers, states
    on disk, and after a restart a repeated prompt resumes from disk with the plain answer."""
    plain, pbase = serve(binary, model_args + ["--no-prefix-cache"], free_port())
    prompts = [system[:400] + tok(rng.randrange(30, 120)) for _ in range(3)]
    want = [complete(pbase, p)[0] for p in prompts]
    stop(plain)
    folder = os.path.join(work, label.split()[0].strip("."))
    tiered = model_args + ["--cache-dir", folder, "--cache-disk-gb", "1"]
    proc, base = serve(binary, tiered, free_port())
    check([complete(base, p)[0] for p in prompts] == want, label + " through the tier: the plain answers")
    stop(proc)
    on_disk = len(files(folder, "ssm/*/*.st"))
    check(on_disk > 0, "%s: %s on disk (%d)" % (label, what, on_disk))
    proc, base = serve(binary, tiered, free_port())
    answer, cached = complete(base, prompts[1])
    check(cached > 0 and answer == want[1],
          "%s after a restart: a repeated prompt resumes from disk (%d of %d cached), same answer" %
          (label, cached, len(prompts[1])))
    stop(proc)


def _swallow(fn):
    try:
        fn()
    except Exception:
        pass


if __name__ == "__main__":
    main()
