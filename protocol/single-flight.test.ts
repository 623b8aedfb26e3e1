import { describe, expect, it } from "vitest";
import { once, SingleFlight } from "./single-flight";

/** A job whose runs are counted and which settles when the test says so. */
function gatedJob() {
  const state = { runs: 0, release: () => {}, fail: (_e: Error) => {} };
  const job = () => {
    state.runs++;
    return new Promise<number>((resolve, reject) => {
      state.release = () => resolve(state.runs);
      state.fail = reject;
    });
  };
  return { job, state };
}

describe("once", () => {
  it("runs the job on the first call only, and every call gets the first promise", async () => {
    const { job, state } = gatedJob();
    const stop = once(job);
    const a = stop();
    const b = stop();
    expect(a).toBe(b);
    state.release();
    expect(await a).toBe(1);
    expect(await stop()).toBe(1);
    expect(state.runs).toBe(1);
  });

  it("keeps a rejection: a failed job is not run again", async () => {
    let runs = 0;
    const fail = once(async () => {
      runs++;
      throw new Error("boom");
    });
    await expect(fail()).rejects.toThrow("boom");
    await expect(fail()).rejects.toThrow("boom");
    expect(runs).toBe(1);
  });

  it("turns a job that throws at once into a rejected promise", async () => {
    const job = (): Promise<void> => {
      throw new Error("sync");
    };
    const run = once(job);
    await expect(run()).rejects.toThrow("sync");
  });
});

describe("SingleFlight", () => {
  it("shares the run in flight among callers", async () => {
    const { job, state } = gatedJob();
    const flight = new SingleFlight<number>();
    const a = flight.run(job);
    const b = flight.run(job);
    expect(a).toBe(b);
    state.release();
    expect(await Promise.all([a, b])).toEqual([1, 1]);
    expect(state.runs).toBe(1);
  });

  it("starts a fresh run once the previous one settled", async () => {
    const { job, state } = gatedJob();
    const flight = new SingleFlight<number>();
    const first = flight.run(job);
    state.release();
    await first;
    const second = flight.run(job);
    expect(second).not.toBe(first);
    state.release();
    expect(await second).toBe(2);
  });

  it("starts a fresh run after a rejection too", async () => {
    const { job, state } = gatedJob();
    const flight = new SingleFlight<number>();
    const first = flight.run(job);
    state.fail(new Error("down"));
    await expect(first).rejects.toThrow("down");
    const second = flight.run(job);
    state.release();
    expect(await second).toBe(2);
  });

  it("is not stuck after a job that throws at once", async () => {
    const flight = new SingleFlight<number>();
    await expect(
      flight.run(() => {
        throw new Error("sync");
      }),
    ).rejects.toThrow("sync");
    expect(await flight.run(async () => 7)).toBe(7);
  });
});
