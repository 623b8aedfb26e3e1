import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LIMITS } from "../protocol/limits";
import {
  applyEnginePriority,
  enginePriorityValue,
  resolveEnginePriority,
  sessionEnginePriority,
} from "./engine-priority";
import { ProxyHttpError } from "./errors";
import { type FixtureEngine, startFixtureEngine } from "./testing/fixture-engine";

describe("a session's engine priority", () => {
  it("is read from the meta, and a malformed one is a 400 naming meta.engine_priority", () => {
    expect(sessionEnginePriority({ engine_priority: -12 })).toBe(-12);
    expect(sessionEnginePriority({})).toBeNull();
    expect(sessionEnginePriority({ engine_priority: null })).toBeNull();
    for (const bad of [1.5, "3", LIMITS.maxEnginePriority + 1, true]) {
      let caught: unknown;
      try {
        sessionEnginePriority({ engine_priority: bad });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ProxyHttpError);
      expect((caught as ProxyHttpError).status).toBe(400);
      expect((caught as ProxyHttpError).message).toMatch(/^meta\.engine_priority: must be an integer/);
    }
  });

  it("is sent as is to an engine that runs higher values first, negated to one that runs lower first", () => {
    expect(enginePriorityValue(5, "higher_first")).toBe(5);
    expect(enginePriorityValue(5, "lower_first")).toBe(-5);
    expect(enginePriorityValue(0, "lower_first")).toBe(0);
    expect(Object.is(enginePriorityValue(0, "lower_first"), -0)).toBe(false);
    expect(enginePriorityValue(5, null)).toBeNull();
    expect(enginePriorityValue(null, "higher_first")).toBeNull();
  });

  it("replaces whatever priority the harness put in its body, or removes it", () => {
    const body: Record<string, unknown> = { messages: [], priority: 99 };
    expect(applyEnginePriority(body, { engine_priority: 3 }, "lower_first")).toBe(-3);
    expect(body.priority).toBe(-3);
    expect(applyEnginePriority(body, { engine_priority: 3 }, null)).toBeNull();
    expect(body).not.toHaveProperty("priority");
    body.priority = 99;
    expect(applyEnginePriority(body, {}, "higher_first")).toBeNull();
    expect(body).not.toHaveProperty("priority");
  });
});

describe("deciding at start whether priorities are sent", () => {
  let engine: FixtureEngine;
  beforeAll(async () => {
    engine = await startFixtureEngine();
  });
  afterAll(async () => {
    await engine.close();
  });

  it("follows an explicit setting without asking the engine", async () => {
    const unreachable = ["http://127.0.0.1:9"];
    for (const engineName of ["sglang", "vllm"] as const) {
      expect(
        (await resolveEnginePriority({ engine: engineName, setting: "off", urls: unreachable })).order,
      ).toBeNull();
      expect(
        (await resolveEnginePriority({ engine: engineName, setting: "lower_first", urls: unreachable }))
          .order,
      ).toBe("lower_first");
    }
  });

  it("auto: never to vLLM, which does not say how it schedules, and says what to give instead", async () => {
    const logged: string[] = [];
    const plan = await resolveEnginePriority({
      engine: "vllm",
      setting: "auto",
      urls: [engine.url],
      logger: { info: (m) => logged.push(m), warn() {}, error() {} },
    });
    expect(plan.order).toBeNull();
    expect(logged).toEqual([
      expect.stringMatching(/^engine priority: not sent \(vLLM .*--engine-priority lower_first/),
    ]);
  });

  it("auto: not to an SGLang started without --enable-priority-scheduling, nor to one that does not answer", async () => {
    const off = await resolveEnginePriority({ engine: "sglang-openai", setting: "auto", urls: [engine.url] });
    expect(off).toEqual({
      order: null,
      reason: expect.stringContaining("without --enable-priority-scheduling"),
    });
    const gone = await resolveEnginePriority({
      engine: "sglang",
      setting: "auto",
      urls: ["http://127.0.0.1:9"],
      timeoutMs: 500,
    });
    expect(gone).toEqual({
      order: null,
      reason: expect.stringContaining("reports no enable_priority_scheduling"),
    });
  });
});
