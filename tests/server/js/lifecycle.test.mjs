// g4 serve's lifecycle, on the real binary: SIGTERM stops accepting, lets a
// running stream finish, flushes the prefix cache to disk and exits 0; the
// disk tier serves the next process; kill -9 while the disk tier is being
// written never leaves an entry that is served corrupt; slow and half-open
// clients time out without holding up the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { readdirSync } from "node:fs";
import OpenAI from "openai";
import { startServer, metric, tempDir, eventually } from "./lib/server.mjs";

const ask = (content, max_tokens = 16) => ({ model: "demo", messages: [{ role: "user", content }], max_tokens, temperature: 0 });
const clientFor = (s) => new OpenAI({ baseURL: s.url + "/v1", apiKey: "x", maxRetries: 0 });

test("SIGTERM drains: the running stream finishes, new requests are refused, the disk tier is flushed", async () => {
  const dir = tempDir();
  const s = await startServer(["--kv-cache-dir", dir, "--grace", "30"]);
  const client = clientFor(s);
  const first = await client.chat.completions.create(ask("What is a Python dictionary?", 12));
  // End-of-text ids banned: the answer runs to max_tokens.
  const stream = await client.chat.completions.create({ ...ask("Tell me a long story about a dragon.", 150), stream: true,
                                                        logit_bias: { 1: -100, 6: -100 } });
  let text = "", finish = null, n = 0, signalled = false;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (++n === 3 && !signalled) {
      signalled = true;
      s.proc.kill("SIGTERM");
      // The listening socket closes at once.
      assert.ok(await eventually(async () => {
        try { await fetch(s.url + "/health"); return false; } catch { return true; }
      }, 10), "still accepting after SIGTERM");
    }
  }
  assert.equal(finish, "length", "the stream ran to its end");
  const { code } = await s.exited;
  assert.equal(code, 0, s.stderr());
  assert.match(s.stderr(), /entries on disk/);
  assert.ok(readdirSync(dir).some((f) => f.endsWith(".g4kv")), "flushed to disk");

  // The next process reuses the prefixes from disk, with the same text.
  const t = await startServer(["--kv-cache-dir", dir]);
  const again = await clientFor(t).chat.completions.create(ask("What is a Python dictionary?", 12));
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(again.usage));
  assert.ok((await metric(t.url, "g4_prefix_cache_disk_loads_total")) >= 1);
  assert.equal((await t.stop()).code, 0);
});

test("kill -9 during disk-tier writes never leaves an entry that is served corrupt", async () => {
  const dir = tempDir();
  const prompts = ["What is a Python dictionary?", "Name a sorting algorithm.", "How do I read a file?",
                   "Explain recursion briefly.", "What does a compiler do?", "Why is the sky blue?"];
  // Reference answers from a server without any cache.
  const ref = await startServer(["--prefix-cache", "0"]);
  const want = [];
  for (const p of prompts) want.push((await clientFor(ref).chat.completions.create(ask(p))).choices[0].message.content);
  await ref.stop();
  // A cache too small for more than an entry or two: every request evicts,
  // i.e. writes to disk. Kill the process at varying moments.
  for (let round = 0; round < 4; round++) {
    const s = await startServer(["--kv-cache-dir", dir, "--prefix-cache", "40K"]);
    const client = clientFor(s);
    const inflight = prompts.map((p) => client.chat.completions.create(ask(p)).catch(() => null));
    await new Promise((r) => setTimeout(r, 40 + round * 70));
    s.proc.kill("SIGKILL");
    await s.exited;
    await Promise.all(inflight);
  }
  const s = await startServer(["--kv-cache-dir", dir, "--prefix-cache", "40K"]);
  const client = clientFor(s);
  for (let i = 0; i < prompts.length; i++) {
    const r = await client.chat.completions.create(ask(prompts[i]));
    assert.equal(r.choices[0].message.content, want[i], `prompt ${i} after kill -9 rounds`);
  }
  assert.equal((await s.stop()).code, 0);
  assert.ok(!readdirSync(dir).some((f) => f.includes(".tmp.")), "unfinished writes were cleaned up");
});

test("slow and half-open clients time out and do not hold up others", async () => {
  const s = await startServer(["--timeout", "1", "--http-threads", "4"]);
  // Four connections that send half a request and stall, one per worker thread.
  const sockets = [];
  for (let i = 0; i < 4; i++) {
    const sock = connect(s.port, "127.0.0.1");
    sock.on("error", () => {});
    sock.resume();  // read, so the server's close is seen
    sock.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess");
    sockets.push(sock);
  }
  const closed = sockets.map((sock) => new Promise((r) => sock.on("close", r)));
  const t0 = Date.now();
  await Promise.all(closed);  // the server gave up on them (read timeout, then the keep-alive wait)
  assert.ok(Date.now() - t0 < 15000);
  const r = await clientFor(s).chat.completions.create(ask("Hi", 4));
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal((await fetch(s.url + "/health")).status, 200);
  assert.equal((await s.stop()).code, 0);
});
