/**
 * Timing settings of one dispatcher shard: the defaults, and the Worker variables that change
 * them (tests shorten them). Read on every use, so a variable is never cached stale.
 *
 * @module
 */
import { LIMITS } from "../../protocol";

/**
 * Seconds between the gateway's `ping` frames, announced in `welcome` (Worker variable
 * `POLAR_PING_INTERVAL_SECONDS` changes it, e.g. for tests).
 *
 * @example
 * ```ts
 * setInterval(() => ws.send("ping"), PING_INTERVAL_SECONDS * 1000);
 * ```
 */
export const PING_INTERVAL_SECONDS = 15;
/**
 * Ping intervals of silence after which a gateway's socket is declared dead, on both sides: 45 s
 * at the default interval. The QueueDO's alarm is armed for the moment the limit is reached after
 * the newest frame of any gateway, so a silent socket is closed at the limit (plus the alarm's
 * lateness), not on some later tick.
 *
 * @example
 * ```ts
 * const livenessMs = MISSED_PINGS * PING_INTERVAL_SECONDS * 1000; // 45_000
 * ```
 */
export const MISSED_PINGS = 3;
/**
 * Delay before the alarm retries a dispatch whose ledger call failed.
 *
 * @example
 * ```ts
 * await ctx.storage.setAlarm(Date.now() + DISPATCH_RETRY_MS);
 * ```
 */
export const DISPATCH_RETRY_MS = 2000;
/**
 * How long acks of actions that do not drain (resume, version, status, drain) are waited for.
 *
 * @example
 * ```ts
 * await collectAcks(shard, build, ACK_WAIT_MS);
 * ```
 */
export const ACK_WAIT_MS = 10_000;
/** Default of `POLAR_FENCE_ACK_MARGIN_SECONDS`: transit time allowed on top of a pause's timeout. */
const DEFAULT_FENCE_ACK_MARGIN_SECONDS = 5;

/** The Worker variables these settings read. */
export type SettingsEnv = Pick<
  Env,
  "POLAR_PING_INTERVAL_SECONDS" | "POLAR_LEASE_GRACE_SECONDS" | "POLAR_FENCE_ACK_MARGIN_SECONDS"
>;

/**
 * Seconds between pings (announced in welcome); the liveness limit is MISSED_PINGS of them.
 *
 * @example
 * ```ts
 * pingIntervalSeconds({ POLAR_PING_INTERVAL_SECONDS: "1" }); // 1
 * ```
 */
export function pingIntervalSeconds(env: SettingsEnv): number {
  const raw = Number(env.POLAR_PING_INTERVAL_SECONDS);
  return Number.isInteger(raw) && raw >= 1 ? raw : PING_INTERVAL_SECONDS;
}

/**
 * Milliseconds of silence after which a gateway's socket is closed.
 *
 * @example
 * ```ts
 * livenessMs(env); // 45_000 by default
 * ```
 */
export function livenessMs(env: SettingsEnv): number {
  return MISSED_PINGS * pingIntervalSeconds(env) * 1000;
}

/**
 * Milliseconds a disconnected gateway's leases wait for a reconnect before going back to the ledger.
 *
 * @example
 * ```ts
 * startLeaseGrace(db, nodeId, Date.now() + leaseGraceMs(env));
 * ```
 */
export function leaseGraceMs(env: SettingsEnv): number {
  const raw = Number(env.POLAR_LEASE_GRACE_SECONDS);
  return (Number.isFinite(raw) && raw >= 0 ? raw : LIMITS.leaseGraceSeconds) * 1000;
}

/**
 * Shortest grace the leases of a gateway get when the shard restarted under it (30 s). A restart
 * (deploy, crash) drops every gateway's socket at once, while the plane may have been unreachable
 * long enough for the gateways' reconnect backoff to reach its cap (10 s, plus a dial of up to
 * 10 s: gateway-agent/connection.ts): a grace measured from the new instance's start but shorter
 * than one backoff step would hand back sessions that are still running, and each would run again.
 * A configured grace above it is kept.
 *
 * @example
 * ```ts
 * const at = now + Math.max(leaseGraceMs(env), RESTART_LEASE_GRACE_MS);
 * ```
 */
export const RESTART_LEASE_GRACE_MS = 30_000;

/**
 * Transit time allowed on top of a pause's timeout for the gateways' answers (ms).
 *
 * @example
 * ```ts
 * const waitMs = timeoutSeconds * 1000 + fenceAckMarginMs(env);
 * ```
 */
export function fenceAckMarginMs(env: SettingsEnv): number {
  const raw = Number(env.POLAR_FENCE_ACK_MARGIN_SECONDS);
  return (Number.isFinite(raw) && raw >= 0 ? raw : DEFAULT_FENCE_ACK_MARGIN_SECONDS) * 1000;
}
