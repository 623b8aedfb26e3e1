/**
 * When a dispatcher last had every frame sent to it in hand, so that a gateway is judged silent
 * only for silence that is its own.
 *
 * A Durable Object runs one event at a time; frames that arrive while it works wait outside the
 * isolate, in arrival order across all sockets, and nothing inside it can see how many wait. A
 * gateway's ping (answered by the platform's auto-response, whose timestamp liveness reads) can
 * wait there too: in a burst of 10,000 results over 100 gateways the dispatcher fell more than 45 s
 * behind, and closed gateways whose pings were queued behind other gateways' results
 * (bench/scale.ts). What the object can see is whether it was idle: when no event ran for
 * {@link IDLE_GAP_MS}, nothing was waiting, so every frame sent before then has been handled.
 * Liveness judges silence as of that moment.
 *
 * @module
 */

/** No event for this long (ms) means none was waiting: the object had caught up. */
export const IDLE_GAP_MS = 50;

/**
 * Tracks the events of one object and the last moment it was known caught up.
 *
 * @example
 * ```ts
 * const backlog = new Backlog(Date.now());
 * backlog.begin(Date.now()); try { await handle(frame); } finally { backlog.end(Date.now()); }
 * const silentFor = backlog.asOf(Date.now()) - lastFrameAt; // silence that is the gateway's own
 * ```
 */
export class Backlog {
  private active = 0;
  private idleSince: number;
  /** The last moment every frame sent to the object had been handled (ms). */
  caughtUpAt: number;

  constructor(now: number) {
    this.idleSince = now;
    this.caughtUpAt = now;
  }

  /** An event starts (events interleave at their awaits, so several may be open). */
  begin(now: number): void {
    if (this.active === 0 && now - this.idleSince >= IDLE_GAP_MS) this.caughtUpAt = now;
    this.active++;
  }

  /** An event ended. */
  end(now: number): void {
    this.active = Math.max(0, this.active - 1);
    if (this.active === 0) this.idleSince = now;
  }

  /**
   * The last moment every frame had been handled, as of `now`: `now` itself when no event runs and
   * none has for {@link IDLE_GAP_MS} (a call from outside the tracked events, such as an RPC).
   */
  asOf(now: number): number {
    return this.active === 0 && now - this.idleSince >= IDLE_GAP_MS ? now : Math.min(now, this.caughtUpAt);
  }

  /** Whether the object has not been caught up since `at` (it may have frames waiting from before). */
  behindSince(at: number, now: number): boolean {
    return this.asOf(now) < at;
  }
}
