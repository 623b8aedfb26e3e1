/**
 * Engines other than the default, replicas, the router, the weight-update fence, persistence and
 * the standalone session API — all against real simulated engines on loopback.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, Trajectory } from "../protocol";
import { startSimRouter } from "../sim/router";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { abortRequest } from "./admission";
import { ReplicaSet } from "./replicas";
import { type RecordingProxy, startProxy } from "./server";
import { startFixtureEngine } from "./testing/fixture-engine";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const ask = [{ role: "user" as const, content: "What is 12 + 30?" }];

let sglangA: SimEngineHandle;
let sglangB: SimEngineHandle;
let vllm: SimEngineHandle;
let patched: SimEngineHandle;
let slow: SimEngineHandle;
let down1: SimEngineHandle;
let down2: SimEngineHandle;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  [sglangA, sglangB, vllm, patched, slow, down1, down2] = await Promise.all([
    startSimEngine({ model: MODEL }),
    startSimEngine({ model: MODEL }),
    startSimEngine({ model: MODEL, flavor: "vllm" }),
    startSimEngine({ model: MODEL, flavor: "sglang-0.5.10-patched" }),
    startSimEngine({ model: MODEL, decodeTokensPerSecond: 150 }),
    // Every generation answered 503, as an overloaded or restarting SGLang does; /health says 200.
    startSimEngine({ model: MODEL, faults: { errorRate: 1 } }),
    startSimEngine({ model: MODEL, faults: { errorRate: 1 } }),
  ]);
}, 60_000);
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await Promise.all([sglangA, sglangB, vllm, patched, slow, down1, down2].map((s) => s.close()));
});

async function proxyFor(opts: Partial<Parameters<typeof startProxy>[0]>): Promise<RecordingProxy> {
  const p = await startProxy({
    engine: "sglang-openai",
    modelServed: MODEL,
    logger: quiet,
    healthIntervalMs: 0,
    ...opts,
  });
  cleanups.push(() => p.close());
  return p;
}

function client(p: RecordingProxy, id: string): OpenAI {
  return new OpenAI({ apiKey: p.openSession(id).key, baseURL: `${p.url}/v1`, maxRetries: 0 });
}

describe("engines", () => {
  it("vllm: streams for real and records the ids the engine streamed", async () => {
    const p = await proxyFor({ engine: "vllm", engineUrl: vllm.url });
    const c = client(p, "v1");
    const stream = await c.chat.completions.create({ model: "m", messages: ask, stream: true });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(chunks).toBeGreaterThan(4);
    const [rec] = p.completions("v1").map((r) => CompletionRecord.parse(r));
    expect(rec!.metadata).toMatchObject({ engine_stream: true, client_stream: true });
    expect(rec!.request).toMatchObject({ stream: true, return_token_ids: true, top_logprobs: 0 });
    // The same call non-streamed, straight to the engine with the same routing key: same tokens.
    const direct = (await (
      await fetch(`${vllm.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-smg-routing-key": "v1" },
        body: JSON.stringify({
          model: MODEL,
          messages: ask,
          logprobs: true,
          top_logprobs: 0,
          return_token_ids: true,
        }),
      })
    ).json()) as {
      prompt_token_ids: number[];
      choices: Array<{ token_ids: number[]; message: { content: string } }>;
    };
    expect(rec!.prompt_ids).toEqual(direct.prompt_token_ids);
    expect(rec!.response_ids).toEqual(direct.choices[0]!.token_ids);
    expect(rec!.response_logprobs).toHaveLength(rec!.response_ids.length);
    expect(text).toBe(direct.choices[0]!.message.content);
  });

  it("vllm: keeps earlier reasoning by sending it as `reasoning`", async () => {
    const p = await proxyFor({ engine: "vllm", engineUrl: vllm.url });
    const c = client(p, "v2");
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "calculator",
          parameters: { type: "object", properties: { expression: { type: "string" } } },
        },
      },
    ];
    const first = await c.chat.completions.create({ model: "m", messages: ask, tools });
    const msg = first.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(msg.reasoning_content?.length).toBeGreaterThan(0);
    const call = msg.tool_calls![0]!;
    const next = (withReasoning: boolean) =>
      c.chat.completions.create({
        model: "m",
        tools,
        messages: [
          ...ask,
          {
            role: "assistant",
            content: msg.content,
            tool_calls: msg.tool_calls,
            ...(withReasoning ? { reasoning_content: msg.reasoning_content } : {}),
          } as never,
          { role: "tool", tool_call_id: call.id, content: "42" },
        ],
      });
    await next(true);
    await next(false);
    const [, withIt, without] = p.completions("v2");
    expect((withIt!.request.messages as Array<Record<string, unknown>>)[1]!.reasoning).toBe(
      msg.reasoning_content,
    );
    // The template rendered the reasoning of the turn after the last user query: more prompt tokens.
    expect(withIt!.prompt_ids.length).toBeGreaterThan(without!.prompt_ids.length + 5);
  });

  it("sglang-openai: records the patched 0.5.10 shape", async () => {
    const p = await proxyFor({ engineUrl: patched.url });
    await client(p, "p1").chat.completions.create({ model: "m", messages: ask });
    const [rec] = p.completions("p1");
    expect(rec!.prompt_ids.length).toBeGreaterThan(5);
    expect(rec!.response_logprobs).toHaveLength(rec!.response_ids.length);
    expect(rec!.weight_version).toBeNull();
  });
});

describe("replicas", () => {
  it("keeps a session on its replica and spreads sessions round-robin", async () => {
    const p = await proxyFor({ engineUrls: [sglangA.url, sglangB.url] });
    for (const id of ["a1", "a2"]) {
      const c = client(p, id);
      for (let i = 0; i < 3; i++) await c.chat.completions.create({ model: "m", messages: ask });
    }
    const a1 = new Set(p.completions("a1").map((r) => r.replica));
    const a2 = new Set(p.completions("a2").map((r) => r.replica));
    expect(a1.size).toBe(1);
    expect(a2.size).toBe(1);
    expect([...a1, ...a2].sort()).toEqual([sglangA.url, sglangB.url].sort());
    expect(p.status().replicas.map((r) => r.completions)).toEqual([3, 3]);
  });

  it("skips a dead replica and retries the call on a live one", async () => {
    const dead = await startSimEngine({ model: MODEL });
    const deadUrl = dead.url;
    await dead.close();
    const p = await proxyFor({ engineUrls: [deadUrl, sglangA.url] });
    const c = client(p, "f1");
    await c.chat.completions.create({ model: "m", messages: ask });
    await c.chat.completions.create({ model: "m", messages: ask });
    expect(p.completions("f1").map((r) => r.replica)).toEqual([sglangA.url, sglangA.url]);
    const status = p.status().replicas;
    expect(status.find((r) => r.url === deadUrl)).toMatchObject({ healthy: false, failures: 1 });
  });

  it("retries a 503 on another replica and records the replica that answered (token mode)", async () => {
    const p = await proxyFor({ engine: "sglang", engineUrls: [down1.url, sglangA.url] });
    const c = client(p, "u1");
    const r = await c.chat.completions.create({ model: "m", messages: ask });
    expect(r.choices[0]!.message.content).toMatch(/42/);
    const [rec] = p.completions("u1");
    expect(rec!.replica).toBe(sglangA.url);
    expect(p.completions("u1")).toHaveLength(1);
    const status = p.status().replicas;
    expect(status.find((x) => x.url === down1.url)).toMatchObject({
      healthy: false,
      failures: 1,
      completions: 0,
      last_error: "HTTP 503",
    });
    expect(status.find((x) => x.url === sglangA.url)).toMatchObject({ healthy: true, completions: 1 });
  });

  it("moves the session's affinity to the replica that answered a retried 503", async () => {
    const flaky = await startFixtureEngine({ model: MODEL });
    cleanups.push(() => flaky.close());
    const p = await proxyFor({ engineUrls: [flaky.url, sglangB.url], unavailableCooldownMs: 1 });
    const c = client(p, "u2");
    await c.chat.completions.create({ model: "m", messages: ask });
    flaky.behaviour = { status: 503 };
    await c.chat.completions.create({ model: "m", messages: ask });
    flaky.behaviour = {};
    // The cool-down is over and the flaky replica answers again: the session stays where it moved.
    await new Promise((r) => setTimeout(r, 20));
    await c.chat.completions.create({ model: "m", messages: ask });
    expect(p.completions("u2").map((r) => r.replica)).toEqual([flaky.url, sglangB.url, sglangB.url]);
    expect(flaky.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(2);
    // A new session may use the recovered replica again.
    expect(p.status().replicas.find((x) => x.url === flaky.url)).toMatchObject({ healthy: true });
  });

  it("passes the 503 through in the family's shape when every replica answers 503", async () => {
    // One round of replicas (no retry budget): the failure reaches the harness at once.
    const p = await proxyFor({ engine: "sglang", engineUrls: [down1.url, down2.url], engineRetryMs: 0 });
    const openai = client(p, "u3");
    const err = await openai.chat.completions.create({ model: "m", messages: ask }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect(p.completions("u3")).toHaveLength(0);
    // The harness acted on a failure no model gave: the session is tainted (the gateway ends it as infra).
    expect(p.engineFailure("u3")).toBe("engine answered HTTP 503");
    expect(p.status().replicas.map((r) => [r.failures, r.completions])).toEqual([
      [1, 0],
      [1, 0],
    ]);

    const anthropic = new Anthropic({ apiKey: p.openSession("u4").key, baseURL: p.url, maxRetries: 0 });
    const aErr = await anthropic.messages
      .create({ model: "claude-x", max_tokens: 64, messages: ask })
      .catch((e) => e);
    expect(aErr).toBeInstanceOf(Anthropic.APIError);
    expect((aErr as InstanceType<typeof Anthropic.APIError>).status).toBe(503);
    expect((aErr as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: "error",
      error: { type: expect.any(String), message: expect.stringMatching(/unavailable/) },
    });
    expect(p.completions("u4")).toHaveLength(0);
    // Each replica tried once per call, never twice.
    expect(p.status().replicas.map((r) => r.failures)).toEqual([2, 2]);
  });

  it("retries rounds of unavailable replicas with backoff: a short outage never reaches the harness", async () => {
    const flaky = await startFixtureEngine({ model: MODEL });
    cleanups.push(() => flaky.close());
    flaky.behaviour = { status: 503 };
    const p = await proxyFor({ engineUrls: [flaky.url], engineRetryMs: 20_000 });
    const call = client(p, "r1").chat.completions.create({ model: "m", messages: ask });
    // The engine comes back after it refused the call twice (two rounds: 0.5 s, then 1 s apart).
    await expect.poll(() => flaky.received.length, { timeout: 10_000 }).toBe(2);
    flaky.behaviour = {};
    const answer = await call;
    expect(answer.choices[0]!.message.content).toBeTruthy();
    expect(flaky.received).toHaveLength(3);
    // Backoff: the rounds came at least 0.5 s, then at least 1 s, apart (a busy machine only adds).
    const [first, second, third] = flaky.received.map((r) => r.at);
    expect(second! - first!).toBeGreaterThanOrEqual(450);
    expect(third! - second!).toBeGreaterThanOrEqual(900);
    expect(p.completions("r1")).toHaveLength(1);
    expect(p.engineFailure("r1")).toBeNull();
  });

  it("an outage longer than engineRetryMs reaches the harness and taints the session", async () => {
    const p = await proxyFor({ engine: "sglang", engineUrls: [down1.url], engineRetryMs: 1_200 });
    const err = await client(p, "r2")
      .chat.completions.create({ model: "m", messages: ask })
      .catch((e) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    // Rounds at 0, 0.5 s and 1.5 s would pass the budget: 0 and 0.5 s, then 1.2 s (what is left).
    expect(p.status().replicas[0]!.failures).toBeGreaterThanOrEqual(2);
    expect(p.engineFailure("r2")).toBe("engine answered HTTP 503");
  });

  it("does not retry a 400", async () => {
    const refusing = await startFixtureEngine({ model: MODEL });
    cleanups.push(() => refusing.close());
    refusing.behaviour = { status: 400 };
    const p = await proxyFor({ engineUrls: [refusing.url, sglangB.url] });
    const before = p.status().replicas.find((x) => x.url === sglangB.url)!;
    const err = await client(p, "u5")
      .chat.completions.create({ model: "m", messages: ask })
      .catch((e) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
    expect(refusing.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(1);
    expect(p.completions("u5")).toHaveLength(0);
    const after = p.status().replicas;
    expect(after.find((x) => x.url === sglangB.url)).toEqual(before);
    expect(after.find((x) => x.url === refusing.url)).toMatchObject({
      healthy: true,
      failures: 0,
      completions: 0,
    });
  });

  it("retries a 503 before a real stream starts (vllm)", async () => {
    const vllmDown = await startSimEngine({ model: MODEL, flavor: "vllm", faults: { errorRate: 1 } });
    cleanups.push(() => vllmDown.close());
    const p = await proxyFor({ engine: "vllm", engineUrls: [vllmDown.url, vllm.url] });
    const stream = await client(p, "u6").chat.completions.create({
      model: "m",
      messages: ask,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toMatch(/42/);
    const [rec] = p.completions("u6");
    expect(rec).toMatchObject({ replica: vllm.url, metadata: { engine_stream: true } });
  });

  it("discovers SGLang router workers and calls them directly", async () => {
    const router = await startSimRouter({ workers: [sglangA.url, sglangB.url] });
    cleanups.push(() => router.close());
    const p = await proxyFor({ routerUrl: router.url });
    expect(p.status().replicas.map((r) => [r.url, r.source])).toEqual([
      [sglangA.url, "worker"],
      [sglangB.url, "worker"],
    ]);
    await client(p, "r1").chat.completions.create({ model: "m", messages: ask });
    expect(p.completions("r1")).toHaveLength(1);
    expect(router.forwarded.size).toBe(0);
  });
});

/** A recording pass-through in front of a sim engine: the bodies of the `/generate` calls it saw. */
async function spyOn(target: string): Promise<{ url: string; generated: Array<Record<string, unknown>> }> {
  const generated: Array<Record<string, unknown>> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      if (req.url === "/generate")
        generated.push(JSON.parse(body.toString("utf8")) as Record<string, unknown>);
      const r = await fetch(`${target}${req.url}`, {
        method: req.method ?? "GET",
        headers: { "content-type": "application/json" },
        ...(req.method === "POST" ? { body } : {}),
      });
      res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
      res.end(Buffer.from(await r.arrayBuffer()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, generated };
}

describe("router discovery", () => {
  it("calls a DP-aware worker (url@rank) at its base URL and keeps each session on one DP rank", async () => {
    const spy = await spyOn(sglangA.url);
    const router = await startSimRouter({ workers: [spy.url], dpSize: 2 });
    cleanups.push(() => router.close());
    const p = await proxyFor({ engine: "sglang", routerUrl: router.url });
    expect(p.status().replicas).toMatchObject([{ url: spy.url, source: "worker", dp_ranks: [0, 1] }]);
    for (const id of ["dp1", "dp2"]) {
      const c = client(p, id);
      for (let i = 0; i < 2; i++) await c.chat.completions.create({ model: "m", messages: ask });
    }
    expect(p.completions("dp1").map((r) => r.replica)).toEqual([spy.url, spy.url]);
    // Each session keeps its rank; the two sessions got different ranks.
    expect(spy.generated.map((b) => b.routed_dp_rank)).toEqual([0, 0, 1, 1]);
    expect(router.forwarded.size).toBe(0);
  });

  it("never calls gRPC workers directly, and calls the router itself when no HTTP worker is left", async () => {
    const mixed = await startSimRouter({ workers: [sglangA.url], grpcWorkers: ["grpc://10.0.0.9:50051"] });
    const grpcOnly = await startSimRouter({ workers: [sglangB.url], connectionMode: "gRPC" });
    cleanups.push(
      () => mixed.close(),
      () => grpcOnly.close(),
    );
    const p1 = await proxyFor({ routerUrl: mixed.url });
    expect(p1.status().replicas.map((r) => [r.url, r.source])).toEqual([[sglangA.url, "worker"]]);
    const said: Array<[string, Record<string, unknown>]> = [];
    const logger = { ...quiet, warn: (m: string, f?: Record<string, unknown>) => said.push([m, f ?? {}]) };
    // Token mode: the router's /generate keeps SGLang's ids (its typed chat path drops them).
    const p2 = await proxyFor({ engine: "sglang", routerUrl: grpcOnly.url, logger });
    expect(p2.status().replicas).toMatchObject([
      {
        url: grpcOnly.url,
        source: "router",
        aborts: "disconnect",
        affinity: expect.stringMatching(/unknown \(default cache_aware\): X-SMG-Routing-Key is ignored/),
      },
    ]);
    // Said at start: the affinity the user gets, and that aborts are by disconnect only.
    expect(said.map(([m]) => m)).toContain("calling the SGLang router itself");
    const [, fields] = said.find(([m]) => m === "calling the SGLang router itself")!;
    expect(String(fields.affinity)).toMatch(/--policy consistent_hashing/);
    expect(String(fields.aborts)).toMatch(/no \/abort_request/);
    await client(p2, "g1").chat.completions.create({ model: "m", messages: ask });
    expect(grpcOnly.forwarded.get(sglangB.url)).toBe(1);

    const honoured = await proxyFor({
      engine: "sglang",
      routerUrl: grpcOnly.url,
      routerPolicy: "consistent_hashing",
    });
    expect(honoured.status().replicas[0]!.affinity).toMatch(/keeps each session on one worker/);
  });

  it("does not post /abort_request to the router (it has none) and counts the abort as by disconnect", async () => {
    const router = await startSimRouter({ workers: [sglangA.url], connectionMode: "gRPC" });
    cleanups.push(() => router.close());
    const set = new ReplicaSet([], { routerUrl: router.url, healthIntervalMs: 0 });
    await set.start();
    await abortRequest(router.url, "rid-1", "s1", set);
    expect(router.notFound).toEqual([]);
    expect(set.status()[0]).toMatchObject({ source: "router", aborts_by_disconnect: 1 });
    // A worker still gets its /abort_request.
    const workers = new ReplicaSet([sglangA.url], { healthIntervalMs: 0 });
    expect(workers.abortByDisconnect(sglangA.url)).toBe(false);
  });
});

/** Resolves once the sim engine at `url` has a request running (it has taken the only slot). */
async function running(url: string): Promise<void> {
  for (;;) {
    const stats = (await (await fetch(`${url}/sim/stats`)).json()) as { running: number };
    if (stats.running > 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("health checks", () => {
  it("does not mark a saturated replica unhealthy while it serves calls", async () => {
    // One running request at a time, 15 tokens/s: SGLang's /health generation queues behind it.
    const busy = await startSimEngine({ model: MODEL, maxRunningRequests: 1, decodeTokensPerSecond: 15 });
    cleanups.push(() => busy.close());
    const set = new ReplicaSet([busy.url], { healthIntervalMs: 0 });
    const end = set.begin(busy.url);
    const long = fetch(`${busy.url}/generate`, {
      method: "POST",
      body: JSON.stringify({ text: "hi", sampling_params: { max_new_tokens: 70, ignore_eos: true } }),
    }).then((r) => r.json());
    await running(busy.url);
    const started = Date.now();
    await set.refresh();
    // The probe waited for the generation ahead of it (well past a 2 s timeout) and passed.
    expect(Date.now() - started).toBeGreaterThan(2_200);
    expect(set.status()[0]).toMatchObject({ healthy: true, last_error: null });
    end({ ok: true });
    await long;
  }, 20_000);

  it("calls a probe that times out while serving busy, an idle timeout down, and a 503 down", async () => {
    const busy = await startSimEngine({ model: MODEL, maxRunningRequests: 1, decodeTokensPerSecond: 20 });
    const answers503 = await startSimEngine({
      model: MODEL,
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      healthCheckTimeoutMs: 200,
    });
    cleanups.push(
      () => busy.close(),
      () => answers503.close(),
    );
    const saturate = (url: string) =>
      fetch(`${url}/generate`, {
        method: "POST",
        body: JSON.stringify({ text: "hi", sampling_params: { max_new_tokens: 30, ignore_eos: true } }),
      }).then((r) => r.json());
    const set = new ReplicaSet([busy.url, answers503.url], { healthIntervalMs: 0, healthTimeoutMs: 400 });
    const ends = [set.begin(busy.url), set.begin(answers503.url)];
    const inFlight = [saturate(busy.url), saturate(answers503.url)];
    await Promise.all([running(busy.url), running(answers503.url)]);
    await set.refresh();
    const [b, d] = set.status();
    expect(b).toMatchObject({ healthy: true, busy: true });
    // SGLang's own verdict (503 after its health timeout) still marks the replica down.
    expect(d).toMatchObject({ healthy: false, last_error: "health check failed" });
    for (const end of ends) end({ ok: true });
    await Promise.all(inFlight);
    // Idle now, and nothing served since: a timed-out probe means down.
    const hang = http.createServer(() => {});
    await new Promise<void>((resolve) => hang.listen(0, "127.0.0.1", resolve));
    const hangUrl = `http://127.0.0.1:${(hang.address() as AddressInfo).port}`;
    const idle = new ReplicaSet([hangUrl], { healthIntervalMs: 0, healthTimeoutMs: 200 });
    await idle.refresh();
    expect(idle.status()[0]).toMatchObject({ healthy: false, last_error: "health check timed out" });
    hang.closeAllConnections();
    hang.close();
  }, 20_000);
});

describe("weight-update fence", () => {
  it("drains in-flight calls, holds new ones while paused, stamps the policy version", async () => {
    const p = await proxyFor({ engineUrl: slow.url });
    p.setPolicyVersion("v1");
    const c = client(p, "w1");
    const inflight = c.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(() => p.status().inflight, { timeout: 10_000 }).toBe(1);
    const short = await p.pause({ timeoutMs: 10 });
    expect(short).toEqual({ drained: false, inflight: 1 });
    const drained = await p.pause({ timeoutMs: 30_000 });
    expect(drained).toEqual({ drained: true, inflight: 0 });
    await inflight;
    const held = c.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(() => p.status().waiting, { timeout: 10_000 }).toBe(1);
    expect(p.completions("w1")).toHaveLength(1);
    p.setPolicyVersion("v2");
    p.resume();
    await held;
    expect(p.completions("w1").map((r) => r.metadata.policy_version)).toEqual(["v1", "v2"]);
    expect(p.status()).toMatchObject({ paused: false, inflight: 0, waiting: 0, policy_version: "v2" });
  });
});

describe("capture and the standalone API", () => {
  it("persists records in the session folder", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "polar-proxy-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const p = await proxyFor({ engineUrl: sglangA.url, captureDir: dir });
    await client(p, "d1").chat.completions.create({ model: "m", messages: ask });
    await p.flush("d1");
    const lines = (await readFile(path.join(dir, "d1", "completions.jsonl"), "utf8")).trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(CompletionRecord.parse(JSON.parse(lines[0]!))).toEqual(p.completions("d1")[0]);
  });

  it("creates sessions, serves records and trajectories, and fences over HTTP", async () => {
    const p = await proxyFor({ engineUrl: sglangA.url, adminToken: "admin-secret" });
    const admin = (method: string, url: string, body?: unknown, token = "admin-secret") =>
      fetch(`${p.url}${url}`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    expect((await admin("POST", "/sessions", {}, "wrong")).status).toBe(401);
    const bad = await admin("POST", "/sessions", { session_id: "../x" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^session_id:/);
    const created = (await (
      await admin("POST", "/sessions", { session_id: "ext-1", meta: { task_id: "t9" } })
    ).json()) as { key: string };
    const c = new OpenAI({ apiKey: created.key, baseURL: `${p.url}/v1`, maxRetries: 0 });
    await c.chat.completions.create({ model: "m", messages: ask });
    const recs = (await (await admin("GET", `/sessions/${created.key}/completions`)).json()) as {
      completions: unknown[];
    };
    expect(recs.completions).toHaveLength(1);
    const traj = Trajectory.parse(
      await (await admin("GET", `/sessions/${created.key}/trajectory?builder=prefix_merging`)).json(),
    );
    expect(traj).toMatchObject({
      status: "COMPLETED",
      metadata: { builder: "prefix_merging", task_id: "t9" },
    });
    // Without ?builder= a chat engine's records get per_request (token mode's default is conversation).
    expect(
      Trajectory.parse(await (await admin("GET", `/sessions/${created.key}/trajectory`)).json()).metadata
        .builder,
    ).toBe("per_request");
    expect((await admin("GET", `/sessions/${created.key}/trajectory?builder=nope`)).status).toBe(400);
    expect(await (await admin("POST", "/admin/inference/pause", { timeout_ms: 1000 })).json()).toEqual({
      drained: true,
      inflight: 0,
    });
    await admin("POST", "/admin/inference/policy_version", { policy_version: "step-3" });
    expect(await (await admin("GET", "/admin/inference/status")).json()).toMatchObject({
      paused: true,
      policy_version: "step-3",
    });
    expect(await (await admin("POST", "/admin/inference/resume")).json()).toMatchObject({ paused: false });
    expect((await admin("DELETE", `/sessions/${created.key}`)).status).toBe(200);
    await expect(c.chat.completions.create({ model: "m", messages: ask })).rejects.toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
  });
});
