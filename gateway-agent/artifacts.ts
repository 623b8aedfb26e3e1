/**
 * Artifact uploads before a result: the session's completion records (when any) and, when the
 * trajectory's JSON exceeds `LIMITS.inlineTrajectoryBytes`, the trajectory, each by
 * `PUT <control plane>/v1/sessions/:session_id/artifacts/:kind?lease_id=L` (gateway token, JSON
 * body) → 201 `ArtifactRef`.
 *
 * One call is one attempt: `result-delivery.ts` retries, for as long as it takes, while the
 * result waits in the journal. Only an answer that retrying cannot change (4xx other than 408 and
 * 429: a lease no longer current, a body over the limit, no such route) ends the attempts; then a
 * trajectory that fits the wire travels inline instead, completion records are left out (the
 * reason noted in the trajectory's metadata), and a trajectory too large for the wire loses its
 * traces with an explicit error.
 *
 * @module
 */
import {
  type ArtifactKind,
  ArtifactRef,
  LIMITS,
  type ResultMessage,
  type SessionResult,
  WIRE_VERSION,
} from "../protocol";
import { type ControlPlaneHttp, ControlPlaneRequestError } from "./control-http";
import type { GatewayLogger } from "./errors";

/** How failed uploads are retried: jittered exponential backoff, at most `concurrency` at once. */
export interface UploadPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
  /** Uploads in flight at once (a reconnect after a long outage starts many). */
  concurrency: number;
}

/**
 * 0.5 s doubling to 15 s, four at a time; a reconnect retries at once whatever the backoff.
 *
 * @example
 * ```ts
 * startGateway({ ...opts, uploadPolicy: { ...DEFAULT_UPLOAD_POLICY, concurrency: 8 } });
 * ```
 */
export const DEFAULT_UPLOAD_POLICY: UploadPolicy = {
  initialDelayMs: 500,
  maxDelayMs: 15_000,
  concurrency: 4,
};

/** Where and how to upload. */
export interface UploadTarget {
  http: ControlPlaneHttp;
  policy?: UploadPolicy;
  logger: GatewayLogger;
}

/**
 * An upload that failed; `retryable` unless the control plane's answer says retrying cannot help.
 *
 * @example
 * ```ts
 * try { await uploadArtifact(t, id, lease, "completions", records); }
 * catch (e) { if (e instanceof UploadError && !e.retryable) giveUp(e); }
 * ```
 */
export class UploadError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "UploadError";
  }
}

/**
 * One upload attempt. Throws {@link UploadError}.
 *
 * @example
 * ```ts
 * const ref = await uploadArtifact(target, "b.t.0", "lease-1", "completions", records);
 * ```
 */
export async function uploadArtifact(
  target: UploadTarget,
  sessionId: string,
  leaseId: string,
  kind: ArtifactKind,
  body: unknown,
): Promise<ArtifactRef> {
  const payload = JSON.stringify(body);
  if (Buffer.byteLength(payload) > LIMITS.maxArtifactBytes)
    throw new UploadError(
      `${kind} is ${Buffer.byteLength(payload)} bytes, over LIMITS.maxArtifactBytes`,
      false,
    );
  const where = `/v1/sessions/${encodeURIComponent(sessionId)}/artifacts/${kind}?lease_id=${encodeURIComponent(leaseId)}`;
  let answer: Awaited<ReturnType<ControlPlaneHttp["request"]>>;
  try {
    answer = await target.http.request("PUT", where, payload);
  } catch (err) {
    if (err instanceof ControlPlaneRequestError) throw new UploadError(err.message, err.retryable);
    throw err;
  }
  const { status, text } = answer;
  if (status === 201 || status === 200) {
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      // reported below
    }
    const parsed = ArtifactRef.safeParse(json);
    if (parsed.success) return parsed.data;
    // A proxy's error page with a 200 is not an upload: try again.
    throw new UploadError(`upload answer is not an ArtifactRef: ${text.slice(0, 200)}`, true);
  }
  // 4xx other than 408/429 will not improve on retry (no route, stale lease, too large).
  const retryable = status >= 500 || status === 408 || status === 429;
  throw new UploadError(`HTTP ${status}: ${text.slice(0, 200)}`, retryable);
}

/**
 * Whether a result's trajectory is too large to travel inline (it is uploaded instead).
 *
 * @example
 * ```ts
 * if (trajectoryNeedsUpload(result)) await uploadArtifact(t, id, lease, "trajectory", result.trajectory);
 * ```
 */
export function trajectoryNeedsUpload(result: SessionResult): boolean {
  return Buffer.byteLength(JSON.stringify(result.trajectory)) > LIMITS.inlineTrajectoryBytes;
}

/**
 * The `result` message of a finished session, before any upload.
 *
 * @example
 * ```ts
 * const message = resultMessage(leaseId, result);
 * ```
 */
export function resultMessage(leaseId: string, result: SessionResult): ResultMessage {
  return { v: WIRE_VERSION, type: "result", lease_id: leaseId, result };
}

/**
 * Adds notes to the trajectory's metadata (e.g. why records are missing).
 *
 * @example
 * ```ts
 * noteOnTrajectory(message, { completions_upload_error: "HTTP 413: …" });
 * ```
 */
export function noteOnTrajectory(message: ResultMessage, notes: Record<string, string>): void {
  const traj = message.result.trajectory;
  message.result = { ...message.result, trajectory: { ...traj, metadata: { ...traj.metadata, ...notes } } };
}

/**
 * The last step before a result is sent: a message over the wire limit would be refused and
 * re-sent forever, so it becomes an infra error that says why.
 *
 * @example
 * ```ts
 * send(fitToWire(message));
 * ```
 */
export function fitToWire(message: ResultMessage): ResultMessage {
  const size = Buffer.byteLength(JSON.stringify(message));
  if (size <= LIMITS.maxWireMessageBytes) return message;
  const why = `result of ${size} bytes exceeds the wire limit of ${LIMITS.maxWireMessageBytes} bytes and could not be uploaded`;
  const out: ResultMessage = {
    ...message,
    result: {
      ...message.result,
      status: "ERROR",
      trajectory: { ...message.result.trajectory, status: "ERROR", traces: [], error: why },
      error: { kind: "infra", message: why },
    },
  };
  delete out.trajectory_ref;
  return out;
}
