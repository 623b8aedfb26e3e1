/**
 * Weight-update fencing: while paused, new engine calls wait (they do not fail) and in-flight calls
 * drain; `resume` releases the waiters. Every admitted call learns the policy version in effect,
 * which the proxy stamps on its record — after a pause/update/resume cycle no record can carry a
 * stale version, because no call was in flight across the update.
 *
 * @module
 */

/** What `pause` reports once in-flight calls drained or the timeout passed. */
export interface PauseResult {
  /** True when no call was in flight at the end. */
  drained: boolean;
  /** Calls still in flight (0 when drained). */
  inflight: number;
}

/** Snapshot of the fence. */
export interface FenceStatus {
  paused: boolean;
  inflight: number;
  /** Calls waiting for `resume`. */
  waiting: number;
  policy_version: string | null;
}

/**
 * The gate every engine call passes.
 *
 * @example
 * ```ts
 * const fence = new InferenceFence();
 * const version = await fence.enter(); // waits while paused
 * try { await callEngine(); } finally { fence.leave(); }
 * await fence.pause({ timeoutMs: 30_000 }); // { drained: true, inflight: 0 }
 * fence.setPolicyVersion("step-12");
 * fence.resume();
 * ```
 */
export class InferenceFence {
  private paused = false;
  private inflight = 0;
  private policyVersion: string | null = null;
  private waiters = new Set<() => void>();
  private drainWaiters = new Set<() => void>();

  /** Admits one call (waiting while paused); resolves to the policy version in effect. */
  async enter(signal?: AbortSignal): Promise<string | null> {
    while (this.paused) {
      if (signal?.aborted)
        throw Object.assign(new Error("request aborted by the client"), { name: "AbortError" });
      await new Promise<void>((resolve) => {
        const done = () => {
          this.waiters.delete(done);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        this.waiters.add(done);
        signal?.addEventListener("abort", done, { once: true });
      });
    }
    this.inflight++;
    return this.policyVersion;
  }

  /** Ends one admitted call. */
  leave(): void {
    this.inflight = Math.max(0, this.inflight - 1);
    if (this.inflight === 0) for (const done of [...this.drainWaiters]) done();
  }

  /** Stops admitting calls and waits up to `timeoutMs` for in-flight calls to finish. */
  async pause(opts: { timeoutMs: number }): Promise<PauseResult> {
    this.paused = true;
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.drainWaiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, opts.timeoutMs));
        this.drainWaiters.add(done);
      });
    }
    return { drained: this.inflight === 0, inflight: this.inflight };
  }

  /** Admits calls again, the waiting ones first. */
  resume(): void {
    this.paused = false;
    for (const done of [...this.waiters]) done();
  }

  /** Sets the policy version stamped on records of calls admitted from now on. */
  setPolicyVersion(version: string | null): void {
    this.policyVersion = version;
  }

  status(): FenceStatus {
    return {
      paused: this.paused,
      inflight: this.inflight,
      waiting: this.waiters.size,
      policy_version: this.policyVersion,
    };
  }
}
