/**
 * The task's sampling policy over the harness's values: applied on every API family and engine
 * (token mode's `/generate` sampling parameters, the chat engines' request body), recorded with
 * what the harness asked, and refused with the field named when it cannot be applied.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { applySamplingPolicy, sessionSamplingPolicy } from "./sampling";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const ADMIN = "admin-token";
const POLICY = { temperature: 1, top_p: 0.95, top_k: 20, min_p: 0.05 };

/** One harness call per family, each asking for greedy decoding in its own wire shape. */
const CALLS: Record<
  string,
  (key: string) => { path: string; headers: Record<string, string>; body: JsonObject }
> = {
  openai_chat: (key) => ({
    path: "/v1/chat/completions",
    headers: { authorization: `Bearer ${key}` },
    body: { model: "m", messages: [{ role: "user", content: "What is 2 + 3?" }], temperature: 0, top_p: 0.5 },
  }),
  openai_responses: (key) => ({
    path: "/v1/responses",
    headers: { authorization: `Bearer ${key}` },
    body: { model: "m", input: "What is 2 + 3?", temperature: 0, top_p: 0.5 },
  }),
  anthropic: (key) => ({
    path: "/v1/messages",
    headers: { "x-api-key": key, "anthropic-version": "2023-06-01" },
    body: {
      model: "m",
      max_tokens: 256,
      messages: [{ role: "user", content: "What is 2 + 3?" }],
      temperature: 0,
      top_p: 0.5,
    },
  }),
  google: (key) => ({
    path: "/v1beta/models/m:generateContent",
    headers: { "x-goog-api-key": key },
    body: {
      contents: [{ role: "user", parts: [{ text: "What is 2 + 3?" }] }],
      generationConfig: { temperature: 0, topP: 0.5 },
    },
  }),
};

let sglang: SimEngineHandle;
let vllmSim: SimEngineHandle;
const proxies: Record<string, RecordingProxy> = {};
let n = 0;

beforeAll(async () => {
  [sglang, vllmSim] = await Promise.all([
    startSimEngine({ model: MODEL }),
    startSimEngine({ model: MODEL, flavor: "vllm" }),
  ]);
  const engines = [
    ["sglang", sglang.url],
    ["sglang-openai", sglang.url],
    ["vllm", vllmSim.url],
  ] as const;
  for (const [engine, engineUrl] of engines)
    proxies[engine] = await startProxy({
      engine,
      engineUrl,
      modelServed: MODEL,
      logger: quiet,
      adminToken: ADMIN,
    });
}, 30_000);
afterAll(async () => {
  for (const p of Object.values(proxies)) await p.close();
  await Promise.all([sglang?.close(), vllmSim?.close()]);
});

async function call(engine: string, family: string, meta: JsonObject) {
  const proxy = proxies[engine]!;
  const id = `sampling-${++n}`;
  const { key } = proxy.openSession(id, { task_id: "t", ...meta });
  const c = CALLS[family]!(key);
  const res = await fetch(`${proxy.url}${c.path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...c.headers },
    body: JSON.stringify(c.body),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  const [record] = proxy.completions(id);
  return record!;
}

/** The sampling values the engine was asked for, read from the body the proxy posted to it. */
function engineSampling(engine: string, request: JsonObject): JsonObject {
  const src =
    engine === "sglang" ? ((request.generate as JsonObject).sampling_params as JsonObject) : request;
  return { temperature: src.temperature, top_p: src.top_p, top_k: src.top_k, min_p: src.min_p };
}

describe("the task's sampling policy on every family and engine", () => {
  for (const engine of ["sglang", "sglang-openai", "vllm"])
    for (const family of Object.keys(CALLS))
      it(`${family} on ${engine}: the engine samples with the policy; the record keeps both`, async () => {
        const record = await call(engine, family, { sampling: POLICY });
        expect(record.api_type).toBe(family);
        expect(engineSampling(engine, record.request)).toEqual(POLICY);
        expect(record.metadata.sampling).toEqual({
          requested: { temperature: 0, top_p: 0.5 },
          policy: POLICY,
          applied: POLICY,
          overridden: ["temperature", "top_p", "top_k", "min_p"],
        });
      });

  it("an unset field leaves the harness's value; no policy changes nothing", async () => {
    const partial = await call("sglang", "anthropic", { sampling: { temperature: 0.8 } });
    expect(engineSampling("sglang", partial.request)).toMatchObject({ temperature: 0.8, top_p: 0.5 });
    expect(partial.metadata.sampling).toMatchObject({
      applied: { temperature: 0.8, top_p: 0.5 },
      overridden: ["temperature"],
    });
    const none = await call("vllm", "openai_chat", {});
    expect(none.request).toMatchObject({ temperature: 0, top_p: 0.5 });
    expect(none.metadata.sampling).toEqual({
      requested: { temperature: 0, top_p: 0.5 },
      policy: {},
      applied: { temperature: 0, top_p: 0.5 },
      overridden: [],
    });
  });

  it("a policy the session cannot apply is refused at open, naming the field", async () => {
    const proxy = proxies.sglang!;
    const res = await fetch(`${proxy.url}/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN}` },
      body: JSON.stringify({ meta: { sampling: { top_p: 0 } } }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /^meta\.sampling\.top_p: /,
    );
  });
});

describe("applySamplingPolicy", () => {
  it("records a field the harness left unset as applied, not requested", () => {
    const chat: JsonObject = { messages: [] };
    expect(applySamplingPolicy(chat, { top_k: 40 })).toEqual({
      requested: {},
      policy: { top_k: 40 },
      applied: { top_k: 40 },
      overridden: ["top_k"],
    });
    expect(chat.top_k).toBe(40);
    expect(applySamplingPolicy({ temperature: 1 }, { temperature: 1 }).overridden).toEqual([]);
  });

  it("reads the policy from the session meta and refuses a malformed one", () => {
    expect(sessionSamplingPolicy({})).toBeNull();
    expect(sessionSamplingPolicy({ sampling: {} })).toBeNull();
    expect(() => sessionSamplingPolicy({ sampling: { top_k: 0 } })).toThrow(/^meta\.sampling\.top_k: /);
    expect(() => sessionSamplingPolicy({ sampling: { temp: 1 } })).toThrow(/^meta\.sampling/);
  });
});
