/**
 * Weight-update fencing: while paused, new engine calls wait (they do not fail); calls in flight
 * either drain (`drain` mode) or are aborted at the engine (`abort` mode: each call's abort hook —
 * SGLang's `/abort_request` with its rid — runs, then its request is cut), after which the proxy
 * re-issues them once resumed. `resume` releases the waiters. Every admitted call learns the
 * policy version in effect, which the proxy stamps on its record — after a pause/update/resume
 * cycle no record can carry a stale version, because no call was in flight across the update.
 *
 * @module
 */
import { type FenceMode, once } from "../protocol";

/** What `pause` reports once in-flight calls drained (or were aborted) or the timeout passed. */
export interface PauseResult {
  /** True when no call was in flight at the end. */
  drained: boolean;
  /** Calls still in flight (0 when drained). */
  inflight: number;
}

/** Snapshot of the fence. */
export interface FenceStatus {
  paused: boolean;
  /** The pause's mode; null while running. */
  mode: FenceMode | null;
  inflight: number;
  /** Calls waiting for `resume` (new ones, and aborted ones to be re-issued). */
  waiting: number;
  policy_version: string | null;
  /** Calls aborted by a pause in `abort` mode since start. */
  aborted_calls: number;
  /** Aborted calls the proxy issued again after resume (the harness never saw the abort). */
  reissued_calls: number;
}

/**
 * An admitted call. `signal` fires when a pause in `abort` mode aborts it, after the hooks it
 * registered with `onAbort` have run; `aborted` is set before the hooks run.
 */
export interface FenceTicket {
  readonly policyVersion: string | null;
  readonly signal: AbortSignal;
  readonly aborted: boolean;
  /** How to abort this call at its engine (runs at most once; at once if already aborted). */
  onAbort(hook: () => Promise<void>): void;
}

/**
 * How long abort hooks may take before the call's request is cut anyway (ms).
 *
 * @example
 * ```ts
 * await Promise.race([hooks, sleep(ABORT_HOOK_TIMEOUT_MS)]);
 * ```
 */
export const ABORT_HOOK_TIMEOUT_MS = 5_000;

/**
 * The error a call's request ends with when a pause in `abort` mode cut it.
 *
 * @example
 * ```ts
 * controller.abort(new FenceAbortError());
 * ```
 */
export class FenceAbortError extends Error {
  override readonly name = "AbortError";
  readonly fenceAbort = true;
  constructor() {
    super("aborted by a weight-update pause; it is issued again after resume");
  }
}

class Ticket implements FenceTicket {
  private readonly controller = new AbortController();
  private readonly hooks: Array<() => Promise<void>> = [];
  /** Runs the hooks (bounded), then cuts the request; once, however often `abort` is called. */
  private readonly abortRun = once(async () => {
    const hooks = Promise.allSettled(this.hooks.map((h) => h()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([hooks, new Promise((r) => (timer = setTimeout(r, ABORT_HOOK_TIMEOUT_MS)))]);
    clearTimeout(timer);
    this.controller.abort(new FenceAbortError());
  });
  aborted = false;

  constructor(readonly policyVersion: string | null) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  onAbort(hook: () => Promise<void>): void {
    if (this.aborted) void hook().catch(() => {});
    else this.hooks.push(hook);
  }

  /** Runs the hooks (bounded), then cuts the request. */
  abort(): Promise<void> {
    this.aborted = true;
    return this.abortRun();
  }
}

/**
 * The gate every engine call passes.
 *
 * @example
 * ```ts
 * const fence = new InferenceFence();
 * const ticket = await fence.enter(); // waits while paused
 * try { await callEngine({ signal: ticket.signal }); } finally { fence.leave(ticket); }
 * await fence.pause({ timeoutMs: 30_000, mode: "abort" }); // { drained: true, inflight: 0 }
 * fence.setPolicyVersion("12");
 * fence.resume();
 * ```
 */
export class InferenceFence {
  private paused = false;
  private mode: FenceMode | null = null;
  private policyVersion: string | null = null;
  private readonly tickets = new Set<Ticket>();
  private readonly waiters = new Set<() => void>();
  private readonly drainWaiters = new Set<() => void>();
  private readonly resumeListeners: Array<() => void> = [];
  private readonly pauseListeners: Array<(mode: FenceMode) => Promise<void> | void> = [];
  private abortedCalls = 0;
  private reissuedCalls = 0;
  /** Paused time of the pauses that ended (ms); {@link pausedMs} adds the current one. */
  private pausedTotalMs = 0;
  /** When the current pause began (epoch ms); null while not paused. */
  private pausedSince: number | null = null;

  /** Admits one call (waiting while paused); its ticket carries the policy version in effect. */
  async enter(signal?: AbortSignal): Promise<FenceTicket> {
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
    const ticket = new Ticket(this.policyVersion);
    this.tickets.add(ticket);
    return ticket;
  }

  /** Ends one admitted call. */
  leave(ticket: FenceTicket): void {
    this.tickets.delete(ticket as Ticket);
    if (this.tickets.size === 0) for (const done of [...this.drainWaiters]) done();
  }

  /** Counts an aborted call issued again. */
  noteReissue(): void {
    this.reissuedCalls++;
  }

  /**
   * Stops admitting calls; in `abort` mode aborts the calls in flight; then waits up to
   * `timeoutMs` for none to be left.
   */
  async pause(opts: { timeoutMs: number; mode?: FenceMode }): Promise<PauseResult> {
    this.paused = true;
    this.pausedSince ??= Date.now();
    this.mode = opts.mode ?? "drain";
    if (this.mode === "abort") {
      for (const ticket of this.tickets) {
        if (ticket.aborted) continue;
        this.abortedCalls++;
        void ticket.abort();
      }
    }
    // Engine-side pauses (vLLM's `/pause`) run once the calls in flight are marked aborted, so an
    // answer the engine cuts short is discarded, never recorded; bounded like the abort hooks.
    if (this.pauseListeners.length > 0) {
      const mode = this.mode;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(this.pauseListeners.map(async (l) => l(mode))),
        new Promise((r) => (timer = setTimeout(r, ABORT_HOOK_TIMEOUT_MS))),
      ]);
      clearTimeout(timer);
    }
    if (this.tickets.size > 0) {
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
    return { drained: this.tickets.size === 0, inflight: this.tickets.size };
  }

  /** Admits calls again, the waiting ones first. */
  resume(): void {
    if (this.pausedSince !== null) this.pausedTotalMs += Date.now() - this.pausedSince;
    this.pausedSince = null;
    this.paused = false;
    this.mode = null;
    for (const listener of this.resumeListeners) listener();
    for (const done of [...this.waiters]) done();
  }

  /**
   * Called on every pause, after the calls in flight were marked aborted (in `abort` mode); `pause`
   * waits for it (at most {@link ABORT_HOOK_TIMEOUT_MS}) before it waits for the drain.
   */
  onPause(listener: (mode: FenceMode) => Promise<void> | void): void {
    this.pauseListeners.push(listener);
  }

  /** Called on every resume, before the waiting calls are released (weights may have changed). */
  onResume(listener: () => void): void {
    this.resumeListeners.push(listener);
  }

  /**
   * Total time the fence has been paused since it was made (ms), the current pause included: a
   * call held for its `min_policy_version` subtracts it, so waiting out a weight update (an
   * expected wait) never counts against its bound.
   *
   * @example
   * ```ts
   * const p0 = fence.pausedMs(); await sleep(1000); const unpausedMs = 1000 - (fence.pausedMs() - p0);
   * ```
   */
  pausedMs(): number {
    return this.pausedTotalMs + (this.pausedSince === null ? 0 : Date.now() - this.pausedSince);
  }

  /** Sets the policy version stamped on records of calls admitted from now on. */
  setPolicyVersion(version: string | null): void {
    this.policyVersion = version;
  }

  status(): FenceStatus {
    return {
      paused: this.paused,
      mode: this.mode,
      inflight: this.tickets.size,
      waiting: this.waiters.size,
      policy_version: this.policyVersion,
      aborted_calls: this.abortedCalls,
      reissued_calls: this.reissuedCalls,
    };
  }
}
