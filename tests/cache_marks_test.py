#!/usr/bin/env python3
"""Cache hints beyond the peers (issue 46): an Anthropic cache_control breakpoint, and the
Responses API's prompt_cache_key, mark a prompt the client will send again; the prefix cache
keeps marked prefixes ahead of unmarked ones (cache/radix_tree.h Mark), within half the pool.

Against `radixlm serve -m random:tiny` with a small pool (2,048 tokens = 128 blocks):
- a marked prompt (~350 tokens) survives a flood of 10 unmarked ~1,050-token prompts that each
  need most of the pool: sent again, it is a full hit (cache_read_input_tokens);
- the same flood after an unmarked prompt of the same size evicts it (the control: without the
  mark this test would fail);
- the marked prompt's answer after the flood is bitwise the answer of a server without the
  prefix cache (temperature 0 and seeded sampling);
- a Responses request with prompt_cache_key is marked the same way.

Usage: cache_marks_test.py RADIXLM
"""
import json
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_test import check, post, serving, verdict  # noqa: E402

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def text(seed, words):
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] + str((seed + i) % 10) for i in range(words))


def message(base, system, marked):
    """A greedy Messages request with `system` as a text block, marked with cache_control or not."""
    block = {"type": "text", "text": system}
    if marked:
        block["cache_control"] = {"type": "ephemeral"}
    body = {"model": "m", "max_tokens": 8, "system": [block], "temperature": 0.0,
            "messages": [{"role": "user", "content": "Hello?"}]}
    status, out = post(base, "/v1/messages", body, headers={"anthropic-version": "2023-06-01"})
    return status, json.loads(out)


def chat_body(system):
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hello?"}], "max_tokens": 12,
            "temperature": 1.0, "seed": 3, "logprobs": True, "top_logprobs": 3}


def flood(base, n, words):
    for i in range(n):
        status, r = message(base, "Flood %d: " % i + text(100 + i, words), marked=False)
        if status != 200:
            check(False, "flood request answered (%s)" % r)
            return


SERVE = ["-m", "random:tiny", "--kv-tokens", "2048"]


def main():
    binary = sys.argv[1]
    system = "You are the marked system prompt. " + text(1, 150)
    with serving(binary, SERVE) as base:
        status, first = message(base, system, marked=True)
        check(status == 200, "a marked request is answered")
        total = first["usage"]["input_tokens"] + first["usage"]["cache_read_input_tokens"] + \
            first["usage"]["cache_creation_input_tokens"]
        check(first["usage"]["cache_creation_input_tokens"] > 0,
              "usage counts the marked prompt's computed tokens as cache creation (%s)" % first["usage"])
        flood(base, 10, 450)
        status, again = message(base, system, marked=True)
        read = again["usage"]["cache_read_input_tokens"]
        check(status == 200 and read >= total - 1,
              "after a flood of 10 unmarked prompts the marked one is a full hit (%d of %d tokens)" % (read, total))

        # The control: the same flood evicts an unmarked prompt of the same size.
        other = "You are an unmarked system prompt. " + text(2, 150)
        message(base, other, marked=False)
        flood(base, 10, 450)
        status, unmarked = message(base, other, marked=False)
        missed = unmarked["usage"]["cache_read_input_tokens"]
        check(missed < total // 2, "the control: an unmarked prompt is evicted by the same flood (%d of %d tokens hit)" %
              (missed, total))

        # prompt_cache_key (Responses) marks the same way.
        instructions = "You are the keyed instructions. " + text(3, 150)
        body = {"model": "m", "instructions": instructions, "input": "Hello?", "max_output_tokens": 16,
                "temperature": 0, "prompt_cache_key": "session-1", "store": False}
        status, out = post(base, "/v1/responses", body)
        r1 = json.loads(out)
        check(status == 200, "a Responses request with prompt_cache_key is answered")
        flood(base, 10, 450)
        status, out = post(base, "/v1/responses", body)
        r2 = json.loads(out)
        cached = r2["usage"]["input_tokens_details"]["cached_tokens"]
        check(cached >= r1["usage"]["input_tokens"] - 1,
              "prompt_cache_key: a full hit after the flood (%d of %d tokens)" % (cached, r1["usage"]["input_tokens"]))
        answer_after_flood = again["content"]
        # The same conversation as a chat completion renders to the same tokens: its logprobs,
        # under seeded sampling, are compared with the plain server's below.
        status, out = post(base, "/v1/chat/completions", chat_body(system))
        chat_after_flood = json.loads(out)
        check(chat_after_flood["usage"]["prompt_tokens_details"]["cached_tokens"] >= total - 1,
              "the chat form of the marked conversation hits the marked prefix (%d tokens)" %
              chat_after_flood["usage"]["prompt_tokens_details"]["cached_tokens"])

    with serving(binary, SERVE + ["--no-prefix-cache"]) as base:
        status, plain_answer = message(base, system, marked=True)
        check(status == 200 and plain_answer["usage"]["cache_read_input_tokens"] == 0, "the plain server computes everything")
        status, out = post(base, "/v1/chat/completions", chat_body(system))
        plain_chat = json.loads(out)["choices"][0]
        check(plain_chat["logprobs"] == chat_after_flood["choices"][0]["logprobs"] and
              plain_chat["message"]["content"] == chat_after_flood["choices"][0]["message"]["content"],
              "seeded sampling with logprobs: bitwise the plain server's (%s)" % json.dumps(plain_chat["message"]["content"])[:60])
        check(plain_answer["content"] == answer_after_flood,
              "the marked prompt's answer after the flood is bitwise the plain server's (%s)" %
              json.dumps(answer_after_flood)[:80])
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
