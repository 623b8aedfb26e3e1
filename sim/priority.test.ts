/**
 * Request priority over HTTP, as SGLang and vLLM schedule by it: the order waiting requests are
 * admitted in behind one running slot (by completion order), SGLang's preemption past its threshold
 * (the preempted request still returns every token), aborts of preempted requests, what each server
 * does with a priority while it does not schedule by one, the server arguments `/server_info`
 * reports, and the refusal of a priority that is no integer. Decode rates make requests wait; the
 * assertions are on order, tokens and counters, never on elapsed time.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { type SimEngineHandle, type SimEngineOptions, startSimEngine } from "./server";

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

let tok: ChatTokenizer;
const started: SimEngineHandle[] = [];
beforeAll(async () => {
  tok = await loadChatTokenizer();
});
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

async function start(opts: SimEngineOptions = {}): Promise<SimEngineHandle> {
  const sim = await startSimEngine({ port: 0, seed: 3, ...opts });
  started.push(sim);
  return sim;
}

const prompt = () => tok.render([{ role: "user", content: "What is 12 * 34?" }]);
const messages = [{ role: "user", content: "What is 12 * 34?" }];

async function post(
  sim: SimEngineHandle,
  path: string,
  body: unknown,
): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${sim.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  try {
    return { status: res.status, json: JSON.parse(text) };
  } catch {
    return { status: res.status, json: text };
  }
}

const get = async (sim: SimEngineHandle, path: string): Promise<Json> =>
  (await fetch(`${sim.url}${path}`)).json();
const stats = (sim: SimEngineHandle) => get(sim, "/sim/stats");

/** A `/generate` call of `maxNew` tokens (2 by default), with a priority when given. */
function generate(sim: SimEngineHandle, rid: string, priority?: unknown, maxNew = 2, extra: object = {}) {
  return post(sim, "/generate", {
    text: prompt(),
    rid,
    sampling_params: { max_new_tokens: maxNew },
    ...(priority !== undefined ? { priority } : {}),
    ...extra,
  });
}

/** Polls until `check` holds (the sim's state changes as requests arrive; no fixed sleeps). */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition not reached");
}

/**
 * Sends `calls` one after another, each once the previous one is waiting (so arrival order is
 * the listed order), then ends the running blocker, and gives the order the calls finished in.
 */
async function finishOrder(
  sim: SimEngineHandle,
  calls: Array<[string, () => Promise<{ status: number; json: Json }>]>,
  endBlocker: () => Promise<unknown>,
): Promise<string[]> {
  const order: string[] = [];
  const runs: Array<Promise<unknown>> = [];
  for (const [i, [name, call]] of calls.entries()) {
    runs.push(
      call().then((r) => {
        expect(r.status, `${name}: ${JSON.stringify(r.json)}`).toBe(200);
        order.push(name);
      }),
    );
    await until(async () => (await stats(sim)).waiting === i + 1);
  }
  await endBlocker();
  await Promise.all(runs);
  return order;
}

/** Starts a slow `/generate` stream and resolves once its first tokens arrived; `done` is its last chunk. */
async function streamGenerate(sim: SimEngineHandle, rid: string, priority: number) {
  const res = await fetch(`${sim.url}/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      text: prompt(),
      rid,
      priority,
      stream: true,
      sampling_params: { max_new_tokens: 512 },
    }),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const chunks: Json[] = [];
  const read = async (enough: () => boolean) => {
    while (!enough()) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let at = buffer.indexOf("\n\n");
      while (at !== -1) {
        const event = buffer.slice(0, at).replace(/^data: /, "");
        buffer = buffer.slice(at + 2);
        if (event !== "[DONE]") chunks.push(JSON.parse(event));
        at = buffer.indexOf("\n\n");
      }
    }
  };
  await read(() => chunks.length > 0);
  const done = read(() => false).then(() => chunks.at(-1));
  return { first: chunks[0], done };
}

describe("SGLang flavor: the waiting queue by priority", { timeout: 30_000 }, () => {
  it("admits higher values first, equal priorities in arrival order", async () => {
    const sim = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
    });
    const blocker = generate(sim, "blocker", 100, 512);
    await until(async () => (await stats(sim)).running === 1);
    const order = await finishOrder(
      sim,
      [
        ["p1", () => generate(sim, "p1", 1)],
        ["p5", () => generate(sim, "p5", 5)],
        ["p3", () => generate(sim, "p3", 3)],
        ["p3 again", () => generate(sim, "p3b", 3)],
      ],
      () => post(sim, "/abort_request", { rid: "blocker" }),
    );
    expect(order).toEqual(["p5", "p3", "p3 again", "p1"]);
    const b = await blocker;
    expect(b.json.meta_info.finish_reason.type).toBe("abort");
    expect((await stats(sim)).preempted_total).toBe(0);
  });

  it("admits lower values first with --schedule-low-priority-values-first (chat too)", async () => {
    const sim = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
      scheduleLowPriorityValuesFirst: true,
    });
    const chat = (rid: string, priority: number) =>
      post(sim, "/v1/chat/completions", { messages, rid, priority, max_tokens: 2 });
    const blocker = generate(sim, "blocker", -100, 512);
    await until(async () => (await stats(sim)).running === 1);
    const order = await finishOrder(
      sim,
      [
        ["p5", () => chat("p5", 5)],
        ["p1", () => generate(sim, "p1", 1)],
        ["p3", () => chat("p3", 3)],
      ],
      () => post(sim, "/abort_request", { rid: "blocker" }),
    );
    expect(order).toEqual(["p1", "p3", "p5"]);
    await blocker;
  });

  it("ignores priorities while priority scheduling is off: first come, first served", async () => {
    const sim = await start({ maxRunningRequests: 1, decodeTokensPerSecond: 20 });
    const blocker = generate(sim, "blocker", 0, 512);
    await until(async () => (await stats(sim)).running === 1);
    const order = await finishOrder(
      sim,
      [
        ["p1", () => generate(sim, "p1", 1)],
        ["p5", () => generate(sim, "p5", 5)],
        ["p3", () => generate(sim, "p3", 3)],
      ],
      () => post(sim, "/abort_request", { rid: "blocker" }),
    );
    expect(order).toEqual(["p1", "p5", "p3"]);
    await blocker;
  });
});

describe("SGLang flavor: preemption", { timeout: 30_000 }, () => {
  it("preempts past the threshold; the preempted request returns every token and prefills again", async () => {
    const reference = await start({});
    const expected = (await generate(reference, "victim", undefined, 512)).json;
    const sim = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
    });
    const victim = await streamGenerate(sim, "victim", 0);
    // Better by exactly the threshold (10): it waits.
    const near = generate(sim, "near", 10);
    await until(async () => (await stats(sim)).waiting === 1);
    expect(await stats(sim)).toMatchObject({ running: 1, preempted_total: 0 });
    // Better by more: it runs at once, the victim goes back to the queue.
    const order: string[] = [];
    const far = generate(sim, "far", 11).then((r) => {
      order.push("far");
      return r;
    });
    await until(async () => (await stats(sim)).preempted_total === 1);
    const [last, farReply, nearReply] = await Promise.all([
      victim.done.then((c) => {
        order.push("victim");
        return c;
      }),
      far,
      near.then((r) => {
        order.push("near");
        return r;
      }),
    ]);
    expect(order).toEqual(["far", "near", "victim"]);
    expect(farReply.status).toBe(200);
    expect(nearReply.status).toBe(200);
    expect(last.meta_info.finish_reason).toEqual(expected.meta_info.finish_reason);
    expect(last.output_ids).toEqual(expected.output_ids);
    const s = await stats(sim);
    expect(s).toMatchObject({ running: 0, waiting: 0, preempted_total: 1, finished_total: 3 });
    // Its prompt (none of it cached yet) and at least the tokens its first chunk carried.
    const promptTokens = expected.meta_info.prompt_tokens;
    expect(s.reprefill_tokens_total).toBeGreaterThanOrEqual(promptTokens + victim.first.output_ids.length);
    expect(s.reprefill_tokens_total).toBeLessThan(promptTokens + expected.output_ids.length);
    expect(s.running_request_seconds).toBeLessThanOrEqual(s.busy_seconds + 1e-9);
    expect(await (await fetch(`${sim.url}/metrics`)).text()).toMatch(
      /^sim_preempted_requests_total\{[^}]*\} 1$/m,
    );
  });

  it("does not preempt with --disable-priority-preemption, nor for a request without a priority", async () => {
    const sim = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
      disablePriorityPreemption: true,
    });
    const blocker = generate(sim, "blocker", -1000, 512);
    await until(async () => (await stats(sim)).running === 1);
    const waiting = generate(sim, "w", 1000);
    await until(async () => (await stats(sim)).waiting === 1);
    expect((await stats(sim)).preempted_total).toBe(0);
    await post(sim, "/abort_request", { abort_all: true });
    await Promise.all([blocker, waiting]);

    const open = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
    });
    const first = generate(open, "first", undefined, 512);
    await until(async () => (await stats(open)).running === 1);
    const second = generate(open, "second");
    await until(async () => (await stats(open)).waiting === 1);
    expect((await stats(open)).preempted_total).toBe(0);
    // A request with any priority preempts one without (which has the worst priority there is).
    await generate(open, "prioritized", -5);
    expect((await stats(open)).preempted_total).toBe(1);
    await post(open, "/abort_request", { abort_all: true });
    await Promise.all([first, second]);
  });

  it("uses --default-priority-value for requests without a priority", async () => {
    const sim = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
      defaultPriorityValue: 50,
    });
    const blocker = generate(sim, "blocker", undefined, 512);
    await until(async () => (await stats(sim)).running === 1);
    // 60 is not better than the default 50 by more than 10: it waits.
    const p60 = generate(sim, "p60", 60);
    await until(async () => (await stats(sim)).waiting === 1);
    expect((await stats(sim)).preempted_total).toBe(0);
    // 61 is: it takes the blocker's slot and finishes while the blocker and p60 wait.
    expect((await generate(sim, "p61", 61)).status).toBe(200);
    expect(await stats(sim)).toMatchObject({ preempted_total: 1, finished_total: 1 });
    await post(sim, "/abort_request", { abort_all: true });
    await Promise.all([blocker, p60]);
  });

  it("an aborted preempted request returns the tokens it decoded", async () => {
    const sim = await start({
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
      enablePriorityScheduling: true,
    });
    const victim = await streamGenerate(sim, "victim", 0);
    const high = generate(sim, "high", 50, 512);
    await until(async () => {
      const s = await stats(sim);
      return s.preempted_total === 1 && s.waiting === 1;
    });
    expect((await post(sim, "/abort_request", { rid: "victim" })).json).toMatchObject({ aborted: 1 });
    const last = await victim.done;
    expect(last.meta_info.finish_reason.type).toBe("abort");
    expect(last.output_ids.length).toBeGreaterThanOrEqual(victim.first.output_ids.length);
    expect(last.output_ids.slice(0, victim.first.output_ids.length)).toEqual(victim.first.output_ids);
    expect(await stats(sim)).toMatchObject({ running: 1, waiting: 0, aborted_total: 1 });
    await post(sim, "/abort_request", { rid: "high" });
    expect((await high).json.meta_info.finish_reason.type).toBe("abort");
  });
});

describe("SGLang flavor: --abort-on-priority-when-disabled", { timeout: 30_000 }, () => {
  it("refuses a request that sends a priority with 503, SGLang's message; without one it runs", async () => {
    const sim = await start({ abortOnPriorityWhenDisabled: true });
    const message =
      "Using priority is disabled for this server. Please send a new request without a priority.";
    const refused = await generate(sim, "r", 0);
    expect(refused.status).toBe(503);
    expect(refused.json.error.message).toBe(message);
    const chat = await post(sim, "/v1/chat/completions", { messages, priority: 3, max_tokens: 4 });
    expect(chat.status).toBe(503);
    expect(chat.json.error.message).toBe(message);
    expect((await generate(sim, "ok")).status).toBe(200);
    expect((await generate(sim, "null priority", null)).status).toBe(200);

    // Streaming: SGLang's abort is the stream's finish reason (/generate) or an error event (chat).
    const stream = await fetch(`${sim.url}/generate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: prompt(), priority: 1, stream: true, rid: "s" }),
    });
    expect(stream.status).toBe(200);
    const events = (await stream.text()).split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    const chunk = JSON.parse(events[0]!.replace(/^data: /, ""));
    expect(chunk.meta_info.finish_reason).toEqual({ type: "abort", message, status_code: 503 });
    expect(chunk.output_ids).toEqual([]);
    const chatStream = await fetch(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages, priority: 1, stream: true }),
    });
    const chatEvents = (await chatStream.text()).split("\n\n").filter(Boolean);
    expect(JSON.parse(chatEvents[0]!.replace(/^data: /, ""))).toEqual({
      error: { object: "error", message, type: "SERVICE_UNAVAILABLE", param: null, code: 503 },
    });
    expect(chatEvents.at(-1)).toBe("data: [DONE]");
    expect((await stats(sim)).requests_total).toBe(2);
  });

  it("has no effect while priority scheduling is on", async () => {
    const sim = await start({ enablePriorityScheduling: true, abortOnPriorityWhenDisabled: true });
    expect((await generate(sim, "r", 4)).status).toBe(200);
  });
});

describe("vLLM flavor", { timeout: 30_000 }, () => {
  const chat = (sim: SimEngineHandle, id: string, priority?: number, maxTokens = 2) =>
    post(sim, "/v1/chat/completions", {
      messages,
      request_id: id,
      max_tokens: maxTokens,
      ...(priority !== undefined ? { priority } : {}),
    });

  it("refuses a priority other than 0 under the default fcfs policy, in vLLM's words", async () => {
    const sim = await start({ flavor: "vllm" });
    const refused = await chat(sim, "a", 3);
    expect(refused.status).toBe(400);
    expect(refused.json.error.message).toBe("Got priority 3 but Priority scheduling is not enabled.");
    expect(refused.json.error.type).toBe("BadRequestError");
    expect((await chat(sim, "b", -7)).json.error.message).toBe(
      "Got priority -7 but Priority scheduling is not enabled.",
    );
    expect((await chat(sim, "c", 0)).status).toBe(200);
    expect((await chat(sim, "d")).status).toBe(200);
  });

  it("admits lower values first with --scheduling-policy priority, and never preempts", async () => {
    const sim = await start({
      flavor: "vllm",
      schedulingPolicy: "priority",
      maxRunningRequests: 1,
      decodeTokensPerSecond: 20,
    });
    // The worst priority of all: every later request is better by far, and still waits.
    const blocker = chat(sim, "blocker", 1000, 512);
    await until(async () => (await stats(sim)).running === 1);
    const order = await finishOrder(
      sim,
      [
        ["p5", () => chat(sim, "p5", 5)],
        ["none (0)", () => chat(sim, "none")],
        ["p-3", () => chat(sim, "p-3", -3)],
        ["p5 again", () => chat(sim, "p5b", 5)],
      ],
      () => post(sim, "/abort_requests", { request_ids: ["chatcmpl-blocker"] }),
    );
    expect(order).toEqual(["p-3", "none (0)", "p5", "p5 again"]);
    expect((await blocker).json.choices[0].finish_reason).toBe("abort");
    expect((await stats(sim)).preempted_total).toBe(0);
  });
});

describe("the server arguments and the field", () => {
  it("/server_info reports SGLang's priority arguments flat, with the values it runs with", async () => {
    const plain = await start({});
    const defaults = {
      schedule_policy: "fcfs",
      enable_priority_scheduling: false,
      schedule_low_priority_values_first: false,
      priority_scheduling_preemption_threshold: 10,
      disable_priority_preemption: false,
      default_priority_value: null,
      abort_on_priority_when_disabled: false,
    };
    expect(await get(plain, "/server_info")).toMatchObject(defaults);
    const set = await start({
      enablePriorityScheduling: true,
      scheduleLowPriorityValuesFirst: true,
      prioritySchedulingPreemptionThreshold: 3,
      disablePriorityPreemption: true,
      defaultPriorityValue: -4,
      abortOnPriorityWhenDisabled: true,
    });
    const configured = {
      schedule_policy: "fcfs",
      enable_priority_scheduling: true,
      schedule_low_priority_values_first: true,
      priority_scheduling_preemption_threshold: 3,
      disable_priority_preemption: true,
      default_priority_value: -4,
      abort_on_priority_when_disabled: true,
    };
    expect(await get(set, "/server_info")).toMatchObject(configured);
    expect(await get(set, "/get_server_info")).toMatchObject(configured);
    const s = await stats(set);
    expect(s.config).toMatchObject(configured);
    expect(s).toMatchObject({
      preempted_total: 0,
      scheduling: {
        priority: true,
        low_values_first: true,
        preemption: false,
        preemption_threshold: 3,
        default_priority: -4,
      },
    });
    const vllm = await start({ flavor: "vllm", schedulingPolicy: "priority" });
    const info = await get(vllm, "/server_info");
    expect(info.scheduling_policy).toBe("priority");
    expect(info.enable_priority_scheduling).toBeUndefined();
    expect((await stats(vllm)).scheduling).toMatchObject({
      priority: true,
      low_values_first: true,
      preemption: false,
    });
  });

  it("refuses options of the other server's kind", async () => {
    await expect(startSimEngine({ flavor: "vllm", enablePriorityScheduling: true })).rejects.toThrow(
      /enablePriorityScheduling: an SGLang option/,
    );
    await expect(startSimEngine({ schedulingPolicy: "priority" })).rejects.toThrow(
      /schedulingPolicy: a vLLM option/,
    );
    await expect(startSimEngine({ prioritySchedulingPreemptionThreshold: -1 })).rejects.toThrow(
      /prioritySchedulingPreemptionThreshold: must be an integer >= 0/,
    );
  });

  it("refuses a priority that is no integer with 400, as pydantic does; takes an integer string", async () => {
    const sim = await start({ enablePriorityScheduling: true });
    const cases: Array<[unknown, RegExp]> = [
      [1.5, /^priority: Input should be a valid integer, got a number with a fractional part$/],
      ["high", /^priority: Input should be a valid integer, unable to parse string as an integer$/],
      [[1], /^priority: Input should be a valid integer$/],
      [{ value: 1 }, /^priority: Input should be a valid integer$/],
    ];
    for (const [priority, message] of cases) {
      const r = await generate(sim, "bad", priority);
      expect(r.status, JSON.stringify(priority)).toBe(400);
      expect(r.json.error.message).toMatch(message);
      const c = await post(sim, "/v1/chat/completions", { messages, priority });
      expect(c.status, JSON.stringify(priority)).toBe(400);
      expect(c.json.error.message).toMatch(message);
    }
    expect((await generate(sim, "string", "7")).status).toBe(200);
    expect((await generate(sim, "integral float", 2.0)).status).toBe(200);
    const vllm = await start({ flavor: "vllm", schedulingPolicy: "priority" });
    const v = await post(vllm, "/v1/chat/completions", { messages, priority: 0.5 });
    expect(v.status).toBe(400);
    expect(v.json.error.message).toMatch(/^priority: Input should be a valid integer/);
  });
});
