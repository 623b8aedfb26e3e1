/**
 * Typed failures of a session on the gateway. Each carries the {@link ErrorKind} the result
 * reports: `infra` is retried by the control plane, `agent` and `timeout` are results.
 *
 * @module
 */
import type { ErrorKind, Logger, TimeoutInfo } from "../protocol";

// The timeout classification is part of the protocol (`protocol/stage.ts`): re-exported here beside
// the interrupt that carries it.
export type { TimeoutInfo } from "../protocol";

/**
 * A session failed for a known reason.
 *
 * @example
 * ```ts
 * throw new SessionFailure("infra", "prepare[0] exec exited with code 1");
 * ```
 */
export class SessionFailure extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "SessionFailure";
  }
}

/** Why a running session was interrupted from outside. */
export type InterruptReason = "timeout" | "cancelled" | "shutdown";

/**
 * Abort reason of a session's signal: the budget ran out, the control plane cancelled, or the
 * gateway is stopping.
 *
 * @example
 * ```ts
 * controller.abort(new SessionInterrupt("timeout", "timeout of 600 s exceeded"));
 * ```
 */
export class SessionInterrupt extends Error {
  constructor(
    readonly reason: InterruptReason,
    message: string,
    /** For timeouts: which budget ran out and in which stage (upstream's classification). */
    readonly timeout?: TimeoutInfo,
  ) {
    super(message);
    this.name = "SessionInterrupt";
  }
}

/**
 * The control plane refused this gateway for good: a wrong protocol version (close 4400), a
 * token that belongs to another node (close 4403), or a token it does not accept (HTTP 401/403 on
 * the upgrade). Reconnecting cannot help, so the gateway stops and `polar serve_gateway` exits
 * with {@link GatewayRefusedError.exitCode}.
 *
 * @example
 * ```ts
 * gateway.refused.then((err) => { console.error(err.message); process.exit(err.exitCode); });
 * ```
 */
export class GatewayRefusedError extends Error {
  /** `EX_CONFIG` (sysexits.h): systemd's `RestartPreventExitStatus=78` stops a restart loop. */
  readonly exitCode = 78;

  constructor(
    /** What was refused, with the control plane's own words. */
    readonly reason: string,
    /** What the operator should change. */
    readonly fix: string,
    /** The WebSocket close code, or null for an HTTP refusal. */
    readonly closeCode: number | null,
    /** The HTTP status of a refused upgrade, or null. */
    readonly httpStatus: number | null,
  ) {
    super(`the control plane refused this gateway for good: ${reason}. Fix: ${fix}`);
    this.name = "GatewayRefusedError";
  }
}

/** Default logger: one line per event on the console. */
export const consoleLogger: Logger = {
  info: (m, f) => console.info(`[gateway] ${m}`, f ?? ""),
  warn: (m, f) => console.warn(`[gateway] ${m}`, f ?? ""),
  error: (m, f) => console.error(`[gateway] ${m}`, f ?? ""),
};

/**
 * Message of any thrown value.
 *
 * @example
 * ```ts
 * logger.warn("teardown failed", { error: messageOf(err) });
 * ```
 */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
