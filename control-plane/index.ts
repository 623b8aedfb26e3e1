/**
 * Worker entry point of the control plane: the Hono app plus the Durable Object classes, which
 * wrangler needs exported from `main`.
 *
 * @module
 */
import { app } from "./app";

export { BatchDO } from "./batch/batch-do";
export { EventsDO } from "./events/events-do";
export { QueueDO } from "./queue/queue-do";
export { RegistryDO } from "./registry/registry-do";

export default app;
