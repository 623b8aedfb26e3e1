/**
 * In-memory capture of completion records, per session, keyed by the session's secret API key.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import type { CompletionRecord, JsonObject } from "../protocol";
import { ProxyHttpError, SessionStateError } from "./errors";

/** Most completion records kept for one session; a call past it is refused with 429. */
export const MAX_RECORDS_PER_SESSION = 10_000;

interface SessionEntry {
  sessionId: string;
  key: string;
  meta: JsonObject;
  records: CompletionRecord[];
  /** Calls admitted but not finished: they count against the cap so concurrency cannot overshoot it. */
  inflight: number;
}

/** A session as seen by a request handler. */
export interface SessionView {
  sessionId: string;
  meta: JsonObject;
}

/**
 * `sk-polar-<32 hex>`: shaped like an API key so harnesses that validate key formats accept it.
 *
 * @example
 * ```ts
 * newSessionKey(); // "sk-polar-3f9c…"
 * ```
 */
export function newSessionKey(): string {
  return `sk-polar-${randomBytes(16).toString("hex")}`;
}

/**
 * `cmp_<12 hex>`.
 *
 * @example
 * ```ts
 * newCompletionId(); // "cmp_a1b2c3d4e5f6"
 * ```
 */
export function newCompletionId(): string {
  return `cmp_${randomBytes(6).toString("hex")}`;
}

/**
 * Sessions, their keys and their records. Concurrent calls of one session are fine: each call
 * reserves a slot, then commits or releases it.
 *
 * @example
 * ```ts
 * const store = new CaptureStore();
 * const { key } = store.open("s-1", { task_id: "t" });
 * const session = store.resolveKey(key); // { sessionId: "s-1", meta }
 * store.reserve("s-1"); store.commit("s-1", record);
 * store.records("s-1"); // [record]
 * ```
 */
export class CaptureStore {
  private readonly bySession = new Map<string, SessionEntry>();
  private readonly byKey = new Map<string, SessionEntry>();

  constructor(private readonly maxRecordsPerSession = MAX_RECORDS_PER_SESSION) {}

  /** Opens a session and returns its key; opening an id that is already open is a bug of the caller. */
  open(sessionId: string, meta: JsonObject = {}): { key: string } {
    if (this.bySession.has(sessionId)) throw new SessionStateError(sessionId, "is already open");
    const entry: SessionEntry = { sessionId, key: newSessionKey(), meta, records: [], inflight: 0 };
    this.bySession.set(sessionId, entry);
    this.byKey.set(entry.key, entry);
    return { key: entry.key };
  }

  /** The session a key belongs to, or null for an unknown key. */
  resolveKey(key: string): SessionView | null {
    const entry = this.byKey.get(key);
    return entry ? { sessionId: entry.sessionId, meta: entry.meta } : null;
  }

  /** Admits one call; throws 429 when the session's record cap would be exceeded. */
  reserve(sessionId: string): void {
    const entry = this.bySession.get(sessionId);
    if (!entry)
      throw new ProxyHttpError(401, "invalid_request_error", "invalid_api_key", "session is closed");
    if (entry.records.length + entry.inflight >= this.maxRecordsPerSession) {
      throw new ProxyHttpError(
        429,
        "rate_limit_error",
        "session_completion_limit",
        `session '${sessionId}' reached the limit of ${this.maxRecordsPerSession} recorded completions`,
      );
    }
    entry.inflight++;
  }

  /** Stores the record of an admitted call (dropped if the session closed meanwhile). */
  commit(sessionId: string, record: CompletionRecord): void {
    const entry = this.bySession.get(sessionId);
    if (!entry) return;
    entry.inflight = Math.max(0, entry.inflight - 1);
    entry.records.push(record);
  }

  /** Gives back the slot of an admitted call that failed. */
  release(sessionId: string): void {
    const entry = this.bySession.get(sessionId);
    if (entry) entry.inflight = Math.max(0, entry.inflight - 1);
  }

  /** A copy of the session's records in completion order (empty for an unknown session). */
  records(sessionId: string): CompletionRecord[] {
    return [...(this.bySession.get(sessionId)?.records ?? [])];
  }

  /** Forgets the session, its key and its records. */
  close(sessionId: string): void {
    const entry = this.bySession.get(sessionId);
    if (!entry) return;
    this.bySession.delete(sessionId);
    this.byKey.delete(entry.key);
  }

  /** Number of open sessions. */
  get size(): number {
    return this.bySession.size;
  }
}
