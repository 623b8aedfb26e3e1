/**
 * In-memory capture of completion records, per session, keyed by the session's secret API key.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { appendFile, mkdir } from "node:fs/promises";
import path from "node:path";
import type { CompletionRecord, JsonObject } from "../protocol";
import { type PolicyVersionGap, ProxyHttpError, SessionStateError } from "./errors";

/** Most completion records kept for one session; a call past it is refused with 429. */
export const MAX_RECORDS_PER_SESSION = 10_000;
/**
 * Most bytes of records (as JSON) kept in memory for one session; a call past it is refused with
 * 429. Records repeat the whole history, so a long session grows quadratically: this is the bound.
 */
export const MAX_SESSION_CAPTURE_BYTES = 512 * 1024 * 1024;
/** File, inside a session folder, that receives one JSON record per line. */
export const COMPLETIONS_FILE = "completions.jsonl";

interface SessionEntry {
  sessionId: string;
  key: string;
  meta: JsonObject;
  records: CompletionRecord[];
  /** Calls admitted but not finished: they count against the cap so concurrency cannot overshoot it. */
  inflight: number;
  /** Bytes of the records kept (JSON length). */
  bytes: number;
  /** Folder the records are appended to, or null. */
  dir: string | null;
  /** Pending writes, in order. */
  writes: Promise<void>;
  /** Set once a call found no replica at its `min_policy_version` in time: the session is over. */
  versionGap: PolicyVersionGap | null;
  onPolicyVersionGap: ((gap: PolicyVersionGap) => void) | null;
  /** Set once an engine failure reached the harness (after the proxy's retries): the session is tainted. */
  engineFailure: string | null;
  onEngineFailure: ((failure: string) => void) | null;
}

/** Where a session's records go besides memory. */
export interface SessionOptions {
  /** Session folder: records are appended to `<dir>/completions.jsonl` as they complete. */
  dir?: string;
  /**
   * Called once, when a call of the session is refused because no replica reached its
   * `min_policy_version` within the proxy's bound (the gateway ends the session on it).
   */
  onPolicyVersionGap?: (gap: PolicyVersionGap) => void;
  /**
   * Called once, when an engine failure (unreachable, timed out, 5xx, a broken contract) reached
   * the session's harness after the proxy's retries: what the agent did next answered no model
   * (the gateway ends the session as an infra failure on it).
   */
  onEngineFailure?: (failure: string) => void;
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

  constructor(
    private readonly maxRecordsPerSession = MAX_RECORDS_PER_SESSION,
    private readonly maxSessionBytes = MAX_SESSION_CAPTURE_BYTES,
    private readonly onWriteError: (sessionId: string, error: Error) => void = () => {},
  ) {}

  /** Opens a session and returns its key; opening an id that is already open is a bug of the caller. */
  open(sessionId: string, meta: JsonObject = {}, opts: SessionOptions = {}): { key: string } {
    if (this.bySession.has(sessionId)) throw new SessionStateError(sessionId, "is already open");
    const dir = opts.dir ?? null;
    const entry: SessionEntry = {
      sessionId,
      key: newSessionKey(),
      meta,
      records: [],
      inflight: 0,
      bytes: 0,
      dir,
      writes: dir ? mkdir(dir, { recursive: true }).then(() => undefined) : Promise.resolve(),
      versionGap: null,
      onPolicyVersionGap: opts.onPolicyVersionGap ?? null,
      engineFailure: null,
      onEngineFailure: opts.onEngineFailure ?? null,
    };
    entry.writes = entry.writes.catch((err: Error) => this.onWriteError(sessionId, err));
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
    if (entry.bytes >= this.maxSessionBytes) {
      throw new ProxyHttpError(
        429,
        "rate_limit_error",
        "session_capture_limit",
        `session '${sessionId}' reached the limit of ${this.maxSessionBytes} bytes of recorded completions`,
      );
    }
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
    const line = `${JSON.stringify(record)}\n`;
    entry.bytes += line.length;
    if (entry.dir) {
      const file = path.join(entry.dir, COMPLETIONS_FILE);
      entry.writes = entry.writes
        .then(() => appendFile(file, line))
        .catch((err: Error) => this.onWriteError(sessionId, err));
    }
  }

  /** Resolves once every record of the session so far is on disk (at once without a folder). */
  async flush(sessionId: string): Promise<void> {
    await this.bySession.get(sessionId)?.writes;
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

  /**
   * Ends the session for a version gap: the first gap is kept (later calls are refused with it)
   * and the session's `onPolicyVersionGap` is told once.
   */
  endForVersionGap(sessionId: string, gap: PolicyVersionGap): void {
    const entry = this.bySession.get(sessionId);
    if (!entry || entry.versionGap) return;
    entry.versionGap = gap;
    entry.onPolicyVersionGap?.(gap);
  }

  /** Notes an engine failure that reached the session's harness; the first is kept and told once. */
  noteEngineFailure(sessionId: string, failure: string): void {
    const entry = this.bySession.get(sessionId);
    if (!entry || entry.engineFailure) return;
    entry.engineFailure = failure;
    entry.onEngineFailure?.(failure);
  }

  /** The first engine failure that reached the session's harness, or null. */
  engineFailure(sessionId: string): string | null {
    return this.bySession.get(sessionId)?.engineFailure ?? null;
  }

  /** The version gap that ended the session, or null. */
  versionGap(sessionId: string): PolicyVersionGap | null {
    return this.bySession.get(sessionId)?.versionGap ?? null;
  }

  /** True while the session is open. */
  hasSession(sessionId: string): boolean {
    return this.bySession.has(sessionId);
  }

  /** The session id a key belongs to, or null. */
  sessionOfKey(key: string): string | null {
    return this.byKey.get(key)?.sessionId ?? null;
  }

  /** Forgets the session, its key and its records; resolves once its pending writes are done. */
  close(sessionId: string): Promise<void> {
    const entry = this.bySession.get(sessionId);
    if (!entry) return Promise.resolve();
    this.bySession.delete(sessionId);
    this.byKey.delete(entry.key);
    return entry.writes;
  }

  /** Number of open sessions. */
  get size(): number {
    return this.bySession.size;
  }
}
