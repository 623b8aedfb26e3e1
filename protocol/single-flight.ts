/**
 * Two guards on an async job that must not run twice at once, written once for every part: `once`
 * runs the job at most one time ever (stopping, aborting: every later call gets the same promise),
 * `SingleFlight` shares the run in flight and lets the next call start a fresh one after it
 * settled (probing: callers in one moment share one request, a later moment asks again).
 *
 * @module
 */

/**
 * A function that runs `job` on its first call only; every call returns that first promise.
 *
 * @example
 * ```ts
 * const stop = once(async () => { await server.close(); });
 * await Promise.all([stop(), stop()]); // server.close() ran one time
 * ```
 */
export function once<T>(job: () => Promise<T>): () => Promise<T> {
  let run: Promise<T> | null = null;
  return () => {
    // Called through an async function, so a job that throws at once still yields one rejection.
    run ??= (async () => job())();
    return run;
  };
}

/**
 * Shares one run of a job among the callers that arrive while it is in flight; once it settled
 * (fulfilled or rejected) the next call starts a new run.
 *
 * @example
 * ```ts
 * const probe = new SingleFlight<void>();
 * await Promise.all([probe.run(ask), probe.run(ask)]); // `ask` ran one time
 * await probe.run(ask); // and now a second time
 * ```
 */
export class SingleFlight<T> {
  private current: Promise<T> | null = null;

  /** The run in flight, or a new run of `job` when there is none. */
  run(job: () => Promise<T>): Promise<T> {
    if (this.current) return this.current;
    // The reset runs before `shared` settles, so a caller that awaited it and asks again starts
    // a fresh run; it checks identity so a stale callback never clears a newer run.
    const shared: Promise<T> = (async () => job())().finally(() => {
      if (this.current === shared) this.current = null;
    });
    this.current = shared;
    return shared;
  }
}
