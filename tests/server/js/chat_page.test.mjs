// The chat page at "/" in headless Chromium (Debian's chromium, driven by
// playwright-core): it loads with no external requests, a typed message
// gets an answer that streams in, Stop ends a long answer (and the server
// cancels it), the conversation survives a reload (localStorage), and the
// settings reach the request. G4_SCREENSHOT=PATH saves a screenshot there.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { startServer, metric, eventually } from "./lib/server.mjs";

const CHROMIUM = process.env.G4_CHROMIUM || "/usr/bin/chromium";
let server, browser;

// The ids that end a chat answer, as the server takes them (engine/
// model_bundle.h ChatStopIds): generation_config's eos ids, else
// config.json's, and <turn|> when the tokenizer has it.
function chatStopIds(dir) {
  const read = (f) => JSON.parse(readFileSync(join(dir, f), "utf8"));
  const gen = existsSync(join(dir, "generation_config.json")) ? read("generation_config.json") : {};
  const eos = gen.eos_token_id ?? read("config.json").eos_token_id ?? [];
  const ids = Array.isArray(eos) ? [...eos] : [eos];
  const turn = read("tokenizer.json").added_tokens.find((t) => t.content === "<turn|>");
  if (turn && !ids.includes(turn.id)) ids.push(turn.id);
  assert.ok(ids.length > 0, "the model names no stop ids");
  return ids;
}

before(async () => {
  server = await startServer(["--model-name", "demo"]);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});
after(async () => {
  if (browser) await browser.close();
  if (server) assert.equal((await server.stop()).code, 0, server.stderr());
});

test("the chat page streams an answer, stops a long one, and keeps the conversation", { skip: !existsSync(CHROMIUM) && "no chromium" }, async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
  const outside = [];
  page.on("request", (r) => { if (!r.url().startsWith(server.url)) outside.push(r.url()); });
  const bodies = [];
  page.on("request", (r) => { if (r.url().endsWith("/v1/chat/completions")) bodies.push(JSON.parse(r.postData())); });
  await page.goto(server.url + "/");
  await assert.doesNotReject(page.waitForSelector("text=demo"));

  // Settings: greedy and a short answer for the first question.
  await page.click("#settings-toggle");
  await page.fill("#temperature", "0");
  await page.fill("#max_tokens", "120");
  await page.click("#settings-toggle");

  // The answer streams in: the page records every length the answer had
  // while it rendered.
  await page.evaluate(() => {
    window.__lengths = new Set();
    new MutationObserver(() => {
      const c = [...document.querySelectorAll(".msg.assistant .content")].pop();
      if (c) window.__lengths.add(c.textContent.length);
    }).observe(document.getElementById("messages"), { childList: true, subtree: true, characterData: true });
  });
  // The browser's download rate is capped while the answer arrives, so that
  // its chunks reach the page in several reads even when the machine is
  // loaded (unthrottled, a busy CI machine once delivered the whole stream
  // in one read: the page rendered it at 2 lengths; at 16 KB/s, about a
  // second for the answer, a machine also compiling did the same once, so
  // the answer now takes several seconds).
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.emulateNetworkConditions",
                 { offline: false, latency: 20, downloadThroughput: 4 * 1024, uploadThroughput: -1 });
  await page.fill("#input", "What is a Python dictionary?");
  await page.press("#input", "Enter");
  const content = page.locator(".msg.assistant .content").last();
  await page.waitForFunction(() => document.querySelector("#stop").hidden && document.querySelector(".msg.assistant .meta"));
  await cdp.send("Network.emulateNetworkConditions",
                 { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  await cdp.send("Network.disable");
  await cdp.detach();
  const answer = await content.textContent();
  const seen = await page.evaluate(() => window.__lengths.size);
  assert.ok(answer.length > 20, answer);
  assert.ok(seen >= 3, `rendered at ${seen} lengths: not streamed`);
  assert.equal(bodies[0].stream, true);
  assert.equal(bodies[0].temperature, 0);
  assert.equal(bodies[0].max_tokens, 120);
  // The same question through the API gives the same text.
  const api = await (await fetch(server.url + "/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "demo", messages: [{ role: "user", content: "What is a Python dictionary?" }], max_tokens: 120, temperature: 0 }) })).json();
  assert.equal(answer, api.choices[0].message.content, JSON.stringify(bodies[0]));

  // The conversation is kept in the browser.
  await page.reload();
  await page.waitForSelector(".msg.assistant");
  assert.equal(await page.locator(".msg").count(), 2);
  assert.equal(await page.locator(".msg.assistant .content").first().textContent(), answer);
  assert.deepEqual(outside, [], "the page fetched something from elsewhere");
  await page.click("#new");
  assert.equal(await page.locator(".msg").count(), 0);

  // A long answer, stopped. How long the demo model's greedy answer runs
  // depends on the CPU's kernels (it ran to max_tokens with the AVX-512
  // ones and ends after 61 tokens with the AVX2 ones), so the request
  // leaves the page with the model's stop tokens banned (logit_bias -100;
  // Gemma's logits are soft-capped at 30): unstopped, it runs to
  // max_tokens. What the server generated for it is counted from here: a
  // loaded machine may take a second or more between the page showing 30
  // characters and the click on Stop (a CI run saw at least 760 tokens).
  const MAX_TOKENS = 8000;
  const banned = Object.fromEntries(chatStopIds(process.env.G4_MODEL).map((id) => [String(id), -100]));
  await page.route("**/v1/chat/completions", (route) =>
    route.continue({ postData: JSON.stringify({ ...JSON.parse(route.request().postData()), logit_bias: banned }) }));
  const generated_before = await metric(server.url, "g4_generation_tokens_total");
  await page.click("#settings-toggle");
  await page.fill("#max_tokens", String(MAX_TOKENS));
  await page.click("#settings-toggle");
  await page.fill("#input", "Tell me a very long story about a dragon.");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => {
    const c = [...document.querySelectorAll(".msg.assistant .content")].pop();
    return c && c.textContent.length > 30;
  });
  if (process.env.G4_SCREENSHOT) await page.screenshot({ path: process.env.G4_SCREENSHOT });
  await page.click("#stop");
  await page.waitForSelector("text=[stopped]");
  assert.ok(await eventually(async () => (await metric(server.url, "g4_running_sequences")) === 0), "the server cancelled it");
  const generated = (await metric(server.url, "g4_generation_tokens_total")) - generated_before;
  assert.ok(generated > 0 && generated < MAX_TOKENS, `${generated} tokens generated for the stopped answer`);
  assert.equal(await page.locator("#input").isEnabled(), true);
  assert.deepEqual(outside, [], "the page fetched something from elsewhere");
});
