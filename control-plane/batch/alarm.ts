/**
 * The ledger's alarm, multiplexed over its timers (a Durable Object has one alarm): session
 * deadlines and waiting limits (I3), no-gateway checks, outbox retries, callback deliveries and
 * the state events' retries. Each part re-derives its work from state, so a repeated or late
 * alarm is harmless; the handler re-arms the alarm at the next timer last.
 *
 * @module
 */
import { shardsOf } from "../queue/shards";
import type { GatewayPresence } from "../queue/stats";
import type { Deliveries } from "./deliveries";
import { armAlarm, type Ledger } from "./ledger";
import * as lifecycle from "./lifecycle";
import * as noGateway from "./no-gateway";
import * as outbox from "./outbox-store";
import * as store from "./store";

/** When a queue's dispatchers cannot say whether it has gateways, its no-gateway checks wait this long. */
const PRESENCE_RETRY_MS = 30_000;

/** Whether a gateway is (or when one last was) connected to any shard of `queue`. */
async function queuePresence(ledger: Ledger, queue: string): Promise<GatewayPresence> {
  const { env } = ledger;
  const shards = shardsOf(queue, env.POLAR_QUEUE_SHARDS);
  return noGateway.combinePresence(
    await Promise.all(shards.map((name) => env.QUEUE.getByName(name).gatewayPresence())),
  );
}

/**
 * Due no-gateway checks: asks every shard of each queue whether a gateway is (or when one last
 * was) connected, then ends the sessions of queues without one for the limit, or re-arms their
 * check. Returns how many sessions ended. Never throws: a queue that cannot answer is asked again
 * after PRESENCE_RETRY_MS.
 */
async function checkNoGateway(ledger: Ledger, batchId: string): Promise<number> {
  const { db } = ledger;
  let ended = 0;
  for (const queue of noGateway.queuesToCheck(db, Date.now())) {
    let presence: GatewayPresence | null = null;
    try {
      presence = await queuePresence(ledger, queue);
    } catch (error) {
      console.warn(`BatchDO ${batchId}: gateways of queue '${queue}' unknown:`, error);
    }
    // The await opened the input gate: the sessions are re-read (some may have started).
    ended += ledger.ctx.storage.transactionSync(() => {
      const now = Date.now();
      if (!presence) {
        noGateway.deferChecks(db, queue, now + PRESENCE_RETRY_MS, now);
        return 0;
      }
      const withdrawn = noGateway.applyPresence(db, batchId, queue, presence, ledger.noGatewayMs, now);
      outbox.addWithdrawals(db, withdrawn, now);
      return withdrawn.length;
    });
  }
  return ended;
}

/**
 * The alarm handler: ends sessions past their deadline or waiting limit, asks the queues due a
 * no-gateway check, retries the outbox, callbacks and state events, and re-arms.
 *
 * @example
 * ```ts
 * override async alarm() { await runAlarm(this.ledger, this.deliveries); }
 * ```
 */
export async function runAlarm(ledger: Ledger, deliveries: Deliveries): Promise<void> {
  const { db } = ledger;
  const batch = store.readBatch(db);
  if (batch) {
    const expired = ledger.ctx.storage.transactionSync(() => {
      const now = Date.now();
      const withdrawn = lifecycle.expireDeadlines(db, batch.batchId, now);
      outbox.addWithdrawals(db, withdrawn, now);
      return withdrawn.length;
    });
    const abandoned = await checkNoGateway(ledger, batch.batchId);
    if (expired + abandoned > 0) ledger.waiters.notify();
  }
  await deliveries.drainOutbox();
  await deliveries.deliverCallbacks();
  await ledger.events.flush();
  await armAlarm(ledger);
}
