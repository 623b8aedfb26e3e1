import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord } from "../protocol";
import { type RecordingProxy, startProxy } from "./server";
import {
  type FixtureEngine,
  QWEN3_IM_END,
  qwen3,
  qwen3PromptIds,
  startFixtureEngine,
} from "./testing/fixture-engine";

const MODEL = "Qwen/Qwen3-8B";
type ErrorJson = { error: { code: string; message: string } };
const quiet = { info() {}, warn() {}, error() {} };

let engine: FixtureEngine;
let proxy: RecordingProxy;
let sessionCounter = 0;

beforeAll(async () => {
  engine = await startFixtureEngine({ model: MODEL });
  proxy = await startProxy({
    engine: "sglang-openai",
    engineUrl: engine.url,
    modelServed: MODEL,
    logger: quiet,
  });
});
afterAll(async () => {
  await proxy.close();
  await engine.close();
});
afterEach(() => {
  engine.behaviour = {};
  engine.received.length = 0;
});

function newSession(): { id: string; key: string } {
  const id = `sess-${++sessionCounter}`;
  return { id, key: proxy.openSession(id, { task_id: "t1" }).key };
}

async function chat(key: string | null, body: unknown, path = "/v1/chat/completions") {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${proxy.url}${path}`, {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, contentType: res.headers.get("content-type"), text: await res.text() };
}

const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "What is 2 + 2?" },
];

describe("proxy: chat completions", () => {
  it("forwards with the token flags and the served model, answers with the client's model, records aligned ids", async () => {
    const s = newSession();
    engine.behaviour = { content: "4" };
    const r = await chat(s.key, {
      model: "gpt-4o-mini",
      messages,
      max_completion_tokens: 32,
      temperature: 0,
    });
    expect(r.status).toBe(200);

    expect(engine.received).toHaveLength(1);
    const sent = engine.received[0]!;
    expect(sent.path).toBe("/v1/chat/completions");
    expect(sent.body).toMatchObject({
      model: MODEL,
      stream: false,
      logprobs: true,
      return_prompt_token_ids: true,
      return_meta_info: true,
      max_tokens: 32,
      temperature: 0,
      messages,
    });
    expect(sent.body.max_completion_tokens).toBeUndefined();
    expect(sent.headers["x-smg-routing-key"]).toBe(s.id);

    const body = JSON.parse(r.text);
    expect(body.model).toBe("gpt-4o-mini");
    expect(body.choices[0].message.content).toBe("4");
    for (const field of ["prompt_token_ids", "meta_info", "input_token_ids", "token_ids"]) {
      expect(body.choices[0]).not.toHaveProperty(field);
    }
    expect(body.choices[0].logprobs).toBeNull();

    const records = proxy.completions(s.id);
    expect(records).toHaveLength(1);
    const rec = CompletionRecord.parse(records[0]);
    expect(rec.prompt_ids).toEqual(qwen3PromptIds(messages));
    const expectedOut = [...qwen3().tokenizer.encode("4", { add_special_tokens: false }), QWEN3_IM_END];
    expect(rec.response_ids).toEqual(expectedOut);
    expect(rec.response_logprobs).toHaveLength(rec.response_ids.length);
    expect(rec.response_logprobs!.every((lp) => lp < 0)).toBe(true);
    expect(rec.model_requested).toBe("gpt-4o-mini");
    expect(rec.model_used).toBe(MODEL);
    expect(rec.original_request.model).toBe("gpt-4o-mini");
    expect(rec.request.model).toBe(MODEL);
    expect(rec.finish_reason).toBe("stop");
    expect(rec.weight_version).toBe("default");
    expect(rec.cached_tokens).toBe(0);
    expect(rec.replica).toBe(engine.url);
    expect(rec.completion_id).toMatch(/^cmp_[0-9a-f]{12}$/);
    expect(Number.isNaN(Date.parse(rec.timestamp))).toBe(false);
    expect(s.key).toMatch(/^sk-polar-[0-9a-f]{32}$/);
  });

  it("returns logprobs to a harness that asked for them", async () => {
    const s = newSession();
    const r = await chat(s.key, { model: "m", messages, logprobs: true });
    const body = JSON.parse(r.text);
    expect(body.choices[0].logprobs.content.length).toBeGreaterThan(0);
  });

  it("refuses an unknown or missing key with 401 in OpenAI's shape and records nothing", async () => {
    const s = newSession();
    for (const key of ["sk-polar-00000000000000000000000000000000", null]) {
      const r = await chat(key, { messages });
      expect(r.status).toBe(401);
      expect(JSON.parse(r.text)).toMatchObject({
        error: { type: "invalid_request_error", code: "invalid_api_key" },
      });
    }
    expect(engine.received).toHaveLength(0);
    expect(proxy.completions(s.id)).toHaveLength(0);
  });

  it("refuses a closed session's key", async () => {
    const s = newSession();
    await proxy.closeSession(s.id);
    expect((await chat(s.key, { messages })).status).toBe(401);
  });

  it("answers 400 naming the field for bad JSON and missing messages", async () => {
    const s = newSession();
    const bad = await chat(s.key, "{not json");
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).error.code).toBe("invalid_json");
    const missing = await chat(s.key, { model: "m" });
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.text).error.message).toMatch(/^messages: required/);
    expect(engine.received).toHaveLength(0);
  });

  it("passes an engine 500 through with its status and body, recording nothing", async () => {
    const s = newSession();
    engine.behaviour = { status: 500 };
    const r = await chat(s.key, { messages });
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text)).toMatchObject({ object: "error", message: "fixture engine failure" });
    expect(proxy.completions(s.id)).toHaveLength(0);
  });

  it("answers 502 naming the field when the engine omits prompt ids", async () => {
    const s = newSession();
    engine.behaviour = { dropChoiceField: "prompt_token_ids" };
    const r = await chat(s.key, { messages });
    expect(r.status).toBe(502);
    const err = JSON.parse(r.text).error;
    expect(err.code).toBe("engine_contract_violation");
    expect(err.message).toContain("choices[0].prompt_token_ids");
    expect(proxy.completions(s.id)).toHaveLength(0);
  });

  it("records null logprobs (not a shorter list) when the engine's logprobs do not line up", async () => {
    const s = newSession();
    engine.behaviour = { misalignLogprobs: true };
    expect((await chat(s.key, { messages })).status).toBe(200);
    const [rec] = proxy.completions(s.id);
    expect(rec!.response_ids.length).toBeGreaterThan(1);
    expect(rec!.response_logprobs).toBeNull();
  });

  it("also records the patched 0.5.10 shape", async () => {
    const s = newSession();
    engine.behaviour = { shape: "patched-0.5.10", content: "ok" };
    expect((await chat(s.key, { messages })).status).toBe(200);
    const [rec] = proxy.completions(s.id);
    expect(rec!.prompt_ids).toEqual(qwen3PromptIds(messages));
    expect(rec!.response_logprobs).toHaveLength(rec!.response_ids.length);
  });

  it("synthesises a parseable SSE stream whose deltas add up to the content, ending in [DONE]", async () => {
    const s = newSession();
    const content = 'Streaming "works" — with unicode ✓ and\nnewlines.';
    engine.behaviour = { content };
    const r = await chat(s.key, {
      model: "client-model",
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(r.status).toBe(200);
    expect(r.contentType).toContain("text/event-stream");
    expect(engine.received[0]!.body.stream).toBe(false);
    expect(engine.received[0]!.body.stream_options).toBeUndefined();
    const events = r.text
      .split("\n\n")
      .filter((e) => e.length > 0)
      .map((e) => {
        expect(e.startsWith("data: ")).toBe(true);
        return e.slice("data: ".length);
      });
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "client-model")).toBe(
      true,
    );
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe(content);
    const finals = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finals).toHaveLength(1);
    expect(finals[0].choices[0].finish_reason).toBe("stop");
    const usage = chunks.at(-1);
    expect(usage.choices).toEqual([]);
    expect(usage.usage.completion_tokens).toBe(proxy.completions(s.id)[0]!.response_ids.length);
  });

  it("streams tool calls as a tool_calls delta with finish_reason tool_calls", async () => {
    const s = newSession();
    engine.behaviour = { content: "", toolCalls: [{ name: "bash", arguments: '{"cmd": "ls"}' }] };
    const tools = [{ type: "function", function: { name: "bash", parameters: { type: "object" } } }];
    const r = await chat(s.key, { messages, tools, stream: true });
    const chunks = r.text
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)));
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      index: 0,
      type: "function",
      function: { name: "bash", arguments: '{"cmd": "ls"}' },
    });
    expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
    expect(proxy.completions(s.id)[0]!.request.tools).toEqual(tools);
  });

  it("keeps concurrent calls of one session apart", async () => {
    const s = newSession();
    const asks = Array.from({ length: 5 }, (_, i) => [{ role: "user", content: `question ${i}` }]);
    const results = await Promise.all(asks.map((m) => chat(s.key, { messages: m })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const recs = proxy.completions(s.id);
    expect(recs).toHaveLength(5);
    expect(new Set(recs.map((r) => r.completion_id)).size).toBe(5);
    for (const rec of recs) {
      expect(rec.prompt_ids).toEqual(qwen3PromptIds(rec.original_request.messages as unknown[]));
    }
  });

  it("lists the served model and answers 404 on unknown paths", async () => {
    const models = (await (await fetch(`${proxy.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data[0]?.id).toBe(MODEL);
    const r = await fetch(`${proxy.url}/v1/nope`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as ErrorJson).error.code).toBe("not_found");
  });

  it("keeps a harness's idle keep-alive connection open past Node's 5 s default", {
    timeout: 15_000,
  }, async () => {
    // A harness blocked in a tool call reuses its socket after the pause; a socket closed meanwhile
    // fails that request ("other side closed").
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ header: unknown; port: number | undefined }>((resolve, reject) => {
        const req = http.get(`${proxy.url}/v1/models`, { agent }, (res) => {
          res.resume();
          res.on("end", () => resolve({ header: res.headers["keep-alive"], port: req.socket?.localPort }));
        });
        req.on("error", reject);
      });
    try {
      const first = await get();
      expect(first.header).toBe("timeout=300");
      await new Promise((r) => setTimeout(r, 5_500));
      const second = await get();
      expect(second.port).toBe(first.port);
    } finally {
      agent.destroy();
    }
  });
});

describe("proxy: engine failures", () => {
  it("answers 502 when the engine is down", async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const p = await startProxy({
      engine: "sglang-openai",
      engineUrl: `http://127.0.0.1:${port}`,
      modelServed: MODEL,
      logger: quiet,
      engineRetryMs: 0,
    });
    try {
      const { key } = p.openSession("down");
      const res = await fetch(`${p.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages }),
      });
      expect(res.status).toBe(502);
      expect(((await res.json()) as ErrorJson).error.code).toBe("engine_unreachable");
      expect(p.completions("down")).toHaveLength(0);
      expect(p.engineFailure("down")).toMatch(/^engine at http:\/\/127\.0\.0\.1:\d+\S* is unreachable/);
    } finally {
      await p.close();
    }
  });

  it("answers 504 when the engine is slower than requestTimeoutMs", async () => {
    const p = await startProxy({
      engine: "sglang-openai",
      engineUrl: engine.url,
      modelServed: MODEL,
      requestTimeoutMs: 150,
      logger: quiet,
    });
    try {
      engine.behaviour = { delayMs: 1000 };
      const { key } = p.openSession("slow");
      const res = await fetch(`${p.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages }),
      });
      expect(res.status).toBe(504);
      expect(((await res.json()) as ErrorJson).error.code).toBe("engine_timeout");
      expect(p.completions("slow")).toHaveLength(0);
    } finally {
      await p.close();
    }
  });

  it("refuses calls past the per-session record cap with 429", async () => {
    const p = await startProxy({
      engine: "sglang-openai",
      engineUrl: engine.url,
      modelServed: MODEL,
      maxRecordsPerSession: 2,
      logger: quiet,
    });
    try {
      const { key } = p.openSession("capped");
      const call = () =>
        fetch(`${p.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ messages }),
        });
      expect((await call()).status).toBe(200);
      expect((await call()).status).toBe(200);
      const third = await call();
      expect(third.status).toBe(429);
      expect(((await third.json()) as ErrorJson).error.message).toContain("limit of 2 recorded completions");
      expect(p.completions("capped")).toHaveLength(2);
    } finally {
      await p.close();
    }
  });
});
