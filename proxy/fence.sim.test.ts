/**
 * The proxy's weight-update fence against the simulated engine: `drain` waits for a call in flight,
 * `abort` aborts it at the engine (token mode and SGLang's chat endpoint by `/abort_request` with
 * the proxy's rid, vLLM by cutting the request) and the harness still gets its answer after
 * resume; a stream that already sent bytes ends with an error instead. Every record carries the
 * policy version it was admitted under and the weight versions it started and ended with.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI, { APIUserAbortError } from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { CompletionRecord, type Logger } from "../protocol";
import { type SimEngineHandle, type SimEngineOptions, startSimEngine } from "../sim/server";
import { getBuilder } from "./builders";
import type { SessionOptions } from "./capture";
import type { EngineName } from "./engines";
import { NO_PROXY_METRICS, type RequestEvent } from "./metrics";
import { type RecordingProxy, startProxy } from "./server";
import { IM_END, startGenerateDouble } from "./testing/generate-double";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function sim(opts: SimEngineOptions): Promise<SimEngineHandle> {
  const s = await startSimEngine({ model: MODEL, ...opts });
  cleanups.push(() => s.close());
  return s;
}

/**
 * A pass-through in front of `target` that counts the `/model_info` requests it forwards: the
 * proxy's version re-checks, a positive signal that a held call was looked at again.
 */
async function countingModelInfo(target: string): Promise<{ url: string; modelInfo: () => number }> {
  let count = 0;
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith("/model_info")) count += 1;
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
      fetch(`${target}${req.url}`, {
        method: req.method,
        headers: { "content-type": req.headers["content-type"] ?? "application/json" },
        ...(body && req.method !== "GET" ? { body } : {}),
      })
        .then(async (answer) => {
          res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "" });
          res.end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, modelInfo: () => count };
}

async function proxyFor(
  engine: EngineName,
  urls: string[],
  extra: { policyVersionWaitMs?: number; partialRollouts?: boolean; logger?: Logger } = {},
): Promise<RecordingProxy> {
  const p = await startProxy({
    engine,
    engineUrls: urls,
    modelServed: MODEL,
    logger: quiet,
    healthIntervalMs: 0,
    ...extra,
  });
  cleanups.push(() => p.close());
  return p;
}

let n = 0;
function session(p: RecordingProxy, meta: Record<string, unknown> = {}, opts: SessionOptions = {}) {
  const id = `fence-${++n}`;
  const { key } = p.openSession(id, meta, opts);
  return { id, key, openai: new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 }) };
}

async function stats(
  s: SimEngineHandle,
): Promise<{ running: number; requests_total: number; aborted_total: number }> {
  return (await (await fetch(`${s.url}/sim/stats`)).json()) as never;
}

async function updateWeights(s: SimEngineHandle, version: string): Promise<void> {
  const res = await fetch(`${s.url}/update_weights_from_disk`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model_path: "/ckpt", weight_version: version }),
  });
  expect(res.status).toBe(200);
}

const ask: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 2 + 3?" }];
const records = (p: RecordingProxy, id: string) => p.completions(id).map((r) => CompletionRecord.parse(r));

describe("drain", { timeout: 30_000 }, () => {
  it("waits for the call in flight, which keeps the version it was admitted under", async () => {
    // Every generation holds its slot for 1.5 s: a turn of known length.
    const engine = await sim({ faults: { stallRate: 1, stallMs: 1500 } });
    const p = await proxyFor("sglang", [engine.url]);
    p.setPolicyVersion("0");
    const s = session(p);
    const call = s.openai.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(async () => (await stats(engine)).running, { timeout: 5000 }).toBe(1);
    const started = Date.now();
    const paused = await p.pause({ timeoutMs: 10_000, mode: "drain" });
    expect(paused).toEqual({ drained: true, inflight: 0 });
    expect(Date.now() - started).toBeGreaterThan(500);
    const first = (await call).choices[0]!.message;
    expect(first.content).toContain("5");
    await updateWeights(engine, "1");
    p.setPolicyVersion("1");
    p.resume();
    await s.openai.chat.completions.create({
      model: "m",
      messages: [
        ...ask,
        { role: "assistant", content: first.content },
        { role: "user", content: "Are you sure?" },
      ],
    });
    const [before, after] = records(p, s.id);
    // The rule for a session that spans an update: turns admitted before the pause keep the old
    // versions, turns after resume get the new ones.
    expect(before).toMatchObject({
      policy_version: "0",
      weight_version_start: "default",
      weight_version: "default",
    });
    expect(after).toMatchObject({ policy_version: "1", weight_version_start: "1", weight_version: "1" });
    expect(before!.metadata.policy_version).toBe("0");
    expect((await stats(engine)).aborted_total).toBe(0);
    // One trace for the session; each turn's versions and where its sampled tokens are in it.
    const trajectory = getBuilder("conversation")(records(p, s.id), {
      session_id: s.id,
      task_id: "t",
      config: {},
    });
    expect(trajectory.traces).toHaveLength(1);
    const turns = trajectory.traces[0]!.metadata.turns as Array<Record<string, unknown>>;
    expect(turns.map((t) => [t.policy_version, t.weight_version_start, t.weight_version])).toEqual([
      ["0", "default", "default"],
      ["1", "1", "1"],
    ]);
    const trace = trajectory.traces[0]!;
    for (const [i, t] of turns.entries()) {
      const rec = records(p, s.id)[i]!;
      const start = t.sampled_start as number;
      expect(trace.response_ids.slice(start, start + (t.sampled_len as number))).toEqual(rec.response_ids);
    }
  });
});

describe("abort", { timeout: 30_000 }, () => {
  for (const engineName of ["sglang", "sglang-openai"] as const) {
    it(`${engineName}: aborts the call at the engine, then serves it again after resume, unseen by the harness`, async () => {
      const engine = await sim({ faults: { stallRate: 1, stallMs: 3000 } });
      const p = await proxyFor(engineName, [engine.url]);
      p.setPolicyVersion("4");
      const s = session(p);
      const call = s.openai.chat.completions.create({ model: "m", messages: ask });
      await expect.poll(async () => (await stats(engine)).running, { timeout: 5000 }).toBe(1);
      const started = Date.now();
      expect(await p.pause({ timeoutMs: 10_000, mode: "abort" })).toEqual({ drained: true, inflight: 0 });
      // Well before the 3 s generation would have ended: it was aborted, not drained.
      expect(Date.now() - started).toBeLessThan(2500);
      expect(await stats(engine)).toMatchObject({ running: 0, aborted_total: 1 });
      expect(p.status()).toMatchObject({ paused: true, mode: "abort", waiting: 1, aborted_calls: 1 });
      p.setPolicyVersion("5");
      p.resume();
      const answer = await call;
      expect(answer.choices[0]!.message.content).toContain("5");
      expect(p.status()).toMatchObject({ paused: false, reissued_calls: 1 });
      expect((await stats(engine)).requests_total).toBe(2);
      // Only the call that answered is recorded, under the version after resume.
      const recs = records(p, s.id);
      expect(recs).toHaveLength(1);
      expect(recs[0]).toMatchObject({ policy_version: "5", finish_reason: "stop" });
    });
  }

  it("token mode names the aborted generation by its rid in /abort_request", async () => {
    const engine = await startGenerateDouble();
    cleanups.push(() => engine.close());
    engine.queue.push({ output: [17453, 13, 151645], delayMs: 5_000 });
    const p = await proxyFor("sglang", [engine.url]);
    const s = session(p);
    const call = s.openai.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(() => engine.generates().length, { timeout: 10_000 }).toBe(1);
    await p.pause({ timeoutMs: 5_000, mode: "abort" });
    const [first] = engine.generates();
    expect(engine.aborted()).toEqual([first!.rid]);
    p.resume();
    await call;
    const generates = engine.generates();
    expect(generates).toHaveLength(2);
    expect(generates[1]!.rid).not.toBe(first!.rid);
    expect(generates[1]!.input_ids).toEqual(first!.input_ids);
  });

  it("token mode continues an aborted turn: the prompt + the kept ids, a smaller budget, one turn recorded with both versions", async () => {
    const engine = await startGenerateDouble();
    cleanups.push(() => engine.close());
    // " fish" + "ing" … sampled before the abort, the rest after: a split the encoder would not make.
    engine.queue.push({
      output: [40, 728, 7640, 287, IM_END],
      delayMs: 5_000,
      abortedOutput: [40, 728, 7640],
    });
    engine.queue.push({ output: [287, IM_END] });
    const p = await proxyFor("sglang", [engine.url]);
    p.setPolicyVersion("4");
    const s = session(p);
    const call = s.openai.chat.completions.create({ model: "m", messages: ask, max_tokens: 100 });
    await expect.poll(() => engine.generates().length, { timeout: 10_000 }).toBe(1);
    await p.pause({ timeoutMs: 5_000, mode: "abort" });
    p.setPolicyVersion("5");
    p.resume();
    const answer = await call;
    expect(answer.choices[0]!.message.content).toBe("I go fishing");
    const [first, second] = engine.generates();
    expect(second!.input_ids).toEqual([...(first!.input_ids as number[]), 40, 728, 7640]);
    expect(second!.sampling_params).toMatchObject({ max_new_tokens: 97 });
    expect(second!.rid).not.toBe(first!.rid);
    const recs = records(p, s.id);
    expect(recs).toHaveLength(1);
    expect(recs[0]).toMatchObject({
      prompt_ids: first!.input_ids,
      response_ids: [40, 728, 7640, 287, IM_END],
      policy_version: "4",
      finish_reason: "stop",
    });
    expect(recs[0]!.response_logprobs).toHaveLength(5);
    expect(recs[0]!.metadata.partial_rollout).toEqual({
      segments: [
        {
          len: 3,
          policy_version: "4",
          weight_version_start: "w-double",
          weight_version: "w-double",
          rid: first!.rid,
        },
        {
          len: 2,
          policy_version: "5",
          weight_version_start: "w-double",
          weight_version: "w-double",
          rid: second!.rid,
        },
      ],
    });
    // The builders hand the stretches on: the trainer gives each token its own version.
    const trace = getBuilder("conversation")(p.completions(s.id), {
      session_id: s.id,
      task_id: "t",
      config: {},
    }).traces[0]!;
    expect((trace.metadata.turns as Array<Record<string, unknown>>)[0]!.version_segments).toEqual([
      { len: 3, policy_version: "4", weight_version_start: "w-double", weight_version: "w-double" },
      { len: 2, policy_version: "5", weight_version_start: "w-double", weight_version: "w-double" },
    ]);
  });

  it("without partial rollouts the aborted turn is issued again from its start", async () => {
    const engine = await startGenerateDouble();
    cleanups.push(() => engine.close());
    engine.queue.push({
      output: [40, 728, 7640, 287, IM_END],
      delayMs: 5_000,
      abortedOutput: [40, 728, 7640],
    });
    const p = await proxyFor("sglang", [engine.url], { partialRollouts: false });
    const s = session(p);
    const call = s.openai.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(() => engine.generates().length, { timeout: 10_000 }).toBe(1);
    await p.pause({ timeoutMs: 5_000, mode: "abort" });
    p.resume();
    await call;
    const [first, second] = engine.generates();
    expect(second!.input_ids).toEqual(first!.input_ids);
    expect(records(p, s.id)[0]!.metadata).not.toHaveProperty("partial_rollout");
  });

  it("the simulated engine continues what it sampled: the turn equals the one an uninterrupted call gets", async () => {
    // 10 tokens/s: a turn of a few seconds, cut after its first tokens.
    const engine = await sim({ decodeTokensPerSecond: 10, seed: 2 });
    const p = await proxyFor("sglang", [engine.url]);
    p.setPolicyVersion("1");
    // The simulator's draws are seeded by the routing key, the session id: the same session id
    // opened again samples the same turn, so the uninterrupted run is the reference.
    const uninterrupted = session(p);
    const whole = await uninterrupted.openai.chat.completions.create({ model: "m", messages: ask });
    const reference = records(p, uninterrupted.id)[0]!;
    await p.closeSession(uninterrupted.id);
    const { key } = p.openSession(uninterrupted.id, {});
    const cut = {
      id: uninterrupted.id,
      openai: new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 }),
    };
    const call = cut.openai.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(async () => (await stats(engine)).running, { timeout: 5000 }).toBe(1);
    await new Promise((r) => setTimeout(r, 400)); // a few tokens in (not what the test decides on)
    await p.pause({ timeoutMs: 10_000, mode: "abort" });
    await updateWeights(engine, "2");
    p.setPolicyVersion("2");
    p.resume();
    const answer = await call;
    const [rec] = records(p, cut.id);
    const segments = rec!.metadata.partial_rollout as {
      segments: Array<{ len: number; policy_version: string }>;
    };
    expect(segments.segments.map((x) => x.policy_version)).toEqual(["1", "2"]);
    expect(segments.segments[0]!.len).toBeGreaterThan(0);
    expect(answer.choices[0]!.message.content).toBe(whole.choices[0]!.message.content);
    expect(rec!.response_ids).toEqual(reference.response_ids);
    expect(rec!.response_ids.length).toBe(segments.segments.reduce((n, x) => n + x.len, 0));
  });

  it("vllm: cutting the request aborts it at the engine; the call is served again after resume", async () => {
    const engine = await sim({ flavor: "vllm", decodeTokensPerSecond: 8 });
    const p = await proxyFor("vllm", [engine.url]);
    const s = session(p);
    const call = s.openai.chat.completions.create({ model: "m", messages: ask });
    await expect.poll(async () => (await stats(engine)).running, { timeout: 5000 }).toBe(1);
    expect(await p.pause({ timeoutMs: 5_000, mode: "abort" })).toEqual({ drained: true, inflight: 0 });
    await expect.poll(async () => (await stats(engine)).aborted_total, { timeout: 10_000 }).toBe(1);
    p.resume();
    expect((await call).choices[0]!.message.content).toBeTruthy();
    expect(records(p, s.id)).toHaveLength(1);
  });

  it("a real stream that already sent bytes to the harness ends with an error event instead", async () => {
    // A vLLM-shaped engine that streams one chunk with its token ids, then keeps generating.
    let cut = false;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const chunk = {
          id: "chatcmpl-1",
          created: 0,
          model: MODEL,
          prompt_token_ids: [1, 2, 3],
          choices: [{ index: 0, delta: { role: "assistant", content: "Thinking" }, token_ids: [9707] }],
        };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        res.on("close", () => {
          cut = true;
        });
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    cleanups.push(
      () =>
        new Promise<void>((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
    );
    const p = await proxyFor("vllm", [`http://127.0.0.1:${(server.address() as AddressInfo).port}`]);
    const s = session(p);
    const res = await fetch(`${p.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: ask, stream: true }),
    });
    const reader = res.body!.getReader();
    let seen = "";
    while (!seen.includes("Thinking")) seen += new TextDecoder().decode((await reader.read()).value);
    expect(await p.pause({ timeoutMs: 5_000, mode: "abort" })).toEqual({ drained: true, inflight: 0 });
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toMatch(/engine_aborted/);
    await expect.poll(() => cut, { timeout: 10_000 }).toBe(true);
    p.resume();
    expect(records(p, s.id)).toHaveLength(0);
    expect(p.status().reissued_calls).toBe(0);
  });
});

describe("a harness that hangs up while held at a paused fence", { timeout: 30_000 }, () => {
  for (const engineName of ["sglang", "sglang-openai"] as const) {
    it(`${engineName}: the held call is let go: nothing reaches the engine, the fence and the session's slot are freed`, async () => {
      const engine = await sim({});
      const requests: RequestEvent[] = [];
      const errors: string[] = [];
      const p = await startProxy({
        engine: engineName,
        engineUrls: [engine.url],
        modelServed: MODEL,
        logger: quiet,
        healthIntervalMs: 0,
        // One record per session: a slot the hung-up call kept would refuse the next call (429).
        maxRecordsPerSession: 1,
        metrics: { ...NO_PROXY_METRICS, request: (e) => requests.push(e), error: (k) => errors.push(k) },
      });
      cleanups.push(() => p.close());
      p.setPolicyVersion("2");
      const s = session(p);
      expect(await p.pause({ timeoutMs: 1000, mode: "abort" })).toEqual({ drained: true, inflight: 0 });
      const harness = new AbortController();
      const call = s.openai.chat.completions
        .create({ model: "m", messages: ask }, { signal: harness.signal })
        .catch((e: unknown) => e);
      // Held: the fence counts it waiting.
      await expect.poll(() => p.status().waiting, { timeout: 10_000 }).toBe(1);
      harness.abort();
      expect(await call).toBeInstanceOf(APIUserAbortError);
      // The proxy saw the hang-up: the request is counted as 499 with a client_closed error, and
      // the fence holds nothing any more.
      await expect.poll(() => requests, { timeout: 10_000 }).toEqual([{ api: "openai_chat", status: 499 }]);
      expect(errors).toEqual(["client_closed"]);
      expect(p.status()).toMatchObject({
        paused: true,
        inflight: 0,
        waiting: 0,
        aborted_calls: 0,
        reissued_calls: 0,
      });
      p.resume();
      // The next call of the session is served (its slot was given back), and it is the only
      // request the engine ever received and the only record.
      const next = await s.openai.chat.completions.create({ model: "m", messages: ask });
      expect(next.choices[0]!.finish_reason).toBe("stop");
      expect((await stats(engine)).requests_total).toBe(1);
      expect(records(p, s.id)).toHaveLength(1);
      expect(records(p, s.id)[0]).toMatchObject({ policy_version: "2" });
      expect(p.status()).toMatchObject({ paused: false, inflight: 0, waiting: 0, reissued_calls: 0 });
      if (engineName === "sglang") expect(p.bridgeVerdicts(s.id)).toMatchObject({ new_chain: 1 });
      expect(errors).toEqual(["client_closed"]);
    });
  }
});

describe("min_policy_version: replicas updated one at a time", { timeout: 40_000 }, () => {
  it("holds a turn until a replica serves the version, and never sends it to one that does not", async () => {
    const a = await sim({ seed: 1 });
    const b = await sim({ seed: 2 });
    const said: string[] = [];
    const p = await proxyFor("sglang", [a.url, b.url], { logger: { ...quiet, info: (m) => said.push(m) } });
    p.setPolicyVersion("1");
    const s = session(p, { min_policy_version: 1 });
    let answered = false;
    const call = s.openai.chat.completions.create({ model: "m", messages: ask }).then((r) => {
      answered = true;
      return r;
    });
    // Both replicas still serve the initial weights ("default" = version 0): the proxy says it
    // holds the turn (having asked both), and nothing was sent.
    await expect
      .poll(() => said, { timeout: 10_000 })
      .toContain("holding a call: every replica is behind its min_policy_version");
    expect(answered).toBe(false);
    expect((await stats(a)).requests_total + (await stats(b)).requests_total).toBe(0);
    await updateWeights(b, "1");
    await call;
    const [held] = records(p, s.id);
    expect(held).toMatchObject({ replica: b.url, weight_version_start: "1", weight_version: "1" });

    // New groups that need version 1 go to b only while a is behind, whatever round-robin says.
    for (let i = 0; i < 4; i++) {
      const g = session(p, { min_policy_version: 1 });
      await g.openai.chat.completions.create({ model: "m", messages: ask });
      expect(records(p, g.id)[0]!.replica).toBe(b.url);
    }
    expect((await stats(a)).requests_total).toBe(0);
    // A session that needs nothing may use either.
    const free = session(p);
    await free.openai.chat.completions.create({ model: "m", messages: ask });

    // Now a is updated first to version 2: a group needing 2 goes to a, never to b.
    await updateWeights(a, "2");
    for (let i = 0; i < 3; i++) {
      const g = session(p, { min_policy_version: 2 });
      await g.openai.chat.completions.create({ model: "m", messages: ask });
      expect(records(p, g.id)[0]).toMatchObject({ replica: a.url, weight_version: "2" });
    }
  });

  it("a held turn waits through several re-checks, outside the fence, and a replica reaching the version within the bound releases it", async () => {
    const a = await sim({});
    const counted = await countingModelInfo(a.url);
    const p = await proxyFor("sglang-openai", [counted.url], { policyVersionWaitMs: 20_000 });
    const s = session(p, { min_policy_version: 3 });
    const before = counted.modelInfo();
    const call = s.openai.chat.completions.create({ model: "m", messages: ask });
    // The first look and two re-checks of the replica's version, each finding it behind.
    await expect.poll(() => counted.modelInfo() - before, { timeout: 15_000 }).toBeGreaterThanOrEqual(3);
    // Held outside the fence: a pause drains at once.
    expect(await p.pause({ timeoutMs: 1000 })).toEqual({ drained: true, inflight: 0 });
    await fetch(`${a.url}/update_weight_version`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ new_version: "3" }),
    });
    p.resume();
    await call;
    expect(records(p, s.id)[0]).toMatchObject({ weight_version_start: "3", weight_version: "3" });
    expect(p.policyVersionGap(s.id)).toBeNull();
  });

  it("past policyVersionWaitMs the held turn fails with 400 policy_version_unavailable naming the gap, and the session is over", async () => {
    const a = await sim({});
    const p = await proxyFor("sglang-openai", [a.url], { policyVersionWaitMs: 1500 });
    const told: unknown[] = [];
    const s = session(p, { min_policy_version: 3 }, { onPolicyVersionGap: (gap) => told.push(gap) });
    const started = Date.now();
    const err = await s.openai.chat.completions.create({ model: "m", messages: ask }).catch((e) => e);
    const took = Date.now() - started;
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({
      status: 400,
      code: "policy_version_unavailable",
      param: "min_policy_version",
    });
    expect(err.message).toContain(
      `min_policy_version: needs policy version 3; replicas report 0 (${a.url}: "default"); held `,
    );
    expect(err.message).toMatch(/; held \d+(\.\d)? s \(bound 1\.5 s\)$/);
    expect(took).toBeGreaterThanOrEqual(1400);
    expect(took).toBeLessThan(4000);
    expect(told).toEqual([
      {
        needed: 3,
        reported: [{ url: a.url, weight_version: "default" }],
        held_ms: expect.any(Number),
        wait_ms: 1500,
      },
    ]);
    expect(p.policyVersionGap(s.id)).toMatchObject({ needed: 3 });
    // Its later calls, in any family, get the same answer at once (in that family's error shape).
    const again = Date.now();
    const res = await fetch(`${p.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": s.key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "m", max_tokens: 16, messages: ask }),
    });
    expect(Date.now() - again).toBeLessThan(1000);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { type: string; error: { type: string; message: string } };
    expect(body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(body.error.message).toContain("needs policy version 3");
    expect(told).toHaveLength(1);
    expect((await stats(a)).requests_total).toBe(0);
  });

  it("time at a paused fence does not count against the bound", async () => {
    const a = await sim({});
    const p = await proxyFor("sglang-openai", [a.url], { policyVersionWaitMs: 1500 });
    const s = session(p, { min_policy_version: 3 });
    let failedAt = 0;
    const call = s.openai.chat.completions.create({ model: "m", messages: ask }).catch((e) => {
      failedAt = Date.now();
      return e;
    });
    await new Promise((r) => setTimeout(r, 500));
    await p.pause({ timeoutMs: 1000 });
    // Paused for longer than the whole bound: the held turn is still waiting.
    await new Promise((r) => setTimeout(r, 2000));
    expect(failedAt).toBe(0);
    const resumedAt = Date.now();
    p.resume();
    const err = await call;
    expect(err).toMatchObject({ status: 400, code: "policy_version_unavailable" });
    // About 0.5 s was held before the pause: the rest of the bound (~1 s) runs after resume.
    expect(failedAt - resumedAt).toBeGreaterThanOrEqual(800);
    expect(p.policyVersionGap(s.id)?.held_ms).toBeGreaterThanOrEqual(1500);
  });
});
