/**
 * The proxy's Prometheus families against the simulated engine (vLLM flavour, so a streamed call
 * has a first token): requests by family and status, tokens equal to the records' ids, engine call
 * and first-token histograms, errors by kind, and the fence gauges; the exposition, with the
 * process collectors, passes `promtool check metrics`.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { itWith } from "../test/support/optional-tools";
import { promtoolProblems, sampleSum, sampleValues } from "../test/support/promtool";
import { PromProxyMetrics, registerProcessMetrics } from "./metrics-prom";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };

let engine: SimEngineHandle;
let proxy: RecordingProxy;
let registry: Registry;
let sessionId: string;
let key: string;

async function scrape(): Promise<string> {
  return registry.metrics();
}

beforeAll(async () => {
  engine = await startSimEngine({ model: MODEL, flavor: "vllm" });
  const metrics = new PromProxyMetrics();
  proxy = await startProxy({
    engine: "vllm",
    engineUrl: engine.url,
    modelServed: MODEL,
    logger: quiet,
    healthIntervalMs: 0,
    metrics,
  });
  registry = new Registry();
  metrics.register(registry, () => proxy.status());
  registerProcessMetrics(registry);
  sessionId = "metrics-1";
  key = proxy.openSession(sessionId).key;
  const openai = new OpenAI({ apiKey: key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
  const ask: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 2 + 3?" }];
  await openai.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 16 });
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: ask,
    max_tokens: 16,
    stream: true,
  });
  for await (const _ of stream);
  const anthropic = new Anthropic({ apiKey: key, baseURL: proxy.url, maxRetries: 0 });
  await anthropic.messages.create({
    model: MODEL,
    max_tokens: 16,
    messages: [{ role: "user", content: "Hi" }],
  });
  // A key the proxy never issued: refused with 401, counted as an error of its kind.
  const wrong = new OpenAI({ apiKey: "sk-polar-nope", baseURL: `${proxy.url}/v1`, maxRetries: 0 });
  await expect(wrong.chat.completions.create({ model: MODEL, messages: ask })).rejects.toThrow();
  // Loading the sim's tokenizer on a loaded machine can take most of the default 10 s hook limit.
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await engine?.close();
});

describe("proxy metrics", () => {
  it("counts requests by API family and HTTP status", async () => {
    const text = await scrape();
    expect(sampleValues(text, "polar_proxy_requests_total")).toEqual({
      '{api="openai_chat",status="200"}': 2,
      '{api="anthropic",status="200"}': 1,
      '{api="openai_chat",status="401"}': 1,
    });
    expect(sampleValues(text, "polar_proxy_errors_total")).toEqual({ '{kind="invalid_api_key"}': 1 });
  });

  it("counts prompt and sampled tokens equal to the recorded calls' ids", async () => {
    const records = proxy.completions(sessionId);
    expect(records).toHaveLength(3);
    const text = await scrape();
    const sum = (f: (r: (typeof records)[number]) => number) => records.reduce((n, r) => n + f(r), 0);
    expect(sampleSum(text, "polar_proxy_prompt_tokens_total")).toBe(sum((r) => r.prompt_ids.length));
    expect(sampleSum(text, "polar_proxy_response_tokens_total")).toBe(sum((r) => r.response_ids.length));
    expect(sampleSum(text, "polar_proxy_response_tokens_total", { api: "anthropic" })).toBe(
      records.find((r) => r.api_type === "anthropic")!.response_ids.length,
    );
    expect(sampleSum(text, "polar_proxy_response_tokens_total")).toBeGreaterThan(0);
  });

  it("observes every call's engine time, and the first token of the streamed one", async () => {
    const text = await scrape();
    expect(sampleValues(text, "polar_proxy_engine_call_seconds_count")).toEqual({ '{engine="vllm"}': 3 });
    const sumSeconds = sampleSum(text, "polar_proxy_engine_call_seconds_sum");
    const recorded = proxy.completions(sessionId).reduce((n, r) => n + r.latency_ms / 1000, 0);
    expect(sumSeconds).toBeCloseTo(recorded, 6);
    expect(sampleValues(text, "polar_proxy_engine_first_token_seconds_count")).toEqual({
      '{engine="vllm"}': 1,
    });
  });

  it("shows the fence: paused, policy version, calls in flight", async () => {
    proxy.setPolicyVersion("v3");
    await proxy.pause({ timeoutMs: 1000 });
    let text = await scrape();
    expect(sampleValues(text, "polar_proxy_paused")).toEqual({ "{}": 1 });
    expect(sampleValues(text, "polar_proxy_policy_version_info")).toEqual({ '{policy_version="v3"}': 1 });
    expect(sampleValues(text, "polar_proxy_calls")).toEqual({
      '{state="inflight"}': 0,
      '{state="waiting"}': 0,
    });
    expect(sampleValues(text, "polar_proxy_replica_healthy")).toEqual({ [`{replica="${engine.url}"}`]: 1 });
    proxy.resume();
    proxy.setPolicyVersion("v4");
    text = await scrape();
    expect(sampleValues(text, "polar_proxy_paused")).toEqual({ "{}": 0 });
    // The old version's sample is gone, not left beside the new one.
    expect(sampleValues(text, "polar_proxy_policy_version_info")).toEqual({ '{policy_version="v4"}': 1 });
  });

  it("counts an unreachable engine as engine_unreachable, answered 502", async () => {
    const metrics = new PromProxyMetrics();
    const down = await startProxy({
      engine: "vllm",
      engineUrl: "http://127.0.0.1:9",
      modelServed: MODEL,
      logger: quiet,
      healthIntervalMs: 0,
      engineRetryMs: 0,
      metrics,
    });
    try {
      const r = new Registry();
      metrics.register(r, () => down.status());
      const { key: k } = down.openSession("down-1");
      const client = new OpenAI({ apiKey: k, baseURL: `${down.url}/v1`, maxRetries: 0 });
      await expect(
        client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "x" }] }),
      ).rejects.toThrow();
      const text = await r.metrics();
      expect(sampleValues(text, "polar_proxy_errors_total")).toEqual({ '{kind="engine_unreachable"}': 1 });
      expect(sampleValues(text, "polar_proxy_requests_total")).toEqual({
        '{api="openai_chat",status="502"}': 1,
      });
    } finally {
      await down.close();
    }
  });

  itWith(["promtool"], "passes promtool check metrics, process collectors included", async () => {
    const text = await scrape();
    expect(text).toContain("# TYPE process_cpu_user_seconds_total counter");
    expect(text).toContain("# TYPE nodejs_active_handles gauge");
    // prom-client's gauges named *_total are dropped: promtool refuses a gauge with that suffix.
    expect(text).not.toContain("nodejs_active_handles_total");
    expect(promtoolProblems(text)).toBe("");
  });
});

describe("replica families", () => {
  it("show a busy replica and the aborts a router could only take by disconnect", async () => {
    const r = new Registry();
    const fence = {
      paused: false,
      inflight: 0,
      waiting: 0,
      policy_version: null,
      aborted_calls: 0,
      reissued_calls: 0,
    };
    const replica = { inflight: 1, completions: 0, failures: 0, last_error: null, weight_version: null };
    new PromProxyMetrics().register(
      r,
      () =>
        ({
          ...fence,
          replicas: [
            { ...replica, url: "http://w1:1", healthy: true, busy: true, source: "worker" },
            {
              ...replica,
              url: "http://router:1",
              healthy: true,
              source: "router",
              aborts: "disconnect",
              aborts_by_disconnect: 3,
            },
          ],
        }) as never,
    );
    const text = await r.metrics();
    expect(sampleValues(text, "polar_proxy_replica_busy")).toEqual({
      '{replica="http://w1:1"}': 1,
      '{replica="http://router:1"}': 0,
    });
    expect(sampleValues(text, "polar_proxy_replica_aborts_by_disconnect_total")).toEqual({
      '{replica="http://router:1"}': 3,
    });
  });
});
