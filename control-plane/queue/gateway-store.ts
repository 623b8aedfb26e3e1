/**
 * Gateways of one dispatcher shard (the `gateways` table): hello, credit, metrics, liveness,
 * draining, and the choice of the gateway that receives the next session.
 * Synchronous Drizzle queries: a run of them without an `await` in between commits atomically.
 *
 * @module
 */
import { and, asc, eq, sql } from "drizzle-orm";
import type { GatewayCapacity, StageMetrics } from "../../protocol";
import type { GatewayRow, QueueDb } from "./db";
import * as schema from "./schema";
import { type GatewayLoad, pickBest } from "./scoring";

/**
 * Upper bound of a gateway's unused credit, so a buggy gateway cannot claim the whole queue at once.
 *
 * @example
 * ```ts
 * Math.min(hello.credit, MAX_GATEWAY_CREDIT);
 * ```
 */
export const MAX_GATEWAY_CREDIT = 4096;

/**
 * The gateway to receive the next session: among connected, non-draining gateways with credit,
 * the best by upstream's stage-pressure score (see `scoring.ts`).
 *
 * @example
 * ```ts
 * const gateway = pickGateway(db); if (!gateway) return; // nobody has credit
 * ```
 */
export function pickGateway(db: QueueDb): GatewayRow | undefined {
  const rows = db
    .select()
    .from(schema.gateways)
    .where(
      and(
        eq(schema.gateways.connected, true),
        eq(schema.gateways.draining, false),
        sql`${schema.gateways.credit} > 0`,
      ),
    )
    .all();
  if (rows.length <= 1) return rows[0];
  const leaseCounts = new Map(
    db
      .select({ nodeId: schema.leases.nodeId, n: sql<number>`count(*)` })
      .from(schema.leases)
      .groupBy(schema.leases.nodeId)
      .all()
      .map((r) => [r.nodeId, r.n]),
  );
  const loads: GatewayLoad[] = rows.map((r) => ({
    nodeId: r.nodeId,
    capacity: JSON.parse(r.capacity) as GatewayCapacity,
    metrics: r.metrics ? (JSON.parse(r.metrics) as StageMetrics) : null,
    reservations: r.reservations,
    leases: leaseCounts.get(r.nodeId) ?? 0,
  }));
  const best = pickBest(loads);
  return rows.find((r) => r.nodeId === best?.nodeId);
}

/**
 * Stores a gateway's latest stage metrics and clears its reservations (as upstream's heartbeat).
 *
 * @example
 * ```ts
 * updateMetrics(db, "node-a", credit.metrics);
 * ```
 */
export function updateMetrics(db: QueueDb, nodeId: string, metrics: StageMetrics): void {
  db.update(schema.gateways)
    .set({ metrics: JSON.stringify(metrics), reservations: 0 })
    .where(eq(schema.gateways.nodeId, nodeId))
    .run();
}

/**
 * Records that a frame arrived from `nodeId` (liveness).
 *
 * @example
 * ```ts
 * touchGateway(db, "node-a", Date.now());
 * ```
 */
export function touchGateway(db: QueueDb, nodeId: string, now: number): void {
  db.update(schema.gateways).set({ lastSeenAt: now }).where(eq(schema.gateways.nodeId, nodeId)).run();
}

/**
 * Sets or clears a gateway's draining flag; false when the node is unknown.
 *
 * @example
 * ```ts
 * setDraining(db, "node-a", true);
 * ```
 */
export function setDraining(db: QueueDb, nodeId: string, draining: boolean): boolean {
  return (
    db
      .update(schema.gateways)
      .set({ draining })
      .where(eq(schema.gateways.nodeId, nodeId))
      .returning({ nodeId: schema.gateways.nodeId })
      .all().length > 0
  );
}

/**
 * A gateway row by node id.
 *
 * @example
 * ```ts
 * getGateway(db, "node-a")?.credit;
 * ```
 */
export function getGateway(db: QueueDb, nodeId: string): GatewayRow | undefined {
  return db.select().from(schema.gateways).where(eq(schema.gateways.nodeId, nodeId)).get();
}

/**
 * All gateway rows.
 *
 * @example
 * ```ts
 * listGateways(db).filter((g) => g.connected);
 * ```
 */
export function listGateways(db: QueueDb): GatewayRow[] {
  return db.select().from(schema.gateways).orderBy(asc(schema.gateways.nodeId)).all();
}

/**
 * Registers (or re-registers) a gateway under connection `connId` with a fresh credit.
 *
 * @example
 * ```ts
 * upsertGateway(db, hello.node_id, connId, hello.credit, hello.capacity, Date.now());
 * ```
 */
export function upsertGateway(
  db: QueueDb,
  nodeId: string,
  connId: string,
  credit: number,
  capacity: GatewayCapacity,
  now: number,
): void {
  const values = {
    connId,
    credit: Math.min(credit, MAX_GATEWAY_CREDIT),
    capacity: JSON.stringify(capacity),
    connected: true,
    connectedAt: now,
    disconnectedAt: null,
    lastSeenAt: now,
    reservations: 0,
  };
  db.insert(schema.gateways)
    .values({ nodeId, ...values })
    .onConflictDoUpdate({ target: schema.gateways.nodeId, set: values })
    .run();
}

/**
 * Adds `grant` to a gateway's credit (capped at MAX_GATEWAY_CREDIT).
 *
 * @example
 * ```ts
 * addCredit(db, "node-a", 2);
 * ```
 */
export function addCredit(db: QueueDb, nodeId: string, grant: number): void {
  db.update(schema.gateways)
    .set({ credit: sql`min(${schema.gateways.credit} + ${grant}, ${MAX_GATEWAY_CREDIT})` })
    .where(eq(schema.gateways.nodeId, nodeId))
    .run();
}

/**
 * Marks a gateway disconnected (credit 0) if `connId` is still its current, connected connection;
 * a replaced socket closing late must not disconnect its successor. Leases stay for a reconnect.
 * True when this call disconnected it.
 *
 * @example
 * ```ts
 * disconnectGateway(db, "node-a", connId, Date.now());
 * ```
 */
export function disconnectGateway(db: QueueDb, nodeId: string, connId: string, now: number): boolean {
  return (
    db
      .update(schema.gateways)
      .set({ connected: false, credit: 0, disconnectedAt: now })
      .where(
        and(
          eq(schema.gateways.nodeId, nodeId),
          eq(schema.gateways.connId, connId),
          eq(schema.gateways.connected, true),
        ),
      )
      .returning({ nodeId: schema.gateways.nodeId })
      .all().length > 0
  );
}

/**
 * Unused credit of the gateways that may receive sessions (connected, not draining).
 *
 * @example
 * ```ts
 * spareCredit(db); // how many sessions this shard could hand out now
 * ```
 */
export function spareCredit(db: QueueDb): number {
  return (
    db
      .select({ n: sql<number>`coalesce(sum(${schema.gateways.credit}), 0)` })
      .from(schema.gateways)
      .where(and(eq(schema.gateways.connected, true), eq(schema.gateways.draining, false)))
      .get()?.n ?? 0
  );
}
