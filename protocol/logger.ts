/**
 * The logger every Node part writes its diagnostics to (the gateway, its proxy, the CLI's
 * servers). It lives in the protocol, the one module they all import, so a logger made for one
 * part (e.g. the gateway's JSON-lines logger) fits the others without an adapter. Type only.
 *
 * @module
 */

/**
 * One line per event: a message and structured fields.
 *
 * @example
 * ```ts
 * const logger: Logger = { info: console.info, warn: console.warn, error: console.error };
 * logger.warn("teardown failed", { session_id: "b.0.1", error: "busy" });
 * ```
 */
export interface Logger {
  info(message: string, fields?: object): void;
  warn(message: string, fields?: object): void;
  error(message: string, fields?: object): void;
}
