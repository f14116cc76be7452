// Tool calls and reasoning through the official SDKs. The demo model never
// writes Gemma's tool-call or thought-channel markup, so these responses
// come from g4_sse_replay: the server's own output parser and writers fed a
// given model output token by token (tests/server/replay/sse_replay.cc).
// The SDKs parse them (streamed and whole) into the calls, arguments,
// reasoning and text the output holds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const REPLAY = process.env.G4_REPLAY;

const OUTPUT =
  "<|channel>thought\nThe user wants the weather; call the tool.<channel|>Let me check." +
  "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,units:{temp:<|\"|>C<|\"|>,wind:<|\"|>km/h<|\"|>}}<tool_call|>" +
  "<|tool_call>call:get_time{zone:<|\"|>Europe/Paris<|\"|>,exact:true}<tool_call|>";
const CALLS = [
  { name: "get_weather", args: { city: "Paris", days: 3, units: { temp: "C", wind: "km/h" } } },
  { name: "get_time", args: { zone: "Europe/Paris", exact: true } },
];
const REASONING = "The user wants the weather; call the tool.";
const TEXT = "Let me check.";

// A fetch that answers every request with the replayed response.
function replayFetch(api) {
  return async (url, init) => {
    const stream = JSON.parse(init.body).stream === true;
    const body = execFileSync(REPLAY, [api, stream ? "stream" : "whole", "1"], { input: OUTPUT });
    return new Response(body, { status: 200, headers: { "content-type": stream ? "text/event-stream" : "application/json" } });
  };
}

const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }];
const params = { model: "demo", messages: [{ role: "user", content: "Weather?" }], tools };

test("OpenAI SDK: tool_calls, content and reasoning_content, streamed and whole", { skip: !REPLAY && "no G4_REPLAY" }, async () => {
  const client = new OpenAI({ baseURL: "http://replay.invalid/v1", apiKey: "x", fetch: replayFetch("openai"), maxRetries: 0 });
  const whole = await client.chat.completions.create(params);
  const streamed = await client.chat.completions.stream(params).finalChatCompletion();
  for (const r of [whole, streamed]) {
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.equal(m.content, TEXT);
    assert.equal(m.tool_calls.length, 2);
    m.tool_calls.forEach((c, i) => {
      assert.equal(c.type, "function");
      assert.match(c.id, /^call_/);
      assert.equal(c.function.name, CALLS[i].name);
      assert.deepEqual(JSON.parse(c.function.arguments), CALLS[i].args);
    });
  }
  assert.equal(whole.choices[0].message.reasoning_content, REASONING);
  // Reasoning streams as its own delta field.
  let reasoning = "";
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? "";
    assert.ok(!(chunk.choices[0]?.delta?.content ?? "").includes("<|"), "markup leaked into content");
  }
  assert.equal(reasoning, REASONING);
});

test("Anthropic SDK: thinking, text and tool_use blocks, streamed and whole", { skip: !REPLAY && "no G4_REPLAY" }, async () => {
  const client = new Anthropic({ baseURL: "http://replay.invalid", apiKey: "x", fetch: replayFetch("anthropic"), maxRetries: 0 });
  const req = { model: "demo", max_tokens: 100, messages: [{ role: "user", content: "Weather?" }],
                tools: [{ name: "get_weather", input_schema: { type: "object" } }] };
  const whole = await client.messages.create(req);
  const streamed = await client.messages.stream(req).finalMessage();
  for (const m of [whole, streamed]) {
    assert.equal(m.stop_reason, "tool_use");
    assert.deepEqual(m.content.map((b) => b.type), ["thinking", "text", "tool_use", "tool_use"]);
    assert.equal(m.content[0].thinking, REASONING);
    assert.equal(m.content[1].text, TEXT);
    CALLS.forEach((c, i) => {
      const b = m.content[2 + i];
      assert.match(b.id, /^toolu_/);
      assert.equal(b.name, c.name);
      assert.deepEqual(b.input, c.args);
    });
  }
});
