/**
 * What every operator command shares: the control plane's URL (`--control-plane`, `--url`,
 * `POLAR_URL`), the bearer token of the role a route needs (from `POLAR_*_TOKEN`), the deadline of
 * each request (`--request-timeout-seconds`, `POLAR_REQUEST_TIMEOUT_SECONDS`), and one client
 * made from them. A missing token is a usage error that names the variable to set.
 *
 * @module
 */
import { ControlPlaneClient } from "../client";
import { UsageError } from "../usage-error";

/** The flags every command talking to the control plane takes. */
export interface ConnectionOptions {
  controlPlane: string;
  /** Same as `controlPlane` (the older commands' flag name); wins when given. */
  url?: string;
  json: boolean;
  /** `--request-timeout-seconds`: a request's deadline; `POLAR_REQUEST_TIMEOUT_SECONDS` otherwise. */
  requestTimeoutSeconds?: number;
}

/** A request's deadline when neither the flag nor the variable gives one (s). */
export const DEFAULT_REQUEST_TIMEOUT_SECONDS = 30;

/**
 * A request's deadline in ms: `--request-timeout-seconds`, else `POLAR_REQUEST_TIMEOUT_SECONDS`,
 * else 30 s. A bad value of the variable is a usage error naming it.
 *
 * @example
 * ```ts
 * requestTimeoutMs({}, { POLAR_REQUEST_TIMEOUT_SECONDS: "5" }); // 5000
 * ```
 */
export function requestTimeoutMs(
  opts: Pick<ConnectionOptions, "requestTimeoutSeconds">,
  env: NodeJS.ProcessEnv = process.env,
): number {
  if (opts.requestTimeoutSeconds !== undefined) return Math.ceil(opts.requestTimeoutSeconds * 1000);
  const raw = env.POLAR_REQUEST_TIMEOUT_SECONDS;
  if (raw === undefined || raw === "") return DEFAULT_REQUEST_TIMEOUT_SECONDS * 1000;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`POLAR_REQUEST_TIMEOUT_SECONDS must be a number of seconds > 0, got '${raw}'`);
  return Math.ceil(n * 1000);
}

/**
 * Who a command acts as: `read` (listings and status: a trainer, viewer or admin token), `trainer`
 * (submit, cancel, a queue's fence: trainer or admin), `admin` (drain).
 */
export type Access = "read" | "trainer" | "admin";

/** The variables each access level reads, in order; the admin token may act as any role. */
const TOKEN_VARIABLES: Record<Access, string[]> = {
  read: ["POLAR_TRAINER_TOKEN", "POLAR_VIEWER_TOKEN", "POLAR_ADMIN_TOKEN"],
  trainer: ["POLAR_TRAINER_TOKEN", "POLAR_ADMIN_TOKEN"],
  admin: ["POLAR_ADMIN_TOKEN"],
};

/**
 * The token for `access` from `env`, or a usage error naming the variables it looked at.
 *
 * @example
 * ```ts
 * tokenFor("admin", { POLAR_ADMIN_TOKEN: "a" }); // "a"
 * ```
 */
export function tokenFor(access: Access, env: NodeJS.ProcessEnv = process.env): string {
  const names = TOKEN_VARIABLES[access];
  for (const name of names) {
    const value = env[name];
    if (value) return value;
  }
  throw new UsageError(`${names.join(" or ")} is not set (the bearer token this command needs)`);
}

/**
 * A client of the control plane named by the flags, with the token for `access`.
 *
 * @example
 * ```ts
 * const cp = connect({ controlPlane: "http://127.0.0.1:8787", json: false }, "read");
 * ```
 */
export function connect(opts: ConnectionOptions, access: Access): ControlPlaneClient {
  const url = opts.url ?? opts.controlPlane;
  try {
    new URL(url);
  } catch {
    throw new UsageError(`--control-plane: '${url}' is not a URL`);
  }
  return new ControlPlaneClient(url, tokenFor(access), { timeoutMs: requestTimeoutMs(opts) });
}

/** Prints `value` as one line of JSON. */
export function printJson(value: unknown): void {
  console.log(JSON.stringify(value));
}
