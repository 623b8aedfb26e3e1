/**
 * Result intake: the ledger accepts exactly one result per session, under the session's current
 * lease (I1). The check and every write it leads to (the result, its evaluation, the withdrawals
 * of an early stop, or a requeue) run in one `transactionSync`: the RPC that brought the result
 * let other events in, so nothing read before it may be trusted, and nothing after it awaits.
 *
 * @module
 */
import type { SessionResult } from "../../protocol";
import type { ResultRefs, SubmitOutcome } from "../shared/ledger-rpc";
import type { Deliveries } from "./deliveries";
import { recordEvaluation } from "./evaluations";
import type { Ledger } from "./ledger";
import * as lifecycle from "./lifecycle";
import * as outbox from "./outbox-store";
import * as store from "./store";
import { countUploadedTokens } from "./uploaded-tokens";

/**
 * Records the outcome of a result checked as `open`, inside the caller's transaction. An `infra`
 * error with attempts left is not final: the session is requeued as attempt + 1 (I4), and the
 * gateway is still told "accepted" so it stops resending.
 */
function recordOpenResult(
  ledger: Ledger,
  batchId: string,
  session: NonNullable<ReturnType<typeof store.readSession>>,
  leaseId: string,
  result: SessionResult,
  refs: ResultRefs,
): SubmitOutcome {
  const { db } = ledger;
  const now = Date.now();
  if (result.status === "ERROR" && result.error?.kind === "infra") {
    const lost = lifecycle.leaseLost(
      db,
      batchId,
      session.sessionId,
      leaseId,
      `infra failure on ${result.node_id ?? "the gateway"}: ${result.error.message}`,
      ledger.noGatewayMs,
      now,
      true,
    );
    if (lost.outcome === "requeued") {
      outbox.addOutbox(db, "enqueue", lost.queue!, lost.taskIndex!, null, now);
      return "accepted";
    }
    if (lost.outcome === "failed") return "accepted";
  }
  lifecycle.recordResult(db, session, leaseId, result, refs, now);
  recordEvaluation(db, session.taskIndex, result);
  outbox.addWithdrawals(db, lifecycle.afterTerminal(db, session.taskIndex, now), now);
  return "accepted";
}

/**
 * Accepts the session's one result, or answers duplicate/stale (counted). An `infra` error with
 * attempts left is not final: the session is requeued as attempt + 1 (I4) and the gateway is
 * told "accepted" so it stops resending.
 *
 * @example
 * ```ts
 * await submitResult(ledger, deliveries, "b_1.0.0", "l_1", result, { trajectory: ref }); // "accepted"
 * ```
 */
export async function submitResult(
  ledger: Ledger,
  deliveries: Deliveries,
  sessionId: string,
  leaseId: string,
  result: SessionResult,
  refs: ResultRefs = {},
): Promise<SubmitOutcome> {
  const { db } = ledger;
  const batchId = store.readBatch(db)?.batchId ?? result.batch_id;
  const outcome = ledger.ctx.storage.transactionSync((): SubmitOutcome => {
    const check = store.checkResult(db, sessionId, leaseId);
    if (check.kind !== "open") return check.kind;
    return recordOpenResult(ledger, batchId, check.session, leaseId, result, refs);
  });
  if (outcome === "accepted") {
    const uploaded = refs.trajectory;
    if (uploaded && result.trajectory.traces.length === 0) {
      // Counted off the answer's path: the uploaded trajectory is read back from R2.
      ledger.ctx.waitUntil(countUploadedTokens(db, ledger.env.TRAJECTORIES, sessionId, uploaded));
    }
    await deliveries.afterChange();
  }
  return outcome;
}
