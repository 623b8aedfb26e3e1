/**
 * What every module of the batch ledger works on: the batch's database, its Durable Object state
 * (alarm, `waitUntil`, transactions), the Worker's bindings, the flusher of its state events, the
 * long-polls waiting for its next result, and its timing settings. The BatchDO builds one at
 * construction and hands it to the plain modules (`creation`, `assignments`, `result-intake`,
 * `cancellation`, `result-pages`, `views`, `deliveries`, `alarm`), which keep no state of their own.
 *
 * @module
 */
import { LIMITS } from "../../protocol";
import { EventFlusher } from "../events/outbox";
import { REGISTRY_NAME } from "../registry/registry-do";
import { ResultWaiters } from "../shared/result-waiters";
import { batchEventData, coalesceBatchEvent } from "./events";
import { nextTimerAt } from "./lifecycle";
import type { BatchDb } from "./store";

/**
 * One batch's ledger.
 *
 * @example
 * ```ts
 * const ledger = openLedger(ctx, () => env, drizzle(ctx.storage, { schema }), () => fetch);
 * ledger.waiters.notify(); // a result was accepted
 * ```
 */
export interface Ledger {
  readonly db: BatchDb;
  readonly ctx: DurableObjectState;
  readonly env: Env;
  /** Sends the ledger's state events to the log, off the path of every answer. */
  readonly events: EventFlusher;
  /** Long-polls waiting for the next accepted result (in memory: a restart ends them early). */
  readonly waiters: ResultWaiters;
  /** The fetch callbacks are POSTed with (the object's, which tests replace to observe retries). */
  readonly callbackFetch: typeof fetch;
  /** Grace after a session's run budget before its deadline ends it (`POLAR_DEADLINE_GRACE_SECONDS`). */
  readonly graceMs: number;
  /** How long a queue may have no gateway before its waiting sessions end (`POLAR_NO_GATEWAY_SECONDS`). */
  readonly noGatewayMs: number;
}

/** Seconds from an env variable, or the default. */
function seconds(raw: string | undefined, fallback: number): number {
  const value = raw === undefined ? Number.NaN : Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : fallback;
}

/**
 * Copies a changed batch status to the registry, whose batch listing filters on it. Runs after the
 * events that announced the change were sent; a throw fails the flush, so the copy is retried too.
 */
function statusReporter(db: BatchDb, env: () => Env): () => Promise<void> {
  /** The status last copied to the registry. */
  let reported = "running";
  return async () => {
    const data = batchEventData(db);
    if (!data || data.status === reported) return;
    await env().REGISTRY.getByName(REGISTRY_NAME).setBatchStatus(data.batch_id, data.status);
    reported = data.status;
  };
}

/**
 * Builds the ledger context of a BatchDO.
 *
 * @example
 * ```ts
 * this.ledger = openLedger(ctx, () => this.env, drizzle(ctx.storage, { schema }), () => this.callbackFetch);
 * ```
 */
export function openLedger(
  ctx: DurableObjectState,
  env: () => Env,
  db: BatchDb,
  callbackFetch: () => typeof fetch,
): Ledger {
  const events = new EventFlusher(
    ctx,
    env,
    db,
    () => `batch:${ctx.id.name ?? ctx.id.toString()}`,
    () => ctx.storage.transactionSync(() => coalesceBatchEvent(db, Date.now())),
    statusReporter(db, env),
  );
  return {
    db,
    ctx,
    // Read through the object on each use: the Durable Object owns `env` (tests may swap a binding).
    get env() {
      return env();
    },
    events,
    waiters: new ResultWaiters(),
    get callbackFetch() {
      return callbackFetch();
    },
    // Read on each use, as the variables are: a changed variable is never cached stale.
    get graceMs() {
      return seconds(env().POLAR_DEADLINE_GRACE_SECONDS, LIMITS.deadlineGraceSeconds) * 1000;
    },
    get noGatewayMs() {
      // Positive only: a zero limit would end every waiting session at once.
      const value = seconds(env().POLAR_NO_GATEWAY_SECONDS, LIMITS.noGatewaySeconds);
      return (value > 0 ? value : LIMITS.noGatewaySeconds) * 1000;
    },
  };
}

/**
 * Arms the one alarm at the earliest timer (outbox, deadline, waiting check, callback); leaves an
 * earlier alarm as it is. A Durable Object has a single alarm, so every timer of the ledger is
 * multiplexed on it and the handler re-derives what is due from state.
 *
 * @example
 * ```ts
 * await armAlarm(ledger); // after a change that may have moved a timer
 * ```
 */
export async function armAlarm(ledger: Ledger): Promise<void> {
  const next = nextTimerAt(ledger.db);
  if (next === null) return;
  const current = await ledger.ctx.storage.getAlarm();
  if (current === null || current > next) await ledger.ctx.storage.setAlarm(Math.max(next, Date.now()));
}
