/**
 * Health of the engine replicas: the `/health` probe, what a probe's result and a call's outcome
 * mean for a replica (a busy replica is never failed over; a refused connection or a 502/503/504
 * takes it out until a check or its cool-down lets it back in).
 *
 * @module
 */
import type { Replica, ReplicaOutcome } from "./replica-state";

/** Default interval between health checks (ms). */
export const DEFAULT_HEALTH_INTERVAL_MS = 5_000;
/** Timeout of one discovery (`GET /workers`) or `/model_info` call (ms). */
export const HEALTH_TIMEOUT_MS = 2_000;
/**
 * Default timeout of one `GET /health` probe (ms). SGLang's `/health` (like `/health_generate`)
 * runs a one-token generation through the scheduler and polls for output once a second, answering
 * 503 itself only after `SGLANG_HEALTH_CHECK_TIMEOUT` (default 20 s) without progress
 * (`http_server.py` `health_generate`): a shorter client timeout would call a loaded replica dead
 * before SGLang has made up its mind.
 *
 * @example
 * ```ts
 * fetch(`${url}/health`, { signal: AbortSignal.timeout(HEALTH_PROBE_TIMEOUT_MS) });
 * ```
 */
export const HEALTH_PROBE_TIMEOUT_MS = 25_000;
/**
 * How long a replica that answered 502/503/504 is skipped (ms): SGLang answers 503 while it starts
 * or shuts down, yet its `/health` may already (or still) say 200, so the health check alone would
 * send the next call straight back to it. After the cool-down the health check (or, with checks
 * disabled, the next pick) lets it back in.
 */
export const DEFAULT_UNAVAILABLE_COOLDOWN_MS = 2_000;

/** Where a replica's health changes are told (`ReplicaSetOptions.onChange`). */
export type HealthListener = ((message: string, fields: object) => void) | undefined;

/** How one `/health` probe ended. */
export type ProbeResult = "ok" | "down" | "timeout";

/**
 * One `GET /health` probe of `url`, cut short by `stopped`.
 *
 * @example
 * ```ts
 * const result = await probeHealth(url, HEALTH_PROBE_TIMEOUT_MS, stopped.signal); // "ok" | "down" | "timeout"
 * ```
 */
export async function probeHealth(
  url: string,
  timeoutMs: number,
  stopped: AbortSignal,
): Promise<ProbeResult> {
  try {
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), stopped]);
    const res = await fetch(`${url}/health`, { signal });
    await res.arrayBuffer();
    return res.ok ? "ok" : "down";
  } catch (err) {
    // A timeout is not a refusal: the replica may only be slow to run the probe's generation.
    return err instanceof Error && err.name === "TimeoutError" ? "timeout" : "down";
  }
}

/**
 * Applies a probe's result to `r`. A timeout while the replica is `serving` (a call in flight, or
 * a completion since the last check) leaves it as it was and marks it `busy`: SGLang's `/health`
 * queues a one-token generation, so it is late exactly when the replica is working hardest. A
 * refused connection, a non-2xx answer (SGLang answers 503 while starting, shutting down, or after
 * 20 s without scheduler progress) and a timeout on an idle replica mark it unhealthy.
 *
 * @example
 * ```ts
 * settleProbe(r, await probeHealth(r.url, timeoutMs, signal), r.inflight > 0, opts.onChange);
 * ```
 */
export function settleProbe(
  r: Replica,
  result: ProbeResult,
  serving: boolean,
  onChange: HealthListener,
): void {
  if (result === "timeout" && serving) {
    if (!r.busy) onChange?.("replica busy: health check timed out while serving", { url: r.url });
    r.busy = true;
    return;
  }
  delete r.busy;
  const ok = result === "ok";
  if (ok !== r.healthy) onChange?.(ok ? "replica healthy" : "replica unhealthy", { url: r.url });
  r.healthy = ok;
  if (ok) r.coolUntil = 0;
  else r.last_error = result === "timeout" ? "health check timed out" : "health check failed";
}

/**
 * Counts how a call on `r` ended. A refused connection means the replica is gone; an unavailable
 * answer means it is overloaded, starting or stopping (out for `cooldownMs`). Either way the
 * health check brings it back.
 *
 * @example
 * ```ts
 * settleCall(r, { ok: false, error: "503", unavailable: true }, DEFAULT_UNAVAILABLE_COOLDOWN_MS, onChange);
 * ```
 */
export function settleCall(
  r: Replica,
  { ok, failed = !ok, error, transport, unavailable }: ReplicaOutcome,
  cooldownMs: number,
  onChange: HealthListener,
): void {
  r.inflight = Math.max(0, r.inflight - 1);
  if (ok) {
    r.completions++;
    r.lastCompletionAt = Date.now();
    return;
  }
  if (!failed) return;
  r.failures++;
  r.last_error = error ?? null;
  if (transport || unavailable) {
    if (r.healthy) onChange?.("replica unhealthy", { url: r.url, error });
    r.healthy = false;
    if (unavailable) r.coolUntil = Date.now() + cooldownMs;
  }
}

/**
 * Lets replicas whose cool-down ran out back in: with no health checks running, that is the only
 * way back.
 *
 * @example
 * ```ts
 * if (!checking) reviveCooled(candidates, Date.now());
 * ```
 */
export function reviveCooled(replicas: readonly Replica[], now: number): void {
  for (const r of replicas)
    if (!r.healthy && r.coolUntil > 0 && r.coolUntil <= now) {
      r.healthy = true;
      r.coolUntil = 0;
    }
}
