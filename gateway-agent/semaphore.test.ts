import { describe, expect, it } from "vitest";
import { Semaphore } from "./semaphore";

describe("Semaphore", () => {
  it("admits up to its size, then hands slots over in FIFO order", async () => {
    const sem = new Semaphore(2);
    await sem.acquire();
    await sem.acquire();
    const order: number[] = [];
    const third = sem.acquire().then(() => order.push(3));
    const fourth = sem.acquire().then(() => order.push(4));
    expect(sem.waiting).toBe(2);
    sem.release();
    await third;
    sem.release();
    await fourth;
    expect(order).toEqual([3, 4]);
    expect(sem.inUse).toBe(2);
  });

  it("drops an aborted waiter with the signal's reason and keeps the slot count right", async () => {
    const sem = new Semaphore(1);
    await sem.acquire();
    const ac = new AbortController();
    const waiting = sem.acquire(ac.signal);
    ac.abort(new Error("cancelled"));
    await expect(waiting).rejects.toThrow("cancelled");
    expect(sem.waiting).toBe(0);
    sem.release();
    expect(sem.inUse).toBe(0);
    expect(() => sem.release()).toThrow(/released more often/);
  });

  it("refuses a size below 1", () => {
    expect(() => new Semaphore(0)).toThrow(RangeError);
  });
});

describe("Semaphore priorities", () => {
  it("serves higher priority waiters first, FIFO among equals, never preempting a holder", async () => {
    const sem = new Semaphore(1);
    await sem.acquire(undefined, 0);
    const order: string[] = [];
    const waits = [
      sem.acquire(undefined, 0).then(() => order.push("low-1")),
      sem.acquire(undefined, 50).then(() => order.push("mid")),
      sem.acquire(undefined, 0).then(() => order.push("low-2")),
      sem.acquire(undefined, 100).then(() => order.push("high")),
    ];
    expect(sem.inUse).toBe(1); // the holder keeps its slot whatever arrives
    for (let i = 0; i < 4; i++) {
      sem.release();
      await waits[[3, 1, 0, 2][i] as number];
    }
    expect(order).toEqual(["high", "mid", "low-1", "low-2"]);
  });
});
