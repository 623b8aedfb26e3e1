/**
 * Session affinity over the engine replicas: a session stays on its replica, and on one
 * data-parallel rank of it, so its prefix cache is reused; a session without a usable pin is
 * placed round-robin over the healthy replicas (over all of them when none is healthy).
 *
 * @module
 */
import type { Replica } from "./replica-state";

/** Most session → replica pins kept; the oldest pin is forgotten past it. */
export const MAX_AFFINITY_ENTRIES = 100_000;

/** What affinity reads of a replica. */
type Placeable = Pick<Replica, "url" | "healthy" | "ranks">;

/**
 * The session → replica (and DP rank) pins of one replica set.
 *
 * @example
 * ```ts
 * const affinity = new SessionAffinity();
 * const r = affinity.choose("sess-1", candidates); // the same replica for every call of sess-1
 * affinity.dpRank("sess-1", r.url); // its DP rank on a `--dp-aware` worker, else null
 * ```
 */
export class SessionAffinity {
  /** Session → replica URL, oldest first (a Map keeps insertion order). */
  private readonly pins = new Map<string, string>();
  /** The DP rank each session is pinned to on its replica (DP-aware router workers only). */
  private readonly rankPins = new Map<string, number>();
  private readonly nextRank = new Map<string, number>();
  private next = 0;

  /**
   * The replica for a call of `sessionId` among `candidates` (never empty): its pinned one while
   * healthy, else the next one round-robin, which the session is pinned to from now on.
   */
  choose<R extends Placeable>(sessionId: string, candidates: readonly R[]): R {
    const pinned = this.pins.get(sessionId);
    const pin = candidates.find((r) => r.url === pinned && r.healthy);
    if (pin) {
      this.pinRank(sessionId, pin);
      return pin;
    }
    const healthy = candidates.filter((r) => r.healthy);
    const pool = healthy.length > 0 ? healthy : candidates;
    const chosen = pool[this.next++ % pool.length]!;
    this.pins.delete(sessionId);
    this.pins.set(sessionId, chosen.url);
    if (pinned !== chosen.url) this.rankPins.delete(sessionId);
    this.pinRank(sessionId, chosen);
    if (this.pins.size > MAX_AFFINITY_ENTRIES) {
      const oldest = this.pins.keys().next().value!;
      this.pins.delete(oldest);
      this.rankPins.delete(oldest);
    }
    return chosen;
  }

  /** The DP rank `sessionId` is pinned to on `url`, or null (not DP-aware, or not its replica). */
  dpRank(sessionId: string, url: string): number | null {
    if (this.pins.get(sessionId) !== url) return null;
    return this.rankPins.get(sessionId) ?? null;
  }

  /** Forgets a session's pins. */
  forget(sessionId: string): void {
    this.pins.delete(sessionId);
    this.rankPins.delete(sessionId);
  }

  /** Keeps the session's rank when `r` still lists it, else pins the replica's next rank in turn. */
  private pinRank(sessionId: string, r: Placeable): void {
    const current = this.rankPins.get(sessionId);
    if (r.ranks.length === 0) {
      this.rankPins.delete(sessionId);
      return;
    }
    if (current !== undefined && r.ranks.includes(current)) return;
    const n = this.nextRank.get(r.url) ?? 0;
    this.nextRank.set(r.url, n + 1);
    this.rankPins.set(sessionId, r.ranks[n % r.ranks.length]!);
  }
}
