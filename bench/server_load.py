#!/usr/bin/env python3
"""An independent load generator for `g4 serve` (Python standard library only).

The same measurement as bench/server_load.mjs, for machines with Python but
no Node.js (the GPU host): N concurrent clients each stream R chat
completions through the OpenAI endpoint over raw HTTP/1.1 sockets,
timestamping every SSE chunk, and one JSON line reports time to first token,
inter-token latency (p50/p99 of the gaps between content chunks), aggregate
completion tokens/s over the whole run (prefills included), and the decode
speed while (nearly) all streams decode at once.

  python3 bench/server_load.py --url http://127.0.0.1:8080 --streams 16 \
      --requests 1 --max-tokens 128 --prompt-words 24 [--ban 1,6] [--same-prompt]
"""
import argparse
import asyncio
import json
import time
import urllib.parse

WORDS = ["river", "stone", "garden", "engine", "window", "letter", "market", "signal", "forest", "bridge",
         "paper", "number", "winter", "circle", "planet", "silver", "coffee", "museum", "station", "harbor"]


def make_prompt(seed, n_words):
    x = seed * 2654435761 % 4294967296
    out = []
    for _ in range(n_words):
        x = (x * 1103515245 + 12345) % 2147483648
        out.append(WORDS[x % len(WORDS)])
    return "Write about: " + " ".join(out)


def quantile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def read_chunked_events(reader):
    """Yields SSE event texts from a chunked (or close-delimited) HTTP body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    chunked = b"transfer-encoding: chunked" in head.lower()
    if status != 200:
        body = await reader.read(65536)
        raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
    buf = b""
    while True:
        if chunked:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.strip().split(b";")[0], 16)
            if size == 0:
                break
            data = await reader.readexactly(size + 2)
            buf += data[:-2]
        else:
            data = await reader.read(65536)
            if not data:
                break
            buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            yield event.decode("utf-8", "replace")


async def one(url, body):
    u = urllib.parse.urlsplit(url)
    payload = json.dumps(body).encode()
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: " + u.netloc.encode() +
        b"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
        str(len(payload)).encode() + b"\r\n\r\n" + payload)
    await writer.drain()
    first = last = 0.0
    tokens = cached = 0
    gaps, times = [], []
    async for event in read_chunked_events(reader):
        if not event.startswith("data: ") or event == "data: [DONE]":
            continue
        chunk = json.loads(event[6:])
        usage = chunk.get("usage")
        if usage:
            tokens = usage.get("completion_tokens", 0)
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        choices = chunk.get("choices") or []
        if choices and (choices[0].get("delta") or {}).get("content"):
            now = time.perf_counter()
            if not first:
                first = now
            else:
                gaps.append((now - last) * 1000)
            last = now
            times.append(now)
    writer.close()
    return {"ttft": (first - t0) * 1000, "gaps": gaps, "times": times, "tokens": tokens, "cached": cached,
            "seconds": time.perf_counter() - t0}


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--requests", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-words", type=int, default=24)
    ap.add_argument("--ban", default="")
    ap.add_argument("--same-prompt", action="store_true")
    a = ap.parse_args()
    ban = [b for b in a.ban.split(",") if b]
    results = []

    async def client(s):
        for r in range(a.requests):
            seed = 0 if a.same_prompt else s * 1000 + r + 1
            body = {"model": "g4", "stream": True, "stream_options": {"include_usage": True},
                    "max_tokens": a.max_tokens, "temperature": 0,
                    "messages": [{"role": "user", "content": make_prompt(seed, a.prompt_words)}]}
            if ban:
                body["logit_bias"] = {b: -100 for b in ban}
            results.append(await one(a.url, body))

    started = time.perf_counter()
    await asyncio.gather(*(client(s) for s in range(a.streams)))
    wall = time.perf_counter() - started

    def steady():
        # From when 90% of the streams have their first token to when 10%
        # have finished: (nearly) all of them decode in that window.
        if a.requests != 1 or any(not r["times"] for r in results):
            return None
        firsts = sorted(r["times"][0] for r in results)
        lasts = sorted(r["times"][-1] for r in results)
        lo, hi = quantile(firsts, 0.9), quantile(lasts, 0.1)
        if not hi > lo:
            return None
        n = sum(1 for r in results for t in r["times"] if lo < t <= hi)
        return round(n / (hi - lo), 1)

    ttft = sorted(r["ttft"] for r in results)
    gaps = sorted(g for r in results for g in r["gaps"])
    tokens = sum(r["tokens"] for r in results)
    print(json.dumps({
        "streams": a.streams, "requests": len(results), "max_tokens": a.max_tokens, "completion_tokens": tokens,
        "wall_s": round(wall, 3), "aggregate_tok_s": round(tokens / wall, 1),
        "per_stream_tok_s": round(sum(r["tokens"] / r["seconds"] for r in results) / len(results), 1),
        "decode_tok_s": steady(),
        "ttft_ms": {"p50": round(quantile(ttft, 0.5), 1), "p99": round(quantile(ttft, 0.99), 1)},
        "itl_ms": {"p50": round(quantile(gaps, 0.5), 2), "p99": round(quantile(gaps, 0.99), 2)},
        "cached_tokens": sum(r["cached"] for r in results),
        "client": "python"}))


if __name__ == "__main__":
    asyncio.run(main())
