/**
 * Admin fan-out: send one `admin` message to many gateways and collect their `admin_ack` answers
 * (matched by `request_id`) until all answered or a timeout. The pending requests live in the
 * QueueDO's memory: the DO stays awake while the RPC that started them waits, so no state needs
 * to survive hibernation.
 *
 * @module
 */
import type { AdminAckMessage } from "../../protocol";

/** One gateway's outcome (upstream fork's `{node_id, status, response|error}`, flattened). */
export interface AdminNodeResult {
  node_id: string;
  ok: boolean;
  paused: boolean;
  inflight: number;
  policy_version: string | null;
  error?: string;
}

/**
 * Pending admin requests of one dispatcher.
 *
 * @example
 * ```ts
 * const waiting = fanout.expect("req-1", "node-a", 5000);
 * fanout.resolve("node-a", ack); // from webSocketMessage
 * const result = await waiting;
 * ```
 */
export class AdminFanout {
  private readonly pending = new Map<string, (result: AdminNodeResult) => void>();

  private key(requestId: string, nodeId: string): string {
    return `${requestId}\u0000${nodeId}`;
  }

  /** Resolves with the node's ack, or a failed result after `timeoutMs`. */
  expect(requestId: string, nodeId: string, timeoutMs: number): Promise<AdminNodeResult> {
    return new Promise((resolve) => {
      const key = this.key(requestId, nodeId);
      const timer = setTimeout(() => {
        this.pending.delete(key);
        resolve({
          node_id: nodeId,
          ok: false,
          paused: false,
          inflight: 0,
          policy_version: null,
          error: `no admin_ack within ${timeoutMs} ms`,
        });
      }, timeoutMs);
      this.pending.set(key, (result) => {
        clearTimeout(timer);
        this.pending.delete(key);
        resolve(result);
      });
    });
  }

  /** Delivers an ack; false when nobody waits for it (late or unknown request id). */
  resolve(nodeId: string, ack: AdminAckMessage): boolean {
    const waiter = this.pending.get(this.key(ack.request_id, nodeId));
    if (!waiter) return false;
    waiter({
      node_id: nodeId,
      ok: ack.ok,
      paused: ack.paused,
      inflight: ack.inflight,
      policy_version: ack.policy_version,
      ...(ack.error === undefined ? {} : { error: ack.error }),
    });
    return true;
  }

  /** Fails a node's waiting requests at once (its socket closed). */
  failNode(nodeId: string, reason: string): void {
    for (const [key, waiter] of this.pending) {
      if (key.endsWith(`\u0000${nodeId}`))
        waiter({
          node_id: nodeId,
          ok: false,
          paused: false,
          inflight: 0,
          policy_version: null,
          error: reason,
        });
    }
  }
}
