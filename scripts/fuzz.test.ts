import { describe, expect, it } from "vitest";
import { FUZZ_SURFACES, fuzzPlan, parseFuzzArgs, replayCommand } from "./fuzz";

describe("npm run test:fuzz plan", () => {
  it("splits a workers-pool surface into segments whose cases add up, each from its own seed", () => {
    const plan = fuzzPlan({ runs: 1200, segment: 500, seed: 41, surfaces: FUZZ_SURFACES });
    const routes = plan.filter((r) => r.surface === "routes");
    expect(routes.map((r) => [r.runs, r.seed])).toEqual([
      [500, 41],
      [500, 42],
      [200, 43],
    ]);
    expect(plan.filter((r) => r.surface === "wire").map((r) => r.runs)).toEqual([500, 500, 200]);
    // The Node surfaces take all their cases in one run, from the base seed.
    expect(plan.filter((r) => r.surface === "proxy")).toEqual([
      { surface: "proxy", file: "proxy/fuzz.test.ts", runs: 1200, seed: 41 },
    ]);
    expect(plan.filter((r) => r.surface === "task-files").map((r) => r.runs)).toEqual([1200]);
  });

  it("keeps segment seeds in fast-check's 32-bit range", () => {
    const plan = fuzzPlan({ runs: 3, segment: 1, seed: 2147483647, surfaces: [FUZZ_SURFACES[0]!] });
    expect(plan.map((r) => r.seed)).toEqual([2147483647, -2147483648, -2147483647]);
  });

  it("prints a replay command that sets the segment's cases and seed", () => {
    const [run] = fuzzPlan({ runs: 10, segment: 500, seed: 9, surfaces: [FUZZ_SURFACES[1]!] });
    expect(replayCommand(run!)).toBe(
      "POLAR_FUZZ_RUNS=10 POLAR_FUZZ_SEED=9 npx vitest run control-plane/fuzz/wire.test.ts",
    );
  });

  it("reads its options and names the one that is wrong", () => {
    expect(parseFuzzArgs(["--runs", "20", "--seed", "5", "--surface", "proxy,routes"])).toMatchObject({
      runs: 20,
      seed: 5,
      segment: 500,
      surfaces: [{ name: "proxy" }, { name: "routes" }],
    });
    expect(() => parseFuzzArgs(["--runs", "0"])).toThrow("--runs must be an integer >= 1, got '0'");
    expect(() => parseFuzzArgs(["--segment", "x"])).toThrow("--segment must be an integer >= 1, got 'x'");
    expect(() => parseFuzzArgs(["--surface", "http"])).toThrow("unknown surface 'http'");
    // Without --seed each run draws a fresh one.
    expect(Number.isSafeInteger(parseFuzzArgs([]).seed)).toBe(true);
  });
});
