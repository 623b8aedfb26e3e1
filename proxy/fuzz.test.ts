/**
 * Property-based fuzzing of the recording proxy's four API families (OpenAI Chat, OpenAI
 * Responses, Anthropic Messages, Gemini generateContent / streamGenerateContent / countTokens)
 * through real proxies — token mode (`sglang`, the proxy renders and tokenizes) and chat mode
 * (`sglang-openai`) — against the simulated engine. Requests are near-valid (a valid request of the
 * family with random edits, so most of them reach the engine), arbitrary JSON, or not JSON at all,
 * with a good, wrong or missing session key. Every answer must be a 2xx whose body is complete
 * (streams end), or a 4xx in the family's own error shape; a 5xx only as the engine's own answer
 * passed through, never one the proxy made. Afterwards each family still serves a normal call.
 * Case counts and seeds: `test/support/fuzz.ts`; docs/control-plane.md, "Fuzzing".
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import {
  anyJson,
  fuzzParameters,
  fuzzSettings,
  fuzzTimeout,
  hostileScalar,
  mutated,
  reported,
} from "../test/support/fuzz";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
/** A valid 1×1 PNG (the engine decodes images it is sent). */
const PNG_1PX =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
const quiet = { info() {}, warn() {}, error() {} };
const settings = fuzzSettings(process.env, 150);

let sim: SimEngineHandle;
const proxies: Record<"token" | "chat", RecordingProxy> = {} as Record<"token" | "chat", RecordingProxy>;
const keys: Record<"token" | "chat", string> = { token: "", chat: "" };
let sessionCounter = 0;
let callsOnKey = 0;

/** A fresh session key now and then, so no session reaches its record cap during a long run. */
function keyOf(mode: "token" | "chat"): string {
  if (++callsOnKey % 500 === 0 || keys[mode] === "") {
    for (const m of ["token", "chat"] as const) {
      keys[m] = proxies[m].openSession(`fuzz-${m}-${++sessionCounter}`, { task_id: "t" }).key;
    }
  }
  return keys[mode];
}

type FamilyName = "openai_chat" | "openai_responses" | "anthropic" | "google";

/** A valid request of each family, with the paths random edits may hit. */
const FAMILIES: Record<FamilyName, { paths: string[]; body: object; edits: string[] }> = {
  openai_chat: {
    paths: ["/v1/chat/completions", "/chat/completions"],
    body: {
      model: "gpt-4o",
      messages: [
        { role: "system", content: "Be terse." },
        { role: "user", content: [{ type: "text", text: "What is 2+2?" }] },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: '{"cmd":"ls"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: "a.txt" },
      ],
      tools: [
        { type: "function", function: { name: "bash", parameters: { type: "object", properties: {} } } },
      ],
      tool_choice: "auto",
      max_tokens: 24,
      temperature: 0,
      stream: false,
    },
    edits: [
      "model",
      "messages",
      "messages.0",
      "messages.0.role",
      "messages.0.content",
      "messages.1",
      "messages.1.content",
      "messages.1.content.0",
      "messages.1.content.0.type",
      "messages.1.content.0.text",
      "messages.2",
      "messages.2.tool_calls",
      "messages.2.tool_calls.0",
      "messages.2.tool_calls.0.function",
      "messages.2.tool_calls.0.function.arguments",
      "messages.3",
      "messages.3.tool_call_id",
      "messages.3.content",
      "messages.2.tool_calls.0.function.name",
      "messages.2.tool_calls.0.id",
      "tools",
      "tools.0",
      "tools.0.function",
      "tools.0.function.name",
      "tools.0.function.parameters",
      "tool_choice",
      "max_tokens",
      "max_completion_tokens",
      "temperature",
      "top_p",
      "top_k",
      "stop",
      "n",
      "seed",
      "logprobs",
      "top_logprobs",
      "stream",
      "stream_options",
      "response_format",
      "chat_template_kwargs",
    ],
  },
  openai_responses: {
    paths: ["/v1/responses", "/responses"],
    body: {
      model: "gpt-5",
      instructions: "Be terse.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "List files." }] },
        { type: "reasoning", summary: [{ type: "summary_text", text: "think" }] },
        { type: "function_call", call_id: "c1", name: "bash", arguments: '{"cmd":"ls"}' },
        { type: "function_call_output", call_id: "c1", output: "a.txt" },
      ],
      tools: [{ type: "function", name: "bash", parameters: { type: "object", properties: {} } }],
      tool_choice: "auto",
      max_output_tokens: 24,
      include: ["reasoning.encrypted_content"],
      store: false,
      stream: false,
    },
    edits: [
      "model",
      "instructions",
      "input",
      "input.0",
      "input.0.role",
      "input.0.content",
      "input.0.content.0",
      "input.0.content.0.type",
      "input.0.content.0.text",
      "input.2.name",
      "input.1",
      "input.1.summary",
      "input.1.encrypted_content",
      "input.2",
      "input.2.call_id",
      "input.2.arguments",
      "input.3",
      "input.3.output",
      "tools",
      "tools.0",
      "tools.0.type",
      "tools.0.name",
      "tool_choice",
      "max_output_tokens",
      "temperature",
      "reasoning",
      "include",
      "previous_response_id",
      "text",
      "stream",
    ],
  },
  anthropic: {
    paths: ["/v1/messages", "/v1/messages/count_tokens"],
    body: {
      model: "claude-sonnet",
      max_tokens: 24,
      system: [{ type: "text", text: "Be terse." }],
      messages: [
        { role: "user", content: "List files." },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "ls", signature: "sig" },
            { type: "tool_use", id: "tu1", name: "bash", input: { cmd: "ls" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "tu1", content: [{ type: "text", text: "a.txt" }] },
            { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1PX } },
          ],
        },
      ],
      tools: [{ name: "bash", input_schema: { type: "object", properties: {} } }],
      tool_choice: { type: "auto" },
      thinking: { type: "disabled" },
      stream: false,
    },
    edits: [
      "model",
      "max_tokens",
      "system",
      "system.0",
      "system.0.text",
      "messages",
      "messages.0",
      "messages.0.role",
      "messages.0.content",
      "messages.1",
      "messages.1.content",
      "messages.1.content.0",
      "messages.1.content.0.signature",
      "messages.1.content.0.thinking",
      "messages.1.content.1.id",
      "messages.1.content.1.name",
      "messages.1.content.1",
      "messages.1.content.1.input",
      "messages.2",
      "messages.2.content",
      "messages.2.content.0",
      "messages.2.content.0.tool_use_id",
      "messages.2.content.0.content",
      "messages.2.content.0.content.0.text",
      "messages.2.content.0.is_error",
      "messages.2.content.1",
      "messages.2.content.1.source",
      "messages.2.content.1.source.type",
      "messages.2.content.1.source.data",
      "tools",
      "tools.0",
      "tools.0.name",
      "tools.0.input_schema",
      "tool_choice",
      "tool_choice.type",
      "thinking",
      "stop_sequences",
      "temperature",
      "top_k",
      "metadata",
      "stream",
    ],
  },
  google: {
    paths: [
      "/v1beta/models/gemini:generateContent",
      "/v1beta/models/gemini:streamGenerateContent",
      "/v1beta/models/gemini:streamGenerateContent?alt=sse",
      "/v1beta/models/gemini:countTokens",
    ],
    body: {
      systemInstruction: { parts: [{ text: "Be terse." }] },
      contents: [
        { role: "user", parts: [{ text: "List files." }] },
        {
          role: "model",
          parts: [{ functionCall: { name: "bash", args: { cmd: "ls" } }, thoughtSignature: "c2ln" }],
        },
        { role: "user", parts: [{ functionResponse: { name: "bash", response: { output: "a.txt" } } }] },
      ],
      tools: [{ functionDeclarations: [{ name: "bash", parameters: { type: "OBJECT", properties: {} } }] }],
      toolConfig: { functionCallingConfig: { mode: "AUTO" } },
      generationConfig: { maxOutputTokens: 24, temperature: 0 },
    },
    edits: [
      "systemInstruction",
      "systemInstruction.parts",
      "contents",
      "contents.0",
      "contents.0.role",
      "contents.0.parts",
      "contents.0.parts.0",
      "contents.0.parts.0.text",
      "contents.1",
      "contents.1.parts.0",
      "contents.1.parts.0.functionCall",
      "contents.1.parts.0.functionCall.args",
      "contents.1.parts.0.functionCall.name",
      "contents.1.parts.0.thoughtSignature",
      "contents.2",
      "contents.2.parts.0.functionResponse",
      "contents.2.parts.0.functionResponse.response",
      "contents.2.parts.0.functionResponse.name",
      "tools",
      "tools.0",
      "tools.0.functionDeclarations",
      "toolConfig",
      "generationConfig",
      "generationConfig.maxOutputTokens",
      "generationConfig.temperature",
      "generationConfig.thinkingConfig",
      "generationConfig.responseMimeType",
      "generateContentRequest",
    ],
  },
};

/** How the session key travels: the family's own header, another family's, a query, or not at all. */
type KeyPlace = "bearer" | "x-api-key" | "x-goog-api-key" | "query" | "none" | "wrong";

function caseOf(family: FamilyName) {
  const spec = FAMILIES[family];
  const bodyText: fc.Arbitrary<string> = fc.oneof(
    { weight: 8, arbitrary: mutated(spec.body, spec.edits, 3).map((v) => JSON.stringify(v)) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(mutated(spec.body, spec.edits, 2), fc.boolean())
        .map(([v, stream]) => JSON.stringify({ ...(v as object), stream })),
    },
    { weight: 1, arbitrary: anyJson.map((v) => JSON.stringify(v) ?? "null") },
    { weight: 1, arbitrary: hostileScalar.map((v) => JSON.stringify(v) ?? "null") },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.string({ maxLength: 40 }),
        fc.constantFrom(
          "",
          "{",
          "[".repeat(50_000) + "]".repeat(50_000),
          `{"messages":${"[".repeat(20_000)}${"]".repeat(20_000)}}`,
          // Valid requests with one member nested deeper than JSON.stringify can follow.
          JSON.stringify(spec.body).replace(
            /^\{/,
            `{"metadata":${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)},`,
          ),
          JSON.stringify(spec.body).replace(
            /^\{/,
            `{"response_format":${"[".repeat(8000)}${"]".repeat(8000)},`,
          ),
        ),
      ),
    },
  );
  return fc.record({
    mode: fc.constantFrom<"token" | "chat">("token", "token", "token", "chat"),
    path: fc.constantFrom(...spec.paths),
    key: fc.constantFrom<KeyPlace>(
      "bearer",
      "bearer",
      "x-api-key",
      "x-goog-api-key",
      "query",
      "none",
      "wrong",
    ),
    anthropicVersion: fc.boolean(),
    contentType: fc.constantFrom("application/json", "application/json", "text/plain", null),
    body: bodyText,
  });
}

type Case = ReturnType<typeof caseOf> extends fc.Arbitrary<infer T> ? T : never;

/** Whether `body` is `family`'s error shape (or the engine's own error passed through). */
function errorShape(family: FamilyName, json: Record<string, unknown>): { ok: boolean; code: unknown } {
  const error = json.error as Record<string, unknown> | undefined;
  if (family === "anthropic")
    return {
      ok: json.type === "error" && typeof error?.type === "string" && typeof error.message === "string",
      code: error?.code,
    };
  if (family === "google")
    return {
      ok:
        typeof error?.code === "number" &&
        typeof error.message === "string" &&
        typeof error.status === "string",
      code: (error?.details as { reason?: unknown }[] | undefined)?.[0]?.reason,
    };
  // OpenAI (Chat, Responses); Chat passes the engine's own error body through unchanged.
  if (json.object === "error" && typeof json.message === "string")
    return { ok: family === "openai_chat", code: "engine_error" };
  return {
    ok: typeof error?.message === "string" && typeof error.type === "string" && "code" in error,
    code: error?.code,
  };
}

/** Codes of errors the proxy itself makes with a 5xx: none of them may come from bad input. */
const PROXY_FAILURES = [
  "internal_error",
  "engine_contract_violation",
  "engine_unreachable",
  "engine_timeout",
];

async function check(family: FamilyName, c: Case): Promise<void> {
  const proxy = proxies[c.mode];
  const key = keyOf(c.mode);
  const headers: Record<string, string> = {};
  if (c.contentType) headers["content-type"] = c.contentType;
  if (c.anthropicVersion) headers["anthropic-version"] = "2023-06-01";
  let path = c.path;
  if (c.key === "bearer") headers.authorization = `Bearer ${key}`;
  else if (c.key === "x-api-key") headers["x-api-key"] = key;
  else if (c.key === "x-goog-api-key") headers["x-goog-api-key"] = key;
  else if (c.key === "query") path += `${path.includes("?") ? "&" : "?"}key=${key}`;
  else if (c.key === "wrong") headers.authorization = "Bearer sk-polar-00000000000000000000000000000000";
  const res = await fetch(`${proxy.url}${path}`, {
    method: "POST",
    headers,
    body: c.body,
    signal: AbortSignal.timeout(30_000),
  });
  // The whole answer arrives (a stream ends) within the timeout.
  const text = await res.text();
  const at = `${c.mode} ${path} → ${res.status} ${text.slice(0, 400)}`;
  if (res.status < 300) {
    for (const code of PROXY_FAILURES) expect(text, at).not.toContain(`"${code}"`);
    if (!(res.headers.get("content-type") ?? "").includes("event-stream") && !path.includes("streamGenerate"))
      expect(() => JSON.parse(text), at).not.toThrow();
    return;
  }
  const json = JSON.parse(text) as Record<string, unknown>;
  const shape = errorShape(family, json);
  expect(shape.ok, `${at}: not the family's error shape`).toBe(true);
  expect(res.status, at).toBeGreaterThanOrEqual(400);
  if (res.status >= 500) expect(shape.code, `${at}: a 5xx the proxy made`).toBe("engine_error");
  expect(PROXY_FAILURES, at).not.toContain(shape.code);
}

/** A normal call of the family answers 200 through both proxies. */
async function normalCallWorks(family: FamilyName): Promise<void> {
  for (const mode of ["token", "chat"] as const) {
    const spec = FAMILIES[family];
    const path = spec.paths[0]!;
    const res = await fetch(`${proxies[mode].url}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${keyOf(mode)}`,
        "x-goog-api-key": keyOf(mode),
      },
      body: JSON.stringify(spec.body),
    });
    expect(res.status, `${mode} ${family}: ${await res.clone().text()}`).toBe(200);
    await res.text();
  }
}

beforeAll(async () => {
  sim = await startSimEngine({ model: MODEL });
  proxies.token = await startProxy({
    engine: "sglang",
    engineUrls: [sim.url],
    modelServed: MODEL,
    logger: quiet,
    healthIntervalMs: 0,
  });
  proxies.chat = await startProxy({
    engine: "sglang-openai",
    engineUrls: [sim.url],
    modelServed: MODEL,
    logger: quiet,
    healthIntervalMs: 0,
  });
}, 60_000);

afterAll(async () => {
  await proxies.token?.close();
  await proxies.chat?.close();
  await sim?.close();
});

describe("fuzz: the proxy's four API families", () => {
  for (const family of Object.keys(FAMILIES) as FamilyName[]) {
    it(
      `${family}: ${settings.numRuns} arbitrary requests answered 2xx or as the family's 4xx, never a 5xx of the proxy's own`,
      async () => {
        await fc.assert(
          fc.asyncProperty(
            caseOf(family),
            reported(family, (c: Case) => check(family, c)),
          ),
          fuzzParameters(settings, `proxy ${family}`),
        );
        await normalCallWorks(family);
      },
      fuzzTimeout(settings, 150),
    );
  }
});
