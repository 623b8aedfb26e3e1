/**
 * Frames from a gateway's socket after the upgrade: parse, require hello first, then route
 * `credit`, `progress`, `result` and `admin_ack` (the ledger decides progress and results; this
 * module forwards and answers).
 *
 * @module
 */
import type { ArtifactKind, CreditMessage, ProgressMessage, ResultMessage } from "../../protocol";
import { WIRE_VERSION } from "../../protocol";
import { artifactKey } from "../artifacts";
import { parseSessionId } from "../ids";
import type { Dispatcher } from "./dispatch";
import { UNAWAITED_REQUEST_PREFIX } from "./fence";
import { onHello } from "./handshake";
import { errorFrame, parseGatewayFrame } from "./messages";
import type { Shard } from "./shard";
import { attachmentOf, closeQuietly, send, sendRaw } from "./sockets";
import * as store from "./store";

/**
 * Handles one frame; a frame before hello is answered with `hello_required`, a malformed one with
 * an error (and a close when its version cannot be spoken).
 *
 * @example
 * ```ts
 * await handleFrame(shard, dispatcher, ws, frame); // in webSocketMessage
 * ```
 */
export async function handleFrame(
  shard: Shard,
  dispatcher: Dispatcher,
  ws: WebSocket,
  frame: string | ArrayBuffer,
): Promise<void> {
  if (frame === "ping") {
    // Normally answered by the auto-response without waking us; answer anyway if it gets here,
    // and count it for liveness: the auto-response's timestamp then says nothing of it.
    sendRaw(ws, "pong");
    const nodeId = attachmentOf(ws)?.nodeId;
    if (nodeId) store.touchGateway(shard.db, nodeId, Date.now());
    return;
  }
  const parsed = parseGatewayFrame(frame);
  if (!parsed.ok) {
    send(ws, errorFrame(parsed.code, parsed.message));
    if (parsed.close !== undefined) closeQuietly(ws, parsed.close, parsed.code);
    return;
  }
  const message = parsed.message;
  if (message.type === "hello") return onHello(shard, dispatcher, ws, message);
  const nodeId = attachmentOf(ws)?.nodeId;
  if (!nodeId) {
    send(ws, errorFrame("hello_required", `send hello before '${message.type}'`));
    return;
  }
  store.touchGateway(shard.db, nodeId, Date.now());
  if (message.type === "credit") await onCredit(shard, dispatcher, nodeId, message);
  else if (message.type === "progress") await onProgress(shard, ws, nodeId, message);
  else if (message.type === "result") await onResult(shard, ws, nodeId, message);
  else if (!shard.admins.resolve(nodeId, message) && !message.request_id.startsWith(UNAWAITED_REQUEST_PREFIX))
    console.warn(`QueueDO: late admin_ack from ${nodeId} for ${message.request_id}`);
}

async function onCredit(shard: Shard, dispatcher: Dispatcher, nodeId: string, credit: CreditMessage) {
  store.addCredit(shard.db, nodeId, credit.grant);
  if (credit.metrics) store.updateMetrics(shard.db, nodeId, credit.metrics);
  await dispatcher.run();
}

async function onProgress(shard: Shard, ws: WebSocket, nodeId: string, progress: ProgressMessage) {
  const { db, env } = shard;
  if (progress.metrics) store.updateMetrics(db, nodeId, progress.metrics);
  const lease = store.findLease(db, progress.lease_id);
  if (!lease || lease.nodeId !== nodeId || lease.sessionId !== progress.session_id) {
    store.bumpCounter(db, "stale_progress");
    send(ws, errorFrame("stale_lease", `lease '${progress.lease_id}' is not current for this node`));
    return;
  }
  const outcome = await env.BATCH.getByName(lease.batchId).markProgress(
    progress.session_id,
    progress.lease_id,
    progress.status,
  );
  if (outcome === "stale") {
    store.bumpCounter(db, "stale_progress");
    send(ws, errorFrame("stale_lease", `lease '${progress.lease_id}' was superseded`));
  }
}

/** The key an upload of this session and lease has, or null when the lease id could not be one. */
function expectedKey(batchId: string, sessionId: string, leaseId: string, kind: ArtifactKind): string | null {
  try {
    return artifactKey(batchId, sessionId, leaseId, kind);
  } catch {
    return null;
  }
}

/** An artifact reference must point at this session's upload under this lease, nothing else. */
function badArtifactRef(message: ResultMessage): string | null {
  const sessionId = message.result.session_id;
  const parts = parseSessionId(sessionId);
  for (const [kind, ref] of [
    ["trajectory", message.trajectory_ref],
    ["completions", message.completions_ref],
    ["logs", message.logs_ref],
    ["tokens", message.tokens_ref],
  ] as const) {
    if (ref && (!parts || ref.key !== expectedKey(parts.batchId, sessionId, message.lease_id, kind))) {
      return `${kind}_ref.key: not the upload of this session and lease`;
    }
  }
  return null;
}

async function onResult(shard: Shard, ws: WebSocket, nodeId: string, message: ResultMessage) {
  const { db } = shard;
  const sessionId = message.result.session_id;
  const refError = badArtifactRef(message);
  if (refError) {
    send(ws, errorFrame("invalid_message", refError));
    return;
  }
  const lease = store.findLease(db, message.lease_id);
  if (lease && lease.nodeId !== nodeId) {
    // Another gateway holds this lease (as progress checks): only its holder may end the session.
    store.bumpCounter(db, "stale_results");
    send(ws, {
      v: WIRE_VERSION,
      type: "ack",
      lease_id: message.lease_id,
      session_id: sessionId,
      status: "stale",
    });
    return;
  }
  const ownLease = lease && lease.sessionId === sessionId ? lease : undefined;
  const batchId = ownLease?.batchId ?? parseSessionId(sessionId)?.batchId ?? message.result.batch_id;
  let status: Awaited<ReturnType<typeof submit>>;
  try {
    status = await submit(shard, batchId, message);
  } catch (error) {
    console.error(`QueueDO: recording result of ${sessionId} failed:`, error);
    send(ws, errorFrame("result_not_recorded", `result of '${sessionId}' was not recorded; send it again`));
    return;
  }
  // Re-read after the await: the lease may have been requeued meanwhile.
  if (ownLease && store.findLease(db, ownLease.leaseId)) store.deleteLease(db, ownLease.leaseId);
  if (status === "accepted") store.bumpResult(db, message.result.status);
  if (status === "stale") store.bumpCounter(db, "stale_results");
  if (status === "duplicate") store.bumpCounter(db, "duplicate_results");
  send(ws, { v: WIRE_VERSION, type: "ack", lease_id: message.lease_id, session_id: sessionId, status });
}

function submit(shard: Shard, batchId: string, message: ResultMessage) {
  const refs = {
    ...(message.trajectory_ref ? { trajectory: message.trajectory_ref } : {}),
    ...(message.completions_ref ? { completions: message.completions_ref } : {}),
    ...(message.logs_ref ? { logs: message.logs_ref } : {}),
    ...(message.tokens_ref ? { tokens: message.tokens_ref } : {}),
  };
  return shard.env.BATCH.getByName(batchId).submitResult(
    message.result.session_id,
    message.lease_id,
    message.result,
    refs,
  );
}
