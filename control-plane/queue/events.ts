/**
 * The dispatcher's state events (`GET /v1/events`): `gateway` events (connect, disconnect, drain,
 * pause and resume, policy version, credit and metrics) and `fence` events. Rather than hook each
 * write, the QueueDO calls {@link recordShardEvents} after every frame, close, alarm and admin
 * change: it compares each gateway and the fence with the last event sent (kept in
 * `event_snapshots`, so a restart does not announce everything again) and records what changed.
 * A change of connection, drain or fence is announced at once; a gateway whose credit or metrics
 * alone changed is announced at most once per {@link METRICS_EVENT_MS} (its newest values go out
 * with its next change after that).
 *
 * @module
 */
import { inArray } from "drizzle-orm";
import type { FenceEventData, GatewayEventData } from "../events/kinds";
import { addEvent } from "../events/outbox";
import type { QueueDb } from "./db";
import { readFence } from "./fence";
import * as schema from "./schema";
import type { Shard } from "./shard";
import { parseShardName } from "./shards";
import { getGateway, listGateways } from "./store";

/** Shortest time between two `gateway` events of one gateway that differ only in credit or metrics. */
export const METRICS_EVENT_MS = 2_000;

/** The last event sent under each name (one read per call: this runs after every frame). */
type Snapshots = Map<string, { state: string; full: string; at: number }>;

function readSnapshots(db: QueueDb, names: string[] | null): Snapshots {
  const rows =
    names === null
      ? db.select().from(schema.eventSnapshots).all()
      : db.select().from(schema.eventSnapshots).where(inArray(schema.eventSnapshots.name, names)).all();
  return new Map(rows.map((r) => [r.name, r]));
}

/** Records an event when `full` differs from the last one sent under `name`; true when it did. */
function announce(
  db: QueueDb,
  snapshots: Snapshots,
  name: string,
  state: string,
  full: string,
  now: number,
  record: () => void,
): boolean {
  const last = snapshots.get(name);
  if (last && last.full === full) return false;
  if (last && last.state === state && now - last.at < METRICS_EVENT_MS) return false;
  record();
  db.insert(schema.eventSnapshots)
    .values({ name, state, full, at: now })
    .onConflictDoUpdate({ target: schema.eventSnapshots.name, set: { state, full, at: now } })
    .run();
  return true;
}

/**
 * Records the shard's gateway and fence events that are due; returns how many. Synchronous:
 * call it inside a transaction (or with no `await` since the change it follows).
 *
 * @example
 * ```ts
 * if (recordShardEvents(shard, Date.now()) > 0) flusher.schedule();
 * recordShardEvents(shard, Date.now(), "gpu-node-1"); // after that gateway's frame: it alone
 * ```
 */
export function recordShardEvents(shard: Shard, now: number, only?: string): number {
  const { db, queue, shardName } = shard;
  const fence = readFence(db, queue);
  // After a gateway's frame only that gateway is looked at: a frame changes its sender's row, and
  // a gateway a dispatch assigned to answers with a frame of its own (progress), which announces
  // it. Looking at every gateway after every frame was half the dispatcher's CPU with 100
  // gateways (bench/scale.ts). Closes, alarms and admin changes look at all of them, with one
  // read of every snapshot.
  const gateways =
    only === undefined ? listGateways(db) : [getGateway(db, only)].filter((g) => g !== undefined);
  const snapshots = readSnapshots(db, only === undefined ? null : [`gateway:${only}`, "fence"]);
  let recorded = 0;
  for (const gw of gateways) {
    const data: GatewayEventData = {
      queue,
      shard: shardName,
      node_id: gw.nodeId,
      connected: gw.connected,
      draining: gw.draining,
      paused: fence.paused,
      policy_version: fence.policy_version,
      credit: gw.credit,
      metrics: gw.metrics ? (JSON.parse(gw.metrics) as Record<string, number>) : null,
    };
    const state = JSON.stringify([data.connected, data.draining, data.paused, data.policy_version]);
    const full = JSON.stringify(data);
    if (
      announce(db, snapshots, `gateway:${gw.nodeId}`, state, full, now, () =>
        addEvent(db, "gateway", null, data, now),
      )
    )
      recorded++;
  }
  // Every shard of a queue holds the same fence: its first shard alone announces it.
  if (parseShardName(shardName).index === 0 && fence.fence_seq > 0) {
    const data: FenceEventData = {
      queue,
      paused: fence.paused,
      mode: fence.mode,
      policy_version: fence.policy_version,
      fence_seq: fence.fence_seq,
    };
    const full = JSON.stringify(data);
    if (announce(db, snapshots, "fence", full, full, now, () => addEvent(db, "fence", null, data, now)))
      recorded++;
  }
  return recorded;
}
