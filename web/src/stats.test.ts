import { describe, expect, it } from "vitest";
import { errorOf } from "./api";
import { countByStatus, errorsByKind, meanReward, rewardHistogram, stageDatasets } from "./stats";
import { heat } from "./views/tokens";

describe("aggregates of results", () => {
  it("bins rewards into 10 bins over [0, 1], clamping outliers, and takes the mean of non-null ones", () => {
    const h = rewardHistogram([0, 0.05, 0.5, 1, 1.7, -2, null]);
    expect(h.map((b) => b.count)).toEqual([3, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
    expect(h[5]).toEqual({ lo: 0.5, hi: 0.6, count: 1 });
    expect(meanReward([1, 0, null])).toBe(0.5);
    expect(meanReward([null])).toBeNull();
  });

  it("counts errors by kind and sessions by status", () => {
    const rs = [
      { status: "ERROR", error: { kind: "agent", message: "x" } },
      { status: "ERROR", error: { kind: "agent", message: "y" } },
      { status: "TIMEOUT", error: { kind: "timeout", message: "z" } },
      { status: "COMPLETED", error: null },
    ].map((r, i) => ({ ...r, session_id: `s${i}`, task_id: "t", reward: null, node_id: null, attempt: 1 }));
    expect(errorsByKind(rs)).toEqual({ agent: 2, timeout: 1 });
    expect(countByStatus(rs)).toEqual({ ERROR: 2, TIMEOUT: 1, COMPLETED: 1 });
  });

  it("turns stage timings into one stacked dataset per stage, in seconds", () => {
    const d = stageDatasets([{ timing: { queued_ms: 500, run_ms: 2000 } }, { timing: null }]);
    expect(d.map((s) => s.label)).toEqual(["queued", "init", "ready", "run", "post-run"]);
    expect(d[0]!.data).toEqual([0.5, 0]);
    expect(d[3]!.data).toEqual([2, 0]);
  });

  it("heats a token by how unlikely it was", () => {
    expect(heat(0)).toBe(0);
    expect(heat(Math.log(0.25))).toBeCloseTo(0.75);
    expect(heat(undefined)).toBe(0);
  });
});

describe("API errors", () => {
  it("tells a route the control plane lacks from a missing resource", () => {
    const missing = errorOf(404, "GET", "/v1/events?x=1", {
      error: { code: "not_found", message: "no route for GET /v1/events" },
    });
    expect(missing.name).toBe("ApiMissing");
    expect(missing.message).toBe("this control plane has no GET /v1/events");
    const gone = errorOf(404, "GET", "/v1/batches/b", {
      error: { code: "not_found", message: "batch 'b' does not exist" },
    });
    expect(gone.name).toBe("ApiError");
    expect(errorOf(403, "DELETE", "/v1/batches/b", null).message).toBe("HTTP 403");
  });
});
