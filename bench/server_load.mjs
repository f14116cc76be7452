// An independent load generator for `g4 serve` (Node.js, no dependencies):
// N concurrent clients each stream R chat completions through the OpenAI
// endpoint, timestamping every SSE chunk. Reports time to first token,
// inter-token latency (p50/p99 of the gaps between content chunks), the
// aggregate completion tokens/s over the whole run (prefills included) and
// the decode speed while all streams decode at once (what `g4 bench --batch`
// reports in process; one content chunk is one token here), as one JSON line.
//
//   node bench/server_load.mjs --url http://127.0.0.1:8080 --streams 16 \
//        --requests 2 --max-tokens 128 --prompt-words 24 [--ban 1,6] [--same-prompt]
//
// --ban lists token ids to ban (logit_bias -100) so every answer runs to
// max_tokens (the demo model's end-of-text ids are 1 and 6). Prompts differ
// per request unless --same-prompt (then all but the first hit the prefix
// cache).
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith("--") ? all[i + 1] : "true"]);
    return acc;
  }, []));
const url = args.url || "http://127.0.0.1:8080";
const streams = Number(args.streams || 1);
const requests = Number(args.requests || 1);
const maxTokens = Number(args["max-tokens"] || 128);
const promptWords = Number(args["prompt-words"] || 24);
const ban = (args.ban || "").split(",").filter(Boolean);
const samePrompt = args["same-prompt"] === "true";

const words = ["river", "stone", "garden", "engine", "window", "letter", "market", "signal", "forest", "bridge",
               "paper", "number", "winter", "circle", "planet", "silver", "coffee", "museum", "station", "harbor"];
function prompt(seed) {
  const out = [];
  let x = seed * 2654435761 % 4294967296;
  for (let i = 0; i < promptWords; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push(words[x % words.length]);
  }
  return "Write about: " + out.join(" ");
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function one(seed) {
  const body = {
    model: "g4", stream: true, stream_options: { include_usage: true }, max_tokens: maxTokens, temperature: 0,
    messages: [{ role: "user", content: prompt(samePrompt ? 0 : seed) }],
  };
  if (ban.length) body.logit_bias = Object.fromEntries(ban.map((id) => [id, -100]));
  const t0 = performance.now();
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error("HTTP " + res.status + ": " + (await res.text()));
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "", first = 0, last = 0, tokens = 0, cached = 0;
  const gaps = [], times = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const chunk = JSON.parse(line.slice(6));
      if (chunk.usage) {
        tokens = chunk.usage.completion_tokens;
        cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
      const c = chunk.choices[0];
      if (c && c.delta && c.delta.content) {
        const now = performance.now();
        if (!first) first = now;
        else gaps.push(now - last);
        last = now;
        times.push(now);
      }
    }
  }
  return { ttft: first - t0, gaps, times, tokens, cached, seconds: (performance.now() - t0) / 1000 };
}

const started = performance.now();
const results = [];
await Promise.all(Array.from({ length: streams }, async (_, s) => {
  for (let r = 0; r < requests; r++) results.push(await one(s * 1000 + r + 1));
}));
const wall = (performance.now() - started) / 1000;
function steady() {
  // From when 90% of the streams have their first token to when 10% have
  // finished: (nearly) all of them decode in that window.
  if (requests !== 1 || results.some((r) => r.times.length === 0)) return null;
  const firsts = results.map((r) => r.times[0]).sort((a, b) => a - b);
  const lasts = results.map((r) => r.times[r.times.length - 1]).sort((a, b) => a - b);
  const from = quantile(firsts, 0.9), to = quantile(lasts, 0.1);
  if (!(to > from)) return null;
  const n = results.reduce((a, r) => a + r.times.filter((t) => t > from && t <= to).length, 0);
  return +(n / ((to - from) / 1000)).toFixed(1);
}
const ttft = results.map((r) => r.ttft).sort((a, b) => a - b);
const gaps = results.flatMap((r) => r.gaps).sort((a, b) => a - b);
const tokens = results.reduce((a, r) => a + r.tokens, 0);
console.log(JSON.stringify({
  streams, requests: results.length, max_tokens: maxTokens, completion_tokens: tokens,
  wall_s: +wall.toFixed(3),
  aggregate_tok_s: +(tokens / wall).toFixed(1),
  per_stream_tok_s: +(results.reduce((a, r) => a + r.tokens / r.seconds, 0) / results.length).toFixed(1),
  // Decode speed as `g4 bench --batch` counts it: tokens arriving while
  // (nearly) every stream decodes, per second; null when that window is empty.
  decode_tok_s: steady(),
  ttft_ms: { p50: +quantile(ttft, 0.5).toFixed(1), p99: +quantile(ttft, 0.99).toFixed(1) },
  itl_ms: { p50: +quantile(gaps, 0.5).toFixed(2), p99: +quantile(gaps, 0.99).toFixed(2) },
  cached_tokens: results.reduce((a, r) => a + r.cached, 0),
}));
