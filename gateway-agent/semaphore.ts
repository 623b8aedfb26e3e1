/**
 * A counting semaphore whose waiters can be aborted: one per stage (INIT, RUN, POST_RUN) sized by
 * the gateway's `max_*` capacity.
 *
 * @module
 */

/**
 * Counting semaphore; waiters are served by priority (higher first), FIFO within a priority.
 * Priority never preempts: it only reorders callers still waiting (upstream's
 * `dispatch_priority` rule for the INIT queue).
 *
 * @example
 * ```ts
 * const run = new Semaphore(2);
 * await run.acquire(signal); // throws signal.reason if aborted while waiting
 * try { await work(); } finally { run.release(); }
 * ```
 */
export class Semaphore {
  private used = 0;
  private readonly waiters: Array<{ grant: () => void; priority: number }> = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`semaphore size must be an integer >= 1, got ${size}`);
  }

  /** Slots in use. */
  get inUse(): number {
    return this.used;
  }

  /** Callers waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * Takes a slot, waiting behind callers of higher or equal priority; rejects with
   * `signal.reason` if aborted first.
   */
  acquire(signal?: AbortSignal, priority = 0): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        priority,
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      // Insert after every waiter of higher or equal priority: stable, so FIFO among equals.
      const at = this.waiters.findIndex((w) => w.priority < priority);
      if (at < 0) this.waiters.push(waiter);
      else this.waiters.splice(at, 0, waiter);
    });
  }

  /** Gives a slot back; the oldest waiter (if any) gets it directly. */
  release(): void {
    const next = this.waiters.shift();
    if (next) {
      next.grant(); // the slot passes on: `used` stays the same
      return;
    }
    if (this.used === 0) throw new Error("semaphore released more often than acquired");
    this.used--;
  }
}
