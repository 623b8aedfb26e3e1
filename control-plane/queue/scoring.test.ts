/**
 * The gateway picker's order, upstream's: run pressure, then post-run, then init (reservations
 * included), then the larger READY gap, then total pressure, then the node id.
 */
import { describe, expect, it } from "vitest";
import { type StageMetrics, ZERO_STAGE_METRICS } from "../../protocol";
import { type GatewayLoad, pickBest, scoreOf } from "./scoring";

const capacity = { max_init: 4, max_run: 4, max_postrun: 4 };
const idle = ZERO_STAGE_METRICS;
const gw = (
  nodeId: string,
  metrics: Partial<StageMetrics> | null,
  reservations = 0,
  leases = 0,
): GatewayLoad => ({
  nodeId,
  capacity,
  metrics: metrics === null ? null : { ...idle, ...metrics },
  reservations,
  leases,
});
const best = (...loads: GatewayLoad[]) => pickBest(loads)?.nodeId;

describe("pickBest", () => {
  it("run pressure first: a fuller run stage loses to any init or post-run load", () => {
    expect(
      best(gw("a", { run_inflight: 2 }), gw("b", { run_inflight: 1, init_inflight: 4, postrun_inflight: 4 })),
    ).toBe("b");
  });

  it("then post-run pressure, then init pressure", () => {
    expect(
      best(gw("a", { postrun_queue_depth: 2 }), gw("b", { postrun_inflight: 1, init_inflight: 4 })),
    ).toBe("b");
    expect(best(gw("a", { init_inflight: 2 }), gw("b", { init_queue_depth: 1 }))).toBe("b");
  });

  it("assignments made since the last metrics count as init load", () => {
    expect(best(gw("a", {}, 2), gw("b", {}, 1))).toBe("b");
    expect(scoreOf(gw("a", { init_inflight: 1 }, 1))[2]).toBe(0.5);
  });

  it("then the larger READY gap (fewer warm runtimes waiting), then the node id", () => {
    expect(best(gw("a", { ready_depth: 3 }), gw("b", { ready_depth: 1 }))).toBe("b");
    expect(best(gw("b", {}), gw("a", {}))).toBe("a");
  });

  it("before any metrics, the leases held are the init load and shrink the READY gap", () => {
    expect(scoreOf(gw("a", null, 0, 2))).toEqual([0, 0, 0.5, -2, 0.5, "a"]);
    expect(best(gw("a", null, 0, 2), gw("b", null, 0, 1))).toBe("b");
  });

  it("no candidate, no gateway", () => {
    expect(pickBest([])).toBeUndefined();
  });
});
