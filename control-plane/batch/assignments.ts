/**
 * Leases as the dispatcher reports them to the ledger: an assignment (the new lease supersedes
 * older ones), stage changes under the current lease, a lease lost with its gateway, and the
 * checks a shard or an artifact upload makes against the session's current lease. Each change
 * runs in one `transactionSync`, so the read of the session and the write that depends on it
 * commit together even though the RPC that brought them let other events in before.
 *
 * @module
 */
import { type GatewayStage, isTerminal, type SessionStatus } from "../../protocol";
import type { AssignOutcome, LeaseLostOutcome, ProgressOutcome } from "../shared/ledger-rpc";
import type { Deliveries } from "./deliveries";
import { armAlarm, type Ledger } from "./ledger";
import * as lifecycle from "./lifecycle";
import * as outbox from "./outbox-store";
import * as store from "./store";

/**
 * Records an assignment made by the dispatcher (the new lease supersedes older ones).
 *
 * @example
 * ```ts
 * await markAssigned(ledger, deliveries, "b_1.0.0", "l_1", 1, "node-a"); // "assigned"
 * ```
 */
export async function markAssigned(
  ledger: Ledger,
  deliveries: Deliveries,
  sessionId: string,
  leaseId: string,
  attempt: number,
  nodeId: string,
): Promise<AssignOutcome> {
  const { db } = ledger;
  const { outcome, superseded } = ledger.ctx.storage.transactionSync(() => {
    const now = Date.now();
    const before = store.readSession(db, sessionId);
    const outcome = store.markAssigned(db, sessionId, leaseId, attempt, nodeId, now);
    // A lease still running is superseded by this one (a double dispatch): its gateway is told
    // to stop now, through every shard of the queue (it may sit on any of them).
    const superseded =
      outcome === "assigned" && before?.leaseId && before.leaseId !== leaseId && before.status !== "QUEUED"
        ? before.leaseId
        : null;
    if (superseded)
      outbox.addWithdrawals(db, [{ session_id: sessionId, lease_id: superseded, superseded: true }], now);
    return { outcome, superseded };
  });
  if (outcome === "assigned") ledger.events.schedule();
  if (superseded) ledger.ctx.waitUntil(deliveries.drainOutbox());
  return outcome;
}

/**
 * Records a stage change; a lease other than the current one is refused and counted.
 *
 * @example
 * ```ts
 * await markProgress(ledger, "b_1.0.0", "l_1", "RUNNING"); // "ok"
 * ```
 */
export async function markProgress(
  ledger: Ledger,
  sessionId: string,
  leaseId: string,
  status: GatewayStage,
): Promise<ProgressOutcome> {
  const outcome = ledger.ctx.storage.transactionSync(() =>
    store.markProgress(ledger.db, sessionId, leaseId, status, Date.now(), ledger.graceMs),
  );
  if (outcome === "ok") {
    ledger.events.schedule();
    await armAlarm(ledger);
  }
  return outcome;
}

/**
 * The gateway holding `leaseId` is gone (grace expired, or it restarted without the session):
 * requeue as attempt + 1, or end as ERROR kind `infra` after `max_attempts`.
 *
 * @example
 * ```ts
 * await leaseLost(ledger, deliveries, "b_1.0.0", "l_1", "gateway node-a gone"); // "requeued"
 * ```
 */
export async function leaseLost(
  ledger: Ledger,
  deliveries: Deliveries,
  sessionId: string,
  leaseId: string,
  reason: string,
): Promise<LeaseLostOutcome> {
  const { db } = ledger;
  const batch = store.readBatch(db);
  if (!batch) return "stale";
  const outcome = ledger.ctx.storage.transactionSync(() => {
    const now = Date.now();
    const lost = lifecycle.leaseLost(db, batch.batchId, sessionId, leaseId, reason, ledger.noGatewayMs, now);
    if (lost.outcome === "requeued") outbox.addOutbox(db, "enqueue", lost.queue!, lost.taskIndex!, null, now);
    return lost.outcome;
  });
  if (outcome !== "stale") await deliveries.afterChange();
  return outcome;
}

/**
 * The session's current lease and batch, for artifact uploads; counts an upload under any other
 * lease as stale.
 *
 * @example
 * ```ts
 * if (checkUploadLease(ledger, sessionId, leaseId) !== "current") refuse();
 * ```
 */
export function checkUploadLease(
  ledger: Ledger,
  sessionId: string,
  leaseId: string,
): "current" | "stale" | "unknown" {
  const session = store.readSession(ledger.db, sessionId);
  if (!session) return "unknown";
  if (session.leaseId === leaseId && !isTerminal(session.status)) return "current";
  store.bumpCounter(ledger.db, "stale_uploads");
  return "stale";
}

/**
 * Where a session stands (status, attempt, current lease), or null when this ledger has no such
 * session: what a dispatcher asks before it dispatches again a session it lent to a sibling
 * shard that never settled the loan.
 *
 * @example
 * ```ts
 * sessionState(ledger, "b_1.0.0")?.status; // "QUEUED"
 * ```
 */
export function sessionState(
  ledger: Ledger,
  sessionId: string,
): { status: SessionStatus; attempt: number; lease_id: string | null } | null {
  const session = store.readSession(ledger.db, sessionId);
  return session ? { status: session.status, attempt: session.attempt, lease_id: session.leaseId } : null;
}
