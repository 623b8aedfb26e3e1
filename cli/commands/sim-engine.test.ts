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
  ])("names the bad flag: %o", (patch, message) => {
    expect(() => validateSimEngineOptions({ ...base, ...patch })).toThrow(UsageError);
    expect(() => validateSimEngineOptions({ ...base, ...patch })).toThrow(message);
  });
});
