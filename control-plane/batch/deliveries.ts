/**
 * What the ledger sends out after a change: its outbox to the queues' shards (`outbox-delivery`)
 * and the callbacks of completed tasks (`callback-delivery`). Both are re-derived from stored rows
 * and never throw: a failure is recorded on its row with a backoff and left to the alarm, so a
 * failed delivery never fails the request that caused it.
 *
 * @module
 */

import { SingleFlight } from "../shared/single-flight";
import { deliverDueCallbacks } from "./callback-delivery";
import { armAlarm, type Ledger } from "./ledger";
import { deliverDueOutbox } from "./outbox-delivery";
import * as store from "./store";

/**
 * The ledger's deliveries, one pass of each kind at a time.
 *
 * @example
 * ```ts
 * const deliveries = new Deliveries(ledger);
 * await deliveries.afterChange(); // after a result was recorded
 * ```
 */
export class Deliveries {
  /** Outbox draining: an RPC to a shard awaits, and the open input gate lets another drain ask. */
  private readonly draining = new SingleFlight();
  /**
   * A callback pass is running. Results recorded while a callback POST awaits its answer ask for
   * another pass, and the row is still due until the answer is recorded: without this guard the
   * same callback went out twice although the listener answered 200 both times.
   */
  private readonly delivering = new SingleFlight();

  constructor(private readonly ledger: Ledger) {}

  /**
   * Delivers due outbox rows to their queues. Failures are recorded on the rows with a backoff and
   * left to the alarm; this never throws, so a failed delivery never fails the trainer's request.
   */
  async drainOutbox(): Promise<void> {
    const { db } = this.ledger;
    await this.draining.run(
      async () => {
        const batch = store.readBatch(db);
        if (batch) await deliverDueOutbox(db, this.ledger.env, batch.batchId);
      },
      { settle: () => armAlarm(this.ledger) },
    );
  }

  /** POSTs every due callback once; failures are rescheduled with backoff. Never throws. */
  async deliverCallbacks(): Promise<void> {
    const { db } = this.ledger;
    await this.delivering.run(
      async () => {
        if (store.readBatch(db)) await deliverDueCallbacks(db, this.ledger.env, this.ledger.callbackFetch);
      },
      { settle: () => armAlarm(this.ledger) },
    );
  }

  /**
   * After results were recorded: wake long-polls, send the state events, re-arm the alarm, then
   * push the outbox and deliver callbacks in `waitUntil`, so the caller's answer does not wait.
   */
  async afterChange(): Promise<void> {
    this.ledger.waiters.notify();
    this.ledger.events.schedule();
    await armAlarm(this.ledger);
    this.ledger.ctx.waitUntil(
      (async () => {
        await this.drainOutbox();
        await this.deliverCallbacks();
      })(),
    );
  }
}
