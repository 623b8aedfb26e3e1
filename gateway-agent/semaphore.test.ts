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
