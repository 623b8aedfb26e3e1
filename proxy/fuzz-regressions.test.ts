/**
 * The counterexamples the proxy's fuzzing found (`fuzz.test.ts`), each as its shrunk input through
 * a real proxy in token mode against the simulated engine, with the 400 it gets since the fix.
 * Before, each was a 500 `internal_error` made by the proxy itself.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };

let sim: SimEngineHandle;
let proxy: RecordingProxy;
let key = "";

beforeAll(async () => {
  sim = await startSimEngine({ model: MODEL });
  proxy = await startProxy({ engine: "sglang", engineUrls: [sim.url], modelServed: MODEL, logger: quiet });
  key = proxy.openSession("regress", { task_id: "t" }).key;
}, 60_000);
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
});

async function post(path: string, body: string) {
  const res = await fetch(`${proxy.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "x-api-key": key },
    body,
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** A member nested 20 000 objects deep, spliced into a valid body as text. */
function withDeepMember(body: object): string {
  return JSON.stringify(body).replace(/^\{/, `{"metadata":${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)},`);
}

describe("fuzz counterexamples: the proxy", () => {
  it("a request with a member nested 20 000 deep is a 400 in each family's shape, on every route", async () => {
    const chat = { model: "m", messages: [{ role: "user", content: "hi" }] };
    const openai = await post("/v1/chat/completions", withDeepMember(chat));
    expect(openai.status).toBe(400);
    expect(openai.json).toMatchObject({ error: { code: "invalid_request", type: "invalid_request_error" } });
    expect(String((openai.json.error as { message: string }).message)).toMatch(
      /^metadata(\.a)+…: nests more than 128 levels deep \(LIMITS\.maxJsonDepth\)$/,
    );
    const responses = await post("/v1/responses", withDeepMember({ model: "m", input: "hi" }));
    expect(responses).toMatchObject({ status: 400, json: { error: { code: "invalid_request" } } });
    const messages = { model: "m", max_tokens: 8, messages: [{ role: "user", content: "hi" }] };
    for (const path of ["/v1/messages", "/v1/messages/count_tokens"]) {
      const anthropic = await post(path, withDeepMember(messages));
      expect(anthropic, path).toMatchObject({
        status: 400,
        json: { type: "error", error: { code: "invalid_request" } },
      });
    }
    const contents = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };
    for (const path of ["/v1beta/models/g:generateContent", "/v1beta/models/g:countTokens"]) {
      const google = await post(path, withDeepMember(contents));
      expect(google, path).toMatchObject({
        status: 400,
        json: { error: { code: 400, details: [{ reason: "invalid_request" }] } },
      });
    }
  });

  it("an OpenAI Chat content part or tool call that is not an object, or a part whose type or text is not a string, is a 400 naming it (token mode crashed on [null] and on objects there)", async () => {
    const body = (content: unknown) =>
      JSON.stringify({
        model: "m",
        messages: [
          { role: "system", content: "s" },
          { role: "user", content },
        ],
      });
    for (const [content, param] of [
      [[null], "messages[1].content[0]"],
      [["x"], "messages[1].content[0]"],
      [[{ type: "text", text: "a" }, 5], "messages[1].content[1]"],
      [5, "messages[1].content"],
      [{ type: "text", text: "a" }, "messages[1].content"],
      // npm run test:fuzz, seed 1460910933: an object as a part's type was a 500 in token mode.
      [[{ type: { toString: 1 }, text: "What is 2+2?" }], "messages[1].content[0].type"],
      [[{ type: 7, text: "a" }], "messages[1].content[0].type"],
      [[{ text: "no type" }], "messages[1].content[0].type"],
      [[{ type: "text", text: { toString: 1 } }], "messages[1].content[0].text"],
    ] as const) {
      const res = await post("/v1/chat/completions", body(content));
      expect(res, JSON.stringify(content)).toMatchObject({
        status: 400,
        json: { error: { code: "invalid_request", param } },
      });
    }
    const withCalls = (tool_calls: unknown) =>
      JSON.stringify({
        model: "m",
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: null, tool_calls },
          { role: "tool", tool_call_id: "c1", content: "ok" },
        ],
      });
    for (const [calls, param] of [
      [[null], "messages[1].tool_calls[0]"],
      [[{ id: "c1", type: "function" }], "messages[1].tool_calls[0].function"],
      [[{ id: "c1", function: { arguments: "{}" } }], "messages[1].tool_calls[0].function.name"],
      [
        [{ id: "c1", function: { name: "bash", arguments: 5 } }],
        "messages[1].tool_calls[0].function.arguments",
      ],
      ["x", "messages[1].tool_calls"],
    ] as const) {
      const res = await post("/v1/chat/completions", withCalls(calls));
      expect(res, JSON.stringify(calls)).toMatchObject({ status: 400, json: { error: { param } } });
    }
    // Valid forms still go through.
    for (const content of ["hi", [{ type: "text", text: "hi" }]])
      expect((await post("/v1/chat/completions", body(content))).status).toBe(200);
  });

  it("an OpenAI Chat tool without a function is a 400 naming it (token mode read its description)", async () => {
    const body = (tools: unknown) =>
      JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], tools });
    for (const [tools, param] of [
      [[{ type: "function" }], "tools[0].function"],
      [[{ type: "function", function: { name: 5 } }], "tools[0].function.name"],
      [[null], "tools[0]"],
      [{ type: "function" }, "tools"],
    ] as const) {
      const res = await post("/v1/chat/completions", body(tools));
      expect(res, JSON.stringify(tools)).toMatchObject({ status: 400, json: { error: { param } } });
    }
  });

  it("a Responses function call whose arguments are an object with no string form is served", async () => {
    // `{"toString": 1}` made String() throw: "Cannot convert object to primitive value", a 500.
    const res = await post(
      "/v1/responses",
      JSON.stringify({
        model: "m",
        input: [
          { role: "user", content: "list files" },
          { type: "function_call", call_id: "c1", name: "bash", arguments: JSON.parse('{"toString":1}') },
          { type: "function_call_output", call_id: "c1", output: "a.txt" },
        ],
        max_output_tokens: 8,
      }),
    );
    expect(res.status).toBe(200);
    const record = proxy.completions("regress").at(-1)!;
    const call = (record.request.messages as { tool_calls?: { function: { arguments: string } }[] }[]).find(
      (m) => m.tool_calls,
    );
    expect(call?.tool_calls?.[0]?.function.arguments).toBe('{"toString":1}');
  });
});
