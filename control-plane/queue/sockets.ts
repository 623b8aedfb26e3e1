/**
 * The gateway sockets of one dispatcher shard: accepting the upgrade (hibernation API), what each
 * socket carries across hibernation (its attachment), finding a node's socket, and sending or
 * closing without throwing at a socket that is already gone.
 *
 * @module
 */
import type { ControlMessage } from "../../protocol";
import { newConnectionId } from "../ids";
import { forPeer } from "./fence";

/**
 * Header the Worker sets (after stripping any client copy) with the queue name it routed to.
 *
 * @example
 * ```ts
 * headers.set(QUEUE_HEADER, "default");
 * ```
 */
export const QUEUE_HEADER = "X-Polar-Queue";
/**
 * Header the Worker sets when a per-gateway token authenticated the upgrade: the node id the
 * hello must name.
 *
 * @example
 * ```ts
 * headers.set(NODE_HEADER, "node-a");
 * ```
 */
export const NODE_HEADER = "X-Polar-Node-Id";
/**
 * Header the Worker sets when it chose the shard by the `node_id` query parameter: the hello must
 * name that node, so the gateway speaks on the shard that holds its leases.
 *
 * @example
 * ```ts
 * headers.set(NODE_HINT_HEADER, "node-a");
 * ```
 */
export const NODE_HINT_HEADER = "X-Polar-Node-Hint";

/**
 * What survives hibernation on each socket: its connection id, node id after hello, token binding.
 *
 * @example
 * ```ts
 * const att: SocketAttachment = { connId: "c_1", nodeId: null };
 * ```
 */
export interface SocketAttachment {
  connId: string;
  nodeId: string | null;
  /** Node id bound by a per-gateway token; the hello must match it. */
  boundNode?: string | null;
  /** Node id the Worker chose this shard by (`?node_id=`); the hello must match it. */
  hintNode?: string | null;
  /** Wire version of the hello: what this socket is sent (v1 gateways get v1 messages). */
  wire?: number;
}

/**
 * Errors the runtime reports for sockets that are already gone; not worth a log line.
 *
 * @example
 * ```ts
 * if (!isBenignSocketError(error)) console.error(error);
 * ```
 */
export function isBenignSocketError(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /peer disconnected|network connection lost|websocket.*clos/i.test(message);
}

/**
 * Accepts a gateway WebSocket the Worker has already authenticated; 426/403 otherwise.
 *
 * @example
 * ```ts
 * override fetch(request: Request) { return acceptGateway(this.ctx, request); }
 * ```
 */
export function acceptGateway(ctx: DurableObjectState, request: Request): Response {
  if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
    return Response.json(
      { error: { code: "upgrade_required", message: "expected a WebSocket upgrade" } },
      { status: 426 },
    );
  }
  if (!request.headers.get(QUEUE_HEADER)) {
    // Only the Worker reaches this object and it always sets the header.
    return Response.json(
      { error: { code: "forbidden", message: "not routed by the Worker" } },
      { status: 403 },
    );
  }
  const pair = new WebSocketPair();
  const [client, server] = [pair[0], pair[1]];
  ctx.acceptWebSocket(server, ["gateway"]);
  const attachment: SocketAttachment = {
    connId: newConnectionId(),
    nodeId: null,
    boundNode: request.headers.get(NODE_HEADER),
    hintNode: request.headers.get(NODE_HINT_HEADER),
  };
  server.serializeAttachment(attachment);
  return new Response(null, { status: 101, webSocket: client });
}

/**
 * The socket's attachment, null before `acceptGateway` stored one.
 *
 * @example
 * ```ts
 * attachmentOf(ws)?.nodeId; // null until hello
 * ```
 */
export function attachmentOf(ws: WebSocket): SocketAttachment | null {
  return (ws.deserializeAttachment() as SocketAttachment | null) ?? null;
}

/**
 * The open socket of connection `connId`, or null.
 *
 * @example
 * ```ts
 * const socket = socketOf(ctx, gateway.connId);
 * ```
 */
export function socketOf(ctx: DurableObjectState, connId: string): WebSocket | null {
  for (const ws of ctx.getWebSockets()) {
    if (attachmentOf(ws)?.connId === connId && ws.readyState === WebSocket.OPEN) return ws;
  }
  return null;
}

/**
 * Sends a message in the socket's wire version (v1 gateways never see v2 fields).
 *
 * @example
 * ```ts
 * send(ws, errorFrame("hello_required", "send hello first"));
 * ```
 */
export function send(ws: WebSocket, message: ControlMessage): void {
  sendRaw(ws, JSON.stringify(forPeer(message, attachmentOf(ws)?.wire ?? 1)));
}

/**
 * Sends text as is; a socket already gone is not an error.
 *
 * @example
 * ```ts
 * sendRaw(ws, "pong");
 * ```
 */
export function sendRaw(ws: WebSocket, text: string): void {
  try {
    ws.send(text);
  } catch (error) {
    if (!isBenignSocketError(error)) console.error("Error in QueueDO send:", error);
  }
}

/**
 * Closes a socket; one already closing or closed is left alone.
 *
 * @example
 * ```ts
 * closeQuietly(ws, CLOSE_SILENT, "no ping");
 * ```
 */
export function closeQuietly(ws: WebSocket, code: number, reason: string): void {
  try {
    ws.close(code, reason);
  } catch {
    // Already closing or closed: nothing to do.
  }
}
