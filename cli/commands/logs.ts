/**
 * `polar logs SESSION [--stream NAME] [--json] [--control-plane URL]`: a session's logs as the
 * gateway uploaded them (`GET /v1/sessions/:id/logs`), each stream under a header naming it, its
 * size and whether only its tail was kept. A read-only command: the token is
 * `POLAR_TRAINER_TOKEN`, else `POLAR_VIEWER_TOKEN`.
 *
 * @module
 */
import type { LogStream, SessionLogs } from "../../protocol";
import { ControlPlaneClient, ControlPlaneError } from "../client";
import { UsageError } from "../usage-error";
import { requestTimeoutMs } from "./connection";

/** Options of {@link runLogs}. */
export interface LogsOptions {
  controlPlane: string;
  /** Same as `controlPlane` (the other commands' flag name); wins when given. */
  url?: string;
  stream?: string;
  json: boolean;
  /** `--request-timeout-seconds` (else `POLAR_REQUEST_TIMEOUT_SECONDS`, else 30 s). */
  requestTimeoutSeconds?: number;
}

/**
 * The bearer token of a read-only command: the trainer's, else the viewer's. Throws
 * {@link UsageError} naming both variables when neither is set.
 *
 * @example
 * ```ts
 * readerToken({ POLAR_VIEWER_TOKEN: "v" }); // "v"
 * ```
 */
export function readerToken(env: NodeJS.ProcessEnv = process.env): string {
  const token = env.POLAR_TRAINER_TOKEN || env.POLAR_VIEWER_TOKEN;
  if (!token)
    throw new UsageError(
      "POLAR_TRAINER_TOKEN or POLAR_VIEWER_TOKEN must be set (the bearer token to read with)",
    );
  return token;
}

/**
 * The header line of a stream.
 *
 * @example
 * ```ts
 * streamHeader({ name: "harness.stderr", bytes_total: 10, bytes_kept: 10, truncated: false, text: "" });
 * // "=== harness.stderr (10 bytes) ==="
 * ```
 */
export function streamHeader(s: LogStream): string {
  const size = s.truncated
    ? `${s.bytes_total} bytes, truncated: last ${s.bytes_kept} bytes kept`
    : `${s.bytes_total} bytes`;
  return `=== ${s.name} (${size}) ===`;
}

/**
 * The text `polar logs` prints for a session's logs (one stream when `stream` is given).
 * Throws {@link UsageError} naming `--stream` for a stream the session does not have.
 *
 * @example
 * ```ts
 * process.stdout.write(formatLogs(await client.sessionLogs("b.0.0")));
 * ```
 */
export function formatLogs(logs: SessionLogs, stream?: string): string {
  const streams = stream === undefined ? logs.streams : logs.streams.filter((s) => s.name === stream);
  if (stream !== undefined && streams.length === 0) {
    const have = logs.streams.map((s) => s.name).join(", ") || "none";
    throw new UsageError(
      `--stream: session '${logs.session_id}' has no stream '${stream}' (it has: ${have})`,
    );
  }
  if (streams.length === 0) return `session ${logs.session_id}: no log output\n`;
  return streams
    .map((s) => `${streamHeader(s)}\n${s.text}${s.text.endsWith("\n") || s.text === "" ? "" : "\n"}`)
    .join("\n");
}

/**
 * Prints a session's logs.
 *
 * @example
 * ```ts
 * await runLogs("b_1.0.0", { controlPlane: "http://127.0.0.1:8787", json: false });
 * ```
 */
export async function runLogs(sessionId: string, opts: LogsOptions): Promise<void> {
  const logs = await fetchLogs(
    opts.url ?? opts.controlPlane,
    readerToken(),
    sessionId,
    requestTimeoutMs(opts),
  );
  if (opts.json) {
    if (opts.stream !== undefined) formatLogs(logs, opts.stream); // an unknown stream: the error
    const streams =
      opts.stream === undefined ? logs.streams : logs.streams.filter((s) => s.name === opts.stream);
    console.log(JSON.stringify({ ...logs, streams }));
    return;
  }
  process.stdout.write(formatLogs(logs, opts.stream));
}

/**
 * `GET /v1/sessions/:id/logs` through the client typed from the OpenAPI document. The control
 * plane's message names the session and why (no such session, not finished yet, finished
 * without logs); a malformed id is a mistake in the argument.
 */
async function fetchLogs(
  baseUrl: string,
  token: string,
  sessionId: string,
  timeoutMs: number,
): Promise<SessionLogs> {
  try {
    return await new ControlPlaneClient(baseUrl, token, { timeoutMs }).sessionLogs(sessionId);
  } catch (err) {
    if (!(err instanceof ControlPlaneError)) throw err;
    if (err.status === 400) throw new UsageError(`SESSION_ID: ${err.reason}`);
    throw new Error(`${err.reason} (HTTP ${err.status})`);
  }
}
