/**
 * Long-polls held inside a Durable Object until its next new row: `BatchDO.results` waits for the
 * next accepted result, `EventsDO` for the next appended event. They live in memory only: a
 * restart of the object ends them early, and the Worker simply asks again.
 *
 * @module
 */

/**
 * Waiters woken all at once by the next result, or each by its own timeout.
 *
 * @example
 * ```ts
 * const waiters = new ResultWaiters();
 * const waited = waiters.wait(30_000); // settles on notify() or after 30 s
 * waiters.notify();
 * await waited;
 * ```
 */
export class ResultWaiters {
  private readonly waiting = new Set<() => void>();

  /** Settles on the next {@link notify}, or after `ms`. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiting.add(done);
    });
  }

  /** Wakes every waiter. */
  notify(): void {
    for (const waiter of [...this.waiting]) waiter();
  }
}
