import { describe, expect, it } from "vitest";
import { UsageError } from "../usage-error";
import { type SimEngineOptions, validateSimEngineOptions } from "./sim-engine";

const base: SimEngineOptions = {
  port: 0,
  host: "127.0.0.1",
  model: "m",
  seed: 0,
  prefillTps: 0,
  decodeTps: 0,
  maxRunningRequests: 0,
  flavor: "sglang",
  incrementalStreaming: false,
  errorRate: 0,
  stallRate: 0,
  stallMs: 5000,
  abortRate: 0,
};

describe("sim-engine flags", () => {
  it("accepts the defaults and a busy-GPU profile", () => {
    expect(() => validateSimEngineOptions(base)).not.toThrow();
    expect(() =>
      validateSimEngineOptions({
        ...base,
        prefillTps: 8000,
        decodeTps: 60,
        maxRunningRequests: 16,
        errorRate: 0.1,
      }),
    ).not.toThrow();
  });

  it.each([
    [{ errorRate: 1.5 }, "--error-rate: must be a probability"],
    [{ abortRate: -0.1 }, "--abort-rate: must be a probability"],
    [{ decodeTps: Number.NaN }, "--decode-tps: must be a number >= 0"],
    [{ maxRunningRequests: 2.5 }, "--max-running-requests: must be an integer"],
    [{ flavor: "tgi" }, "--flavor: 'tgi' is not one of"],
    [{ contextLength: 1 }, "--context-length: must be an integer >= 2"],
    [{ outputIds: "sglang-0.5.3" }, "--output-ids: 'sglang-0.5.3' is not one of"],
    [
      { prioritySchedulingPreemptionThreshold: -1 },
      "--priority-scheduling-preemption-threshold: must be an integer >= 0, got -1",
    ],
    [
      { prioritySchedulingPreemptionThreshold: 2.5 },
      "--priority-scheduling-preemption-threshold: must be an integer >= 0, got 2.5",
    ],
    [{ defaultPriorityValue: Number.NaN }, "--default-priority-value: must be an integer, got NaN"],
    [{ defaultPriorityValue: 0.5 }, "--default-priority-value: must be an integer, got 0.5"],
    [
      { flavor: "vllm", schedulingPolicy: "lifo" },
      "--scheduling-policy: 'lifo' is not one of fcfs, priority",
    ],
    [{ schedulingPolicy: "priority" }, "--scheduling-policy: a vLLM flag (with --flavor vllm)"],
    [{ flavor: "vllm", enablePriorityScheduling: true }, "--enable-priority-scheduling: an SGLang flag"],
    [{ flavor: "vllm", defaultPriorityValue: 3 }, "--default-priority-value: an SGLang flag"],
    [{ moeLayers: 8 }, "--moe-layers: needs --enable-return-routed-experts"],
    [{ moeExperts: 64 }, "--moe-experts: needs --enable-return-routed-experts"],
    [
      { enableReturnRoutedExperts: true, moeLayers: 0 },
      "--moe-layers: must be an integer between 1 and 1024, got 0",
    ],
    [
      { enableReturnRoutedExperts: true, moeLayers: 2.5 },
      "--moe-layers: must be an integer between 1 and 1024, got 2.5",
    ],
    [
      { enableReturnRoutedExperts: true, moeTopK: 9 },
      "--moe-top-k: must be an integer between 1 and the number of experts (8), got 9",
    ],
    [
      { enableReturnRoutedExperts: true, moeExperts: 128, moeTopK: Number.NaN },
      "--moe-top-k: must be an integer between 1 and the number of experts (128), got NaN",
    ],
    [
      { enableReturnRoutedExperts: true, moeExperts: 0 },
      "--moe-experts: must be an integer between 1 and 65536, got 0",
    ],
    [
      { flavor: "vllm", enableReturnRoutedExperts: true },
      "--enable-return-routed-experts: an SGLang flag here",
    ],
  ])("names the bad flag: %o", (patch, message) => {
    expect(() => validateSimEngineOptions({ ...base, ...patch })).toThrow(UsageError);
    expect(() => validateSimEngineOptions({ ...base, ...patch })).toThrow(message);
  });

  it("accepts routed experts with the default shape or a real MoE's", () => {
    expect(() => validateSimEngineOptions({ ...base, enableReturnRoutedExperts: true })).not.toThrow();
    expect(() =>
      validateSimEngineOptions({
        ...base,
        flavor: "sglang-0.5.10-patched",
        enableReturnRoutedExperts: true,
        moeLayers: 48,
        moeTopK: 8,
        moeExperts: 128,
      }),
    ).not.toThrow();
  });

  it("accepts each server's priority flags on its flavor", () => {
    expect(() =>
      validateSimEngineOptions({
        ...base,
        maxRunningRequests: 4,
        enablePriorityScheduling: true,
        scheduleLowPriorityValuesFirst: true,
        prioritySchedulingPreemptionThreshold: 0,
        disablePriorityPreemption: true,
        defaultPriorityValue: -3,
        abortOnPriorityWhenDisabled: true,
      }),
    ).not.toThrow();
    expect(() =>
      validateSimEngineOptions({ ...base, flavor: "vllm", schedulingPolicy: "priority" }),
    ).not.toThrow();
    // commander leaves boolean flags false when not given: not "given" to the vLLM flavor.
    expect(() =>
      validateSimEngineOptions({ ...base, flavor: "vllm", enablePriorityScheduling: false }),
    ).not.toThrow();
  });
});
