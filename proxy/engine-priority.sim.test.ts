/**
 * Request priority through the proxy against the simulated engine, which schedules by priority as
 * SGLang and vLLM do: `auto` reads SGLang's server arguments at start (and refuses replicas that
 * disagree), and with one running slot the waiting calls of a higher-priority session run first,
 * in both engines' orders (the proxy negates for vLLM's lower-first).
 */
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { type SimEngineHandle, type SimEngineOptions, startSimEngine } from "../sim/server";
import { EnginePriorityError, resolveEnginePriority } from "./engine-priority";
import type { EngineName } from "./engines";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function sim(opts: SimEngineOptions = {}): Promise<SimEngineHandle> {
  const s = await startSimEngine({ model: MODEL, ...opts });
  cleanups.push(() => s.close());
  return s;
}

describe("auto asks SGLang's /server_info at start", { timeout: 30_000 }, () => {
  it("sends in the engine's order when it schedules by priority, nothing when it does not", async () => {
    const higher = await sim({ enablePriorityScheduling: true });
    const lower = await sim({ enablePriorityScheduling: true, scheduleLowPriorityValuesFirst: true });
    const off = await sim();
    const plan = (url: string) => resolveEnginePriority({ engine: "sglang", setting: "auto", urls: [url] });
    expect((await plan(higher.url)).order).toBe("higher_first");
    expect((await plan(lower.url)).order).toBe("lower_first");
    expect(await plan(off.url)).toEqual({
      order: null,
      reason: expect.stringContaining("runs without --enable-priority-scheduling"),
    });
  });

  it("refuses to start when the replicas disagree, naming both", async () => {
    const a = await sim({ enablePriorityScheduling: true });
    const b = await sim();
    const started = startProxy({
      engine: "sglang",
      engineUrls: [a.url, b.url],
      modelServed: MODEL,
      logger: quiet,
      healthIntervalMs: 0,
    });
    await expect(started).rejects.toThrow(EnginePriorityError);
    await expect(started).rejects.toThrow(
      `the engines disagree on priority scheduling: ${a.url} is scheduling by priority, higher first, ${b.url} is not scheduling by priority`,
    );
  });
});

describe("calls run in their sessions' priority order", { timeout: 60_000 }, () => {
  const cases: Array<{ engine: EngineName; opts: SimEngineOptions; setting?: "lower_first" }> = [
    { engine: "sglang", opts: { enablePriorityScheduling: true } },
    {
      engine: "sglang-openai",
      opts: { enablePriorityScheduling: true, scheduleLowPriorityValuesFirst: true },
    },
    { engine: "vllm", opts: { flavor: "vllm", schedulingPolicy: "priority" }, setting: "lower_first" },
  ];
  for (const { engine, opts, setting } of cases) {
    it(`${engine}${opts.scheduleLowPriorityValuesFirst ? " (lower values first)" : ""}: of two waiting calls the higher engine_priority runs first`, async () => {
      // One running slot and slow decoding: the first call holds the slot while two more wait.
      const s = await sim({ ...opts, maxRunningRequests: 1, decodeTokensPerSecond: 40 });
      const proxy: RecordingProxy = await startProxy({
        engine,
        engineUrls: [s.url],
        modelServed: MODEL,
        logger: quiet,
        healthIntervalMs: 0,
        ...(setting ? { enginePriority: setting } : {}),
      });
      cleanups.push(() => proxy.close());
      const finished: string[] = [];
      const ask = (id: string, priority: number) => {
        const { key } = proxy.openSession(id, { engine_priority: priority });
        const client = new OpenAI({ apiKey: key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
        return client.chat.completions
          .create({ model: "m", messages: [{ role: "user", content: "What is 2 + 3?" }] })
          .then(() => finished.push(id));
      };
      const waiting = async (n: number) =>
        expect
          .poll(
            async () => ((await (await fetch(`${s.url}/sim/stats`)).json()) as { waiting: number }).waiting,
            { timeout: 10_000 },
          )
          .toBe(n);
      const first = ask("first", 0);
      await expect
        .poll(
          async () => ((await (await fetch(`${s.url}/sim/stats`)).json()) as { running: number }).running,
          {
            timeout: 10_000,
          },
        )
        .toBe(1);
      const low = ask("low", 1);
      await waiting(1);
      const high = ask("high", 5);
      await waiting(2);
      await Promise.all([first, low, high]);
      expect(finished).toEqual(["first", "high", "low"]);
      const sent = proxy.completions("high")[0]!.metadata.engine_priority;
      expect(sent).toBe(opts.scheduleLowPriorityValuesFirst || setting === "lower_first" ? -5 : 5);
    });
  }
});
