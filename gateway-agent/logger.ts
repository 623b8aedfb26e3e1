/**
 * Structured logs: one JSON object per line (`ts`, `level`, `msg`, `node_id`, fields) on stderr,
 * the shape log shippers (journald, Loki, Cloud Logging) index without parsing rules.
 *
 * @module
 */
import type { Logger } from "../protocol";

/**
 * @example
 * ```ts
 * const logger = jsonLogger({ node_id: "gpu-0" });
 * logger.info("session finished", { session_id: "b.t.0", status: "COMPLETED" });
 * // {"ts":"2026-…","level":"info","msg":"session finished","node_id":"gpu-0","session_id":"b.t.0",…}
 * ```
 */
export function jsonLogger(
  base: Record<string, unknown>,
  write: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Logger {
  const emit = (level: string, msg: string, fields?: object) => {
    let line: string;
    try {
      line = JSON.stringify({ ts: new Date().toISOString(), level, msg, ...base, ...(fields ?? {}) });
    } catch {
      line = JSON.stringify({ ts: new Date().toISOString(), level, msg, ...base, fields: String(fields) });
    }
    write(line);
  };
  return {
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}
