/**
 * The dispatcher's repository in one namespace: re-exports the per-table stores (`pending-store`,
 * `loan-store`, `gateway-store`, `lease-store`, `counter-store`) and the row types, so the
 * QueueDO's modules say `store.nextPending(db)` whichever table a query touches.
 *
 * @example
 * ```ts
 * import * as store from "./store";
 * store.nextPending(db);
 * ```
 *
 * @module
 */
export * from "./counter-store";
export * from "./db";
export * from "./gateway-store";
export * from "./lease-store";
export * from "./loan-store";
export * from "./pending-store";
