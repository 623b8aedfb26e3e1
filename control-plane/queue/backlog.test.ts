import { describe, expect, it } from "vitest";
import { Backlog, IDLE_GAP_MS } from "./backlog";

describe("Backlog: when the dispatcher last had every frame in hand", () => {
  it("is caught up at an event that follows an idle gap", () => {
    const b = new Backlog(0);
    b.begin(1_000);
    b.end(1_010);
    expect(b.caughtUpAt).toBe(1_000);
    b.begin(1_010 + IDLE_GAP_MS);
    expect(b.caughtUpAt).toBe(1_010 + IDLE_GAP_MS);
  });

  it("stays at the last idle moment while events follow each other without a gap", () => {
    const b = new Backlog(0);
    b.begin(100);
    // A burst: 60 s of events back to back, each starting as the last one ends.
    for (let t = 100; t < 60_100; t += 10) {
      b.end(t + 10);
      b.begin(t + 10);
    }
    expect(b.caughtUpAt).toBe(100);
    expect(b.asOf(60_105)).toBe(100);
    expect(b.behindSince(30_000, 60_105)).toBe(true);
  });

  it("counts overlapping events: idle only once the last one ends", () => {
    const b = new Backlog(0);
    b.begin(100);
    b.begin(110); // a second event while the first awaits
    b.end(120);
    b.begin(120 + IDLE_GAP_MS * 2); // the first still runs: not idle
    expect(b.caughtUpAt).toBe(100);
    b.end(500);
    b.end(510);
    expect(b.asOf(510 + IDLE_GAP_MS)).toBe(510 + IDLE_GAP_MS);
  });

  it("answers now from outside the tracked events once idle, and never a time after now", () => {
    const b = new Backlog(1_000);
    expect(b.asOf(1_000 + IDLE_GAP_MS)).toBe(1_000 + IDLE_GAP_MS);
    expect(b.asOf(1_010)).toBe(1_000);
    expect(b.behindSince(1_005, 1_010)).toBe(true);
    expect(b.behindSince(1_000, 1_010)).toBe(false);
    // Never after now, whatever the events did: idle, busy, and just after an event ended.
    const seen = new Backlog(2_000);
    const asOfEach = (from: number) =>
      Array.from({ length: 3 * IDLE_GAP_MS }, (_, i) => from + i).filter((now) => seen.asOf(now) > now);
    expect(asOfEach(2_000)).toEqual([]);
    seen.begin(2_200);
    expect(asOfEach(2_200)).toEqual([]);
    seen.end(2_260);
    expect(asOfEach(2_260)).toEqual([]);
  });
});
