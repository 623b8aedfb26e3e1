/**
 * Session states in the ledger's SQL, spelled once from the protocol's `TerminalStatus`.
 *
 * @module
 */
import { notInArray } from "drizzle-orm";
import { TerminalStatus } from "../../protocol";
import * as schema from "./schema";

/**
 * SQL condition: the session has not reached a terminal state (`protocol/session.ts`).
 *
 * @example
 * ```ts
 * db.select().from(schema.sessions).where(OPEN_SESSION).all();
 * ```
 */
export const OPEN_SESSION = notInArray(schema.sessions.status, TerminalStatus.options);
