/**
 * The simulated GPU and the control endpoints, over real HTTP: queueing with a running-request
 * limit, busy counters, /v1/loads, aborts (rid, abort_all, client disconnect, pause), streaming
 * /generate, /flush_cache, weight versions, tokenize/detokenize, and fault injection.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { starImage } from "../examples/count_stars/stars.mjs";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { nextWeightVersion } from "./control-api";
import { type SimEngineHandle, type SimEngineOptions, startSimEngine } from "./server";

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

let tok: ChatTokenizer;
let sim: SimEngineHandle | undefined;
beforeAll(async () => {
  tok = await loadChatTokenizer();
}, 30_000);
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(opts: SimEngineOptions = {}): Promise<SimEngineHandle> {
  sim = await startSimEngine({ port: 0, seed: 1, ...opts });
  return sim;
}

const prompt = () => tok.render([{ role: "user", content: "What is 12 * 34?" }]);

async function call(path: string, body?: unknown, init: RequestInit = {}) {
  const res = await fetch(`${sim!.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    ...init,
  });
  const text = await res.text();
  let json: Json = text;
  try {
    json = JSON.parse(text);
  } catch {
    // plain-text endpoints (/flush_cache, /metrics)
  }
  return { status: res.status, json };
}

const generate = (extra: Record<string, unknown> = {}, init: RequestInit = {}) =>
  call("/generate", { text: prompt(), sampling_params: { max_new_tokens: 512 }, ...extra }, init);

/** Polls until `check` holds (the sim's state changes as requests arrive; no fixed sleeps). */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition not reached");
}
const loads = async () => (await call("/v1/loads")).json;

describe("the simulated GPU", () => {
  it("queues beyond max running requests and reports loads, busy time and token counters", async () => {
    await start({ decodeTokensPerSecond: 400, maxRunningRequests: 1 });
    const both = Promise.all([generate({ rid: "a" }), generate({ rid: "b" })]);
    await until(async () => {
      const l = await loads();
      return l.num_running_reqs === 1 && l.num_waiting_reqs === 1;
    });
    expect((await loads()).loads).toEqual([{ dp_rank: 0, num_running_reqs: 1, num_waiting_reqs: 1 }]);
    const [a, b] = await both;
    expect(a.json.meta_info.finish_reason.type).toBe("stop");
    const stats = (await call("/sim/stats")).json;
    expect(stats).toMatchObject({
      running: 0,
      waiting: 0,
      max_running_requests: 1,
      requests_total: 2,
      finished_total: 2,
      aborted_total: 0,
      generation_tokens_total: a.json.meta_info.completion_tokens + b.json.meta_info.completion_tokens,
      prompt_tokens_total: a.json.meta_info.prompt_tokens + b.json.meta_info.prompt_tokens,
    });
    expect(stats.busy_seconds).toBeGreaterThan(0);
    expect(stats.queue_seconds_total).toBeGreaterThan(0);
    // One slot: the running-request integral never exceeds the busy time.
    expect(stats.running_request_seconds).toBeLessThanOrEqual(stats.busy_seconds + 1e-9);
    const metrics = (await call("/metrics")).json as string;
    expect(metrics).toMatch(/^sglang:num_running_reqs\{model_name="Qwen\/Qwen3-0\.6B"\} 0$/m);
    expect(metrics).toMatch(/^sglang:generation_tokens_total\{[^}]*\} [1-9]\d*$/m);
  });

  it("streams /generate as cumulative snapshots, or deltas with incremental streaming", async () => {
    for (const incremental of [false, true]) {
      await start({ decodeTokensPerSecond: 2000, incrementalStreaming: incremental });
      const full = (await generate({ rid: "s", return_logprob: true })).json;
      const res = await fetch(`${sim!.url}/generate`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          text: prompt(),
          sampling_params: { max_new_tokens: 512 },
          stream: true,
          return_logprob: true,
          rid: "s",
        }),
      });
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      const events = (await res.text())
        .split("\n\n")
        .filter(Boolean)
        .map((e) => e.replace(/^data: /, ""));
      expect(events.at(-1)).toBe("[DONE]");
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as Json);
      expect(chunks.length).toBeGreaterThan(2);
      expect(chunks.slice(0, -1).every((c) => c.meta_info.finish_reason === null)).toBe(true);
      const last = chunks.at(-1);
      expect(last.meta_info.finish_reason).toEqual(full.meta_info.finish_reason);
      const ids = incremental ? chunks.flatMap((c) => c.output_ids) : last.output_ids;
      expect(ids).toEqual(full.output_ids);
      const lps = incremental
        ? chunks.flatMap((c) => c.meta_info.output_token_logprobs)
        : last.meta_info.output_token_logprobs;
      expect(lps).toEqual(full.meta_info.output_token_logprobs);
      await sim!.close();
      sim = undefined;
    }
  });
});

describe("aborts", () => {
  it("/abort_request by rid ends that request with finish_reason abort and the tokens so far", async () => {
    await start({ decodeTokensPerSecond: 100 });
    const full = (await generate({ rid: "whole" })).json;
    const pending = generate({ rid: "victim" });
    await until(async () => (await loads()).num_running_reqs === 1);
    expect((await call("/abort_request", { rid: "victim" })).json).toMatchObject({
      success: true,
      aborted: 1,
    });
    const { status, json } = await pending;
    expect(status).toBe(200);
    expect(json.meta_info.finish_reason).toMatchObject({ type: "abort" });
    expect(json.output_ids.length).toBeLessThan(full.output_ids.length);
    expect(json.output_ids).toEqual(full.output_ids.slice(0, json.output_ids.length));
    expect((await call("/abort_request", {})).status).toBe(400);
  });

  it("abort_all ends every request, running or waiting", async () => {
    await start({ decodeTokensPerSecond: 100, maxRunningRequests: 1 });
    const pending = Promise.all([generate({ rid: "x" }), generate({ rid: "y" })]);
    await until(async () => (await loads()).num_waiting_reqs === 1);
    expect((await call("/abort_request", { abort_all: true })).json.aborted).toBe(2);
    const results = await pending;
    expect(results.map((r) => r.json.meta_info.finish_reason.type)).toEqual(["abort", "abort"]);
    expect((await call("/sim/stats")).json.aborted_total).toBe(2);
  });

  it("a client that disconnects aborts its request", async () => {
    await start({ decodeTokensPerSecond: 50 });
    const controller = new AbortController();
    const gone = generate({ rid: "gone" }, { signal: controller.signal }).catch((e: Error) => e);
    await until(async () => (await loads()).num_running_reqs === 1);
    controller.abort();
    expect(await gone).toBeInstanceOf(Error);
    await until(async () => (await call("/sim/stats")).json.aborted_total === 1);
  });

  it("/pause_generation aborts requests in flight (mode abort) and holds new ones until continue", async () => {
    await start({ decodeTokensPerSecond: 100 });
    const inflight = generate({ rid: "p1" });
    await until(async () => (await loads()).num_running_reqs === 1);
    expect((await call("/pause_generation", { mode: "abort" })).json.aborted).toBe(1);
    expect((await inflight).json.meta_info.finish_reason.type).toBe("abort");
    let done = false;
    // The held request carries an image: the sim counts it when it reads the request, before the
    // pause gate, so its arrival is seen before the check that it is held.
    const held = generate({
      rid: "p2",
      image_data: [`data:image/png;base64,${starImage({ stars: 1, seed: 1 }).png.toString("base64")}`],
      sampling_params: { max_new_tokens: 4 },
    }).then((r) => {
      done = true;
      return r;
    });
    await until(async () => (await call("/sim/stats")).json.images.generate_total === 1);
    const stats = (await call("/sim/stats")).json;
    // Arrived, not admitted: the gate holds it before the scheduler counts it.
    expect(stats.requests_total).toBe(1);
    expect(await loads()).toMatchObject({
      loads: [{ dp_rank: 0, num_running_reqs: 0, num_waiting_reqs: 0 }],
    });
    expect(done).toBe(false);
    await call("/continue_generation", {});
    expect((await held).json.meta_info.finish_reason).toEqual({ type: "length", length: 4 });
    expect((await call("/sim/stats")).json.requests_total).toBe(2);
  });
});

describe("cache, weights, tokenizer endpoints", () => {
  it("/flush_cache is refused while busy and clears the prefix cache when idle", async () => {
    await start({ decodeTokensPerSecond: 100 });
    await generate({ sampling_params: { max_new_tokens: 2 } });
    expect(
      (await generate({ sampling_params: { max_new_tokens: 2 } })).json.meta_info.cached_tokens,
    ).toBeGreaterThan(0);
    const running = generate({ rid: "busy" });
    await until(async () => (await loads()).num_running_reqs === 1);
    const refused = await call("/flush_cache", {});
    expect(refused.status).toBe(400);
    expect(refused.json).toMatch(/^Cache flushed/);
    await call("/abort_request", { rid: "busy" });
    await running;
    expect((await call("/flush_cache")).status).toBe(200);
    expect((await generate({ sampling_params: { max_new_tokens: 2 } })).json.meta_info.cached_tokens).toBe(0);
  });

  it("/update_weights_from_disk bumps weight_version, or sets the one given; it shows in results and /server_info", async () => {
    await start();
    expect((await call("/update_weights_from_disk", { model_path: "/ckpt/1" })).json.success).toBe(true);
    expect((await generate({ sampling_params: { max_new_tokens: 1 } })).json.meta_info.weight_version).toBe(
      "1",
    );
    await call("/update_weights_from_disk", { model_path: "/ckpt/2", weight_version: "step-7" });
    await call("/update_weights_from_disk", { model_path: "/ckpt/3" });
    expect((await call("/server_info")).json).toMatchObject({ weight_version: "step-8", simulator: true });
    expect((await call("/get_model_info")).json.weight_version).toBe("step-8");
    const bad = await call("/update_weights_from_disk", { weight_version: 3 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("weight_version");
    expect(nextWeightVersion("v")).toBe("v.1");
    expect((await call("/update_weight_version", { new_version: "12" })).json.success).toBe(true);
    expect((await call("/model_info")).json.weight_version).toBe("12");
    expect((await call("/update_weight_version", {})).status).toBe(400);
  });

  it("/v1/tokenize renders messages like the chat endpoint; /v1/detokenize inverts it", async () => {
    await start();
    const messages = [{ role: "user", content: "What is 2 + 2?" }];
    const t = (await call("/v1/tokenize", { messages })).json;
    const chat = (
      await call("/v1/chat/completions", { messages, max_tokens: 1, return_prompt_token_ids: true })
    ).json;
    expect(t.tokens).toEqual(chat.choices[0].prompt_token_ids);
    expect(t).toMatchObject({ count: t.tokens.length, max_model_len: 40960 });
    expect((await call("/tokenize", { prompt: "hello world" })).json.tokens).toEqual(
      tok.encode("hello world"),
    );
    expect((await call("/v1/detokenize", { tokens: t.tokens })).json.text).toBe(tok.decode(t.tokens));
    const bad = await call("/v1/tokenize", {});
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toContain("prompt / messages");
    expect((await call("/v1/detokenize", { tokens: [-1] })).json.error.message).toContain("tokens[0]");
  });
});

describe("fault knobs", () => {
  it("error_rate 1 answers 503 on generation but keeps serving the other endpoints", async () => {
    await start({ faults: { errorRate: 1 } });
    const r = await generate();
    expect(r.status).toBe(503);
    expect(r.json.error.message).toContain("error_rate");
    expect((await call("/v1/models")).status).toBe(200);
    expect((await call("/sim/stats")).json.faults.errors).toBe(1);
  });

  it("abort_rate 1 aborts each request halfway; stall_rate 1 holds it until aborted", async () => {
    await start({ faults: { abortRate: 1 } });
    const r = (await generate({ rid: "half" })).json;
    expect(r.meta_info.finish_reason).toMatchObject({
      type: "abort",
      message: expect.stringContaining("abort_rate"),
    });
    await sim!.close();
    const normal = await startSimEngine({ port: 0, seed: 1 });
    const full = (await (
      await fetch(`${normal.url}/generate`, {
        method: "POST",
        body: JSON.stringify({ text: prompt(), rid: "half", sampling_params: { max_new_tokens: 512 } }),
      })
    ).json()) as Json;
    await normal.close();
    expect(r.output_ids).toEqual(full.output_ids.slice(0, Math.floor(full.output_ids.length / 2)));

    await start({ faults: { stallRate: 1, stallMs: 600_000 } });
    const stalled = generate({ rid: "stuck" });
    await until(async () => (await call("/sim/stats")).json.faults.stalls === 1);
    await call("/abort_request", { rid: "stuck" });
    expect((await stalled).json).toMatchObject({
      output_ids: [],
      meta_info: { finish_reason: { type: "abort" } },
    });
  });
  it("POST /sim/faults changes the knobs from the next request on: a burst of 503s, then none", async () => {
    await start();
    expect((await generate({ rid: "before" })).status).toBe(200);
    expect((await call("/sim/faults", { error_rate: 1 })).json).toMatchObject({ errorRate: 1, stallRate: 0 });
    expect((await generate({ rid: "burst" })).status).toBe(503);
    expect((await call("/sim/faults", { error_rate: 0 })).json).toMatchObject({ errorRate: 0 });
    expect((await generate({ rid: "after" })).status).toBe(200);
    expect((await call("/sim/stats")).json.faults.errors).toBe(1);
    const bad = await call("/sim/faults", { error_rate: 2 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json)).toContain("error_rate");
  });
});
