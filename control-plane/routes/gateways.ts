/**
 * Gateway routes: `GET /v1/gateways/connect?queue=NAME`, the WebSocket a gateway dials out on.
 * The token is checked here, before the upgrade reaches (and bills) the QueueDO.
 *
 * @module
 */
import { Hono } from "hono";
import { describeIssues, fieldIssues, Identifier } from "../../protocol";
import { requireRole } from "../auth";
import { ApiError } from "../errors";
import { QUEUE_HEADER } from "../queue/queue-do";

/** Prefix of headers only the Worker may set; client copies are dropped. */
const INTERNAL_HEADER_PREFIX = "x-polar-";

/**
 * The gateways sub-app (mounted at `/v1/gateways`, gateway token required).
 *
 * @example
 * ```ts
 * app.route("/v1/gateways", gatewayRoutes);
 * ```
 */
export const gatewayRoutes = new Hono<{ Bindings: Env }>();

gatewayRoutes.get("/connect", requireRole("gateway"), async (c) => {
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") {
    throw ApiError.upgradeRequired("GET /v1/gateways/connect needs 'Upgrade: websocket'");
  }
  const parsed = Identifier.safeParse(c.req.query("queue") ?? "default");
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error).map((i) => ({ ...i, field: "queue" }));
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  const queue = parsed.data;
  const headers = new Headers();
  for (const [name, value] of c.req.raw.headers) {
    const lower = name.toLowerCase();
    if (lower.startsWith(INTERNAL_HEADER_PREFIX) || lower === "authorization") continue;
    headers.set(name, value);
  }
  headers.set(QUEUE_HEADER, queue);
  return c.env.QUEUE.getByName(queue).fetch(new Request(c.req.raw, { headers }));
});
