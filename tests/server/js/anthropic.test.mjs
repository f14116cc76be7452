// g4 serve through the official Anthropic SDK (npm `@anthropic-ai/sdk`):
// messages whole and streamed (the exact event sequence, and the SDK's own
// accumulation equal to the whole message), system prompts, stop
// sequences, tool_use / tool_result round trips, thinking, count_tokens,
// prefill, and errors as the SDK's typed errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { startServer } from "./lib/server.mjs";

let server, client;

before(async () => {
  server = await startServer(["--model-name", "demo", "--api-key", "k-123"]);
  client = new Anthropic({ baseURL: server.url, apiKey: "k-123", maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.stderr());
});

const ask = (content, extra = {}) => ({
  model: "demo",
  max_tokens: 20,
  temperature: 0,
  messages: [{ role: "user", content }],
  ...extra,
});

test("a streamed message follows Anthropic's event sequence and equals the whole message", async () => {
  for (const q of ["What is a Python dictionary?", "Explain recursion briefly."]) {
    const whole = await client.messages.create(ask(q, { system: "Answer briefly." }));
    assert.equal(whole.type, "message");
    assert.equal(whole.role, "assistant");
    assert.equal(whole.model, "demo");
    assert.equal(whole.content[0].type, "text");
    assert.equal(whole.stop_reason, "max_tokens");
    assert.equal(whole.usage.output_tokens, 20);

    const events = [];
    const stream = client.messages.stream(ask(q, { system: "Answer briefly." }));
    stream.on("streamEvent", (e) => events.push(e.type));
    const final = await stream.finalMessage();
    assert.deepEqual(final.content, whole.content);
    assert.equal(final.stop_reason, whole.stop_reason);
    assert.equal(final.usage.output_tokens, 20);
    // message_start, then blocks (start, deltas, stop), message_delta, message_stop.
    const shape = events.join(" ").replace(/(content_block_delta ?)+/g, "content_block_delta+ ").trim();
    assert.match(shape, /^message_start (content_block_start content_block_delta\+ content_block_stop )+message_delta message_stop$/);
  }
});

test("stop sequences end the answer and are reported", async () => {
  const free = await client.messages.create(ask("What is a Python dictionary?", { max_tokens: 30 }));
  const text = free.content[0].text;
  const stop = text.slice(8, 12);
  const r = await client.messages.create(ask("What is a Python dictionary?", { max_tokens: 30, stop_sequences: [stop] }));
  assert.equal(r.stop_reason, "stop_sequence");
  assert.equal(r.stop_sequence, stop);
  assert.equal(r.content[0].text, text.slice(0, text.indexOf(stop)));
});

test("tool_use and tool_result round trip; thinking and prefill are accepted", async () => {
  const tools = [{ name: "get_weather", description: "Weather of a city",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
  const r = await client.messages.create({
    model: "demo", max_tokens: 10, temperature: 0, tools,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: [
        { type: "thinking", thinking: "I should call the tool.", signature: "" },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18 C and sunny" }] },
    ],
  });
  assert.ok(["end_turn", "max_tokens", "tool_use"].includes(r.stop_reason));
  const counted = await client.messages.countTokens({ model: "demo", tools, messages: [{ role: "user", content: "Weather in Paris?" }] });
  const plain = await client.messages.countTokens({ model: "demo", messages: [{ role: "user", content: "Weather in Paris?" }] });
  assert.ok(counted.input_tokens > plain.input_tokens + 10, "the tool declaration is in the prompt");
  const usage = (await client.messages.create(ask("Weather in Paris?", { max_tokens: 1 }))).usage;
  assert.equal(usage.input_tokens + (usage.cache_read_input_tokens ?? 0), plain.input_tokens);

  const think = await client.messages.create(ask("Hi", { max_tokens: 16, thinking: { type: "enabled", budget_tokens: 1024 } }));
  assert.ok(think.content.every((b) => b.type === "text" || b.type === "thinking"));
  const prefill = await client.messages.create({ model: "demo", max_tokens: 8, temperature: 0,
    messages: [{ role: "user", content: "What is a Python dictionary?" }, { role: "assistant", content: "A dictionary" }] });
  assert.equal(prefill.content[0].type, "text");
});

test("errors arrive as the SDK's typed errors", async () => {
  await assert.rejects(client.messages.create({ model: "demo", max_tokens: 5, messages: [] }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400 && e.error?.error?.type === "invalid_request_error");
  await assert.rejects(client.messages.create({ model: "demo", max_tokens: 5,
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } }] }] }),
    (e) => e.status === 400 && /text only/.test(e.message));
  const wrongKey = new Anthropic({ baseURL: server.url, apiKey: "nope", maxRetries: 0 });
  await assert.rejects(wrongKey.messages.create(ask("x")), (e) => e instanceof Anthropic.AuthenticationError);
});
