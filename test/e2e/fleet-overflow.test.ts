/**
 * A batch larger than the fleet must not lose its tail: `wrangler dev`, the simulated engine and
 * two real gateway agents, one SIGKILLed after its first results, and six times more sessions
 * than the two gateways hold at once (`scripts/fleet-overflow.ts`). The tail waits in the queue
 * far longer than `timeout_seconds`; since the run budget starts at INITIALIZING, every session
 * still completes, and `timing.queued_ms` reports the wait.
 */
import { describe, expect, it } from "vitest";
import { runFleetOverflow } from "../../scripts/fleet-overflow";

describe("a batch larger than the fleet (wrangler dev, two gateways, one killed)", () => {
  it("completes every session although the tail waits past timeout_seconds", async () => {
    const figures = await runFleetOverflow({
      sessions: 48,
      timeoutSeconds: 10,
      sleepSeconds: 1,
      slotsPerGateway: 2,
      killAfterResults: 4,
      graceSeconds: 2,
      maxWaitSeconds: 160,
    });
    console.log(`fleet overflow: ${JSON.stringify(figures)}`);
    expect(figures.finished).toBe(true);
    expect(figures.outcomes).toEqual({ COMPLETED: 48 });
    // The killed gateway's sessions came back as second attempts and completed.
    expect(figures.retried).toBeGreaterThan(0);
    // The shape of the report: sessions that waited longer than their whole run budget.
    expect(figures.completedAfterLongWait).toBeGreaterThan(0);
    expect(figures.queuedSecondsMax).toBeGreaterThan(10);
  }, 240_000);
});
