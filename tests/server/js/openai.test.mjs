// g4 serve through the official OpenAI SDK (npm `openai`): models, chat
// (whole and streamed, with usage, logprobs, n, seeds, stop strings),
// completions, tools and reasoning requests, errors as the SDK's typed
// errors, cancellation by the client, and 32 concurrent streams that each
// get the text of their solo greedy run.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, metric, eventually } from "./lib/server.mjs";

let server, client;

before(async () => {
  server = await startServer(["--max-seqs", "32", "--max-queue", "64", "--model-name", "demo"]);
  client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.stderr());
});

const ask = (content, extra = {}) => ({
  model: "demo",
  messages: [{ role: "user", content }],
  max_tokens: 24,
  temperature: 0,
  ...extra,
});

async function streamText(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, role = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage, role, chunks };
}

test("models lists the served model", async () => {
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  assert.equal(models.length, 1);
  assert.equal(models[0].id, "demo");
  assert.equal((await client.models.retrieve("demo")).id, "demo");
});

test("a streamed chat answer equals the whole one, with usage", async () => {
  for (const q of ["What is a Python dictionary?", "How do I read a file?"]) {
    const whole = await client.chat.completions.create(ask(q));
    const msg = whole.choices[0].message;
    assert.equal(msg.role, "assistant");
    assert.ok(msg.content.length > 0);
    assert.equal(whole.usage.completion_tokens, 24);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 24);
    const s = await streamText(ask(q));
    assert.equal(s.role, "assistant");
    assert.equal(s.text, msg.content);
    assert.equal(s.finish, whole.choices[0].finish_reason);
    assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
    assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
    // The SDK's own accumulator agrees.
    const helper = client.chat.completions.stream(ask(q));
    const final = await helper.finalChatCompletion();
    assert.equal(final.choices[0].message.content, msg.content);
  }
});

test("seeded sampling repeats, streamed or not; n gives n choices", async () => {
  const params = ask("Write a sentence about cats.", { temperature: 0.9, top_p: 0.95, seed: 1234, n: 3 });
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  assert.equal(a.choices.length, 3);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  assert.ok(new Set(a.choices.map((c) => c.message.content)).size > 1, "choices draw with different seeds");
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const texts = ["", "", ""];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.delta.content ?? "";
  assert.deepEqual(texts, a.choices.map((c) => c.message.content));
});

test("sampling options, penalties, logit bias and stop strings are honoured", async () => {
  const base = await client.chat.completions.create(ask("What is a Python dictionary?", { max_tokens: 30 }));
  const text = base.choices[0].message.content;
  const stop = text.slice(10, 14);
  const stopped = await client.chat.completions.create(ask("What is a Python dictionary?", { max_tokens: 30, stop: [stop] }));
  assert.equal(stopped.choices[0].message.content, text.slice(0, text.indexOf(stop)));
  assert.equal(stopped.choices[0].finish_reason, "stop");
  const first = base.choices[0].message.content;
  const lp = await client.chat.completions.create(ask("What is a Python dictionary?", { max_tokens: 1, logprobs: true, top_logprobs: 3 }));
  const tok = lp.choices[0].logprobs.content[0];
  assert.equal(tok.top_logprobs.length, 3);
  assert.ok(tok.logprob <= 0 && tok.top_logprobs[0].logprob >= tok.top_logprobs[1].logprob);
  assert.equal(tok.token, first.slice(0, tok.token.length));
  assert.equal(tok.top_logprobs[0].token, tok.token, "greedy picks the most likely token");
  // A +100 bias on one token makes every sampled token that one.
  const biased = await client.completions.create({ model: "demo", prompt: "Hello", max_tokens: 5, temperature: 0.7,
                                                   logit_bias: { "300": 100 }, logprobs: 0 });
  const toks = biased.choices[0].logprobs.tokens;
  assert.equal(toks.length, 5);
  assert.ok(toks.every((t) => t === toks[0]), JSON.stringify(toks));
  const penalized = await client.chat.completions.create(ask("What is a Python dictionary?", {
    max_tokens: 30, frequency_penalty: 1.5, presence_penalty: 1.0, repetition_penalty: 1.3, top_k: 5, min_p: 0.05,
  }));
  assert.notEqual(penalized.choices[0].message.content, text);
});

test("completions: text, echo and streaming agree", async () => {
  const whole = await client.completions.create({ model: "demo", prompt: "The capital of France is", max_tokens: 12, temperature: 0 });
  assert.equal(whole.object, "text_completion");
  const stream = await client.completions.create({ model: "demo", prompt: "The capital of France is", max_tokens: 12, temperature: 0, stream: true });
  let text = "";
  for await (const c of stream) text += c.choices[0]?.text ?? "";
  assert.equal(text, whole.choices[0].text);
  const echo = await client.completions.create({ model: "demo", prompt: "The capital of France is", max_tokens: 12, temperature: 0, echo: true });
  assert.equal(echo.choices[0].text, "The capital of France is" + whole.choices[0].text);
});

test("tools, tool results and thinking are accepted and rendered", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const r = await client.chat.completions.create({
    model: "demo", max_tokens: 8, temperature: 0, tools,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "18 C and sunny" },
    ],
  });
  assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason));
  const noTools = await client.chat.completions.create({ model: "demo", max_tokens: 8, temperature: 0,
    messages: [{ role: "user", content: "Weather in Paris?" }] });
  assert.ok(r.usage.prompt_tokens > noTools.usage.prompt_tokens + 20, "the tool declaration and the result are in the prompt");
  const think = await client.chat.completions.create({ ...ask("Hi"), chat_template_kwargs: { enable_thinking: true } });
  assert.ok(think.usage.prompt_tokens > noTools.usage.prompt_tokens - 10);
  assert.equal(typeof think.choices[0].message.content, "string");
});

test("errors arrive as the SDK's typed errors", async () => {
  await assert.rejects(client.chat.completions.create({ model: "demo", messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /messages/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...ask("x"), response_format: { type: "json_object" } }),
    (e) => e instanceof OpenAI.BadRequestError && /response_format/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...ask("x"), tool_choice: "required",
      tools: [{ type: "function", function: { name: "f" } }] }),
    (e) => e.status === 400 && /constrained decoding/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: "demo", messages: [{ role: "wizard", content: "x" }] }),
    (e) => e.status === 400 && /wizard/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...ask("x"), max_tokens: 40000 }),
    (e) => e.status === 400 && /context/.test(e.message));
  await assert.rejects(client.models.retrieve("gpt-4"), (e) => e instanceof OpenAI.NotFoundError);
});

test("a client that aborts a stream cancels it and frees its blocks", async () => {
  const before = await metric(server.url, 'g4_kv_blocks_used{group="full",store="0"}');
  const stream = await client.chat.completions.create({ ...ask("Tell me a long story about a dragon."), max_tokens: 3000, stream: true,
                                                        logit_bias: { 1: -100, 6: -100 } });
  let n = 0;
  for await (const chunk of stream) {
    if (++n === 5) { stream.controller.abort(); break; }
  }
  assert.ok(await eventually(async () => (await metric(server.url, "g4_running_sequences")) === 0));
  const generated = await metric(server.url, "g4_generation_tokens_total");
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await metric(server.url, "g4_generation_tokens_total"), generated, "nothing generates any more");
  // Only what the prefix cache keeps stays (at most the prompt's blocks and the answer so far).
  const afterUsed = await metric(server.url, 'g4_kv_blocks_used{group="full",store="0"}');
  assert.ok(afterUsed - before <= 2, `blocks used ${before} -> ${afterUsed}`);
});

test("32 concurrent streams each get the text of their solo greedy run", async () => {
  const prompts = ["What is a Python dictionary?", "Name a sorting algorithm.", "How do I read a file?",
    "Explain recursion briefly.", "What does a compiler do?", "Why is the sky blue?", "What is a linked list?",
    "How do I install a package?"];
  const solo = [];
  for (const p of prompts) solo.push((await client.chat.completions.create(ask(p, { max_tokens: 20 }))).choices[0].message.content);
  const runs = [];
  for (let i = 0; i < 32; i++) runs.push(streamText(ask(prompts[i % 8], { max_tokens: 20 })).then((r) => ({ i, r })));
  const results = await Promise.all(runs);
  for (const { i, r } of results) assert.equal(r.text, solo[i % 8], `stream ${i}`);
  assert.ok(await eventually(async () => (await metric(server.url, "g4_requests_in_flight")) === 0));
});
