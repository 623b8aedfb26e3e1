/**
 * Artifact uploads before a result: the session's completion records (when any) and, when the
 * trajectory's JSON exceeds `LIMITS.inlineTrajectoryBytes`, the trajectory, each by
 * `PUT <control plane>/v1/sessions/:session_id/artifacts/:kind?lease_id=L` (gateway token, JSON
 * body) → 201 `ArtifactRef`.
 *
 * Failures are retried with jittered exponential backoff; when an upload still fails the result
 * is not lost: a trajectory that fits the wire limit travels inline instead, completion records
 * are dropped (their absence and the reason are noted in the trajectory's metadata), and a
 * trajectory too large for the wire loses its traces with an explicit error.
 *
 * @module
 */
import {
  type ArtifactKind,
  ArtifactRef,
  type CompletionRecord,
  LIMITS,
  type ResultMessage,
  type SessionResult,
  WIRE_VERSION,
} from "../protocol";
import { type GatewayLogger, messageOf } from "./errors";

/** Retry policy of uploads. */
export interface UploadPolicy {
  attempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  /** Per-request timeout. */
  timeoutMs: number;
}

export const DEFAULT_UPLOAD_POLICY: UploadPolicy = {
  attempts: 5,
  initialDelayMs: 500,
  maxDelayMs: 15_000,
  timeoutMs: 120_000,
};

/** Where and how to upload. */
export interface UploadTarget {
  controlPlaneUrl: string;
  token: string;
  policy?: UploadPolicy;
  logger: GatewayLogger;
}

class UploadError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/**
 * One upload with retries. Throws the last error when every attempt failed.
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
  const policy = target.policy ?? DEFAULT_UPLOAD_POLICY;
  const url = new URL(
    `${target.controlPlaneUrl.replace(/\/+$/, "")}/v1/sessions/${encodeURIComponent(sessionId)}/artifacts/${kind}`,
  );
  url.searchParams.set("lease_id", leaseId);
  const payload = JSON.stringify(body);
  if (Buffer.byteLength(payload) > LIMITS.maxArtifactBytes)
    throw new UploadError(
      `${kind} is ${Buffer.byteLength(payload)} bytes, over LIMITS.maxArtifactBytes`,
      false,
    );
  let last: unknown;
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    try {
      const res = await fetch(url, {
        method: "PUT",
        headers: { authorization: `Bearer ${target.token}`, "content-type": "application/json" },
        body: payload,
        signal: AbortSignal.timeout(policy.timeoutMs),
      });
      const text = await res.text();
      if (res.status === 201 || res.status === 200) {
        const parsed = ArtifactRef.safeParse(JSON.parse(text));
        if (parsed.success) return parsed.data;
        throw new UploadError(`upload answer is not an ArtifactRef: ${text.slice(0, 200)}`, false);
      }
      // 4xx other than 408/429 will not improve on retry (no route, stale lease, too large).
      const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
      throw new UploadError(`HTTP ${res.status}: ${text.slice(0, 200)}`, retryable);
    } catch (err) {
      last = err;
      if (err instanceof UploadError && !err.retryable) break;
      if (attempt < policy.attempts) {
        const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
        await new Promise((r) => setTimeout(r, Math.round(ceiling * (0.5 + Math.random() * 0.5))));
      }
    }
  }
  throw last instanceof Error ? last : new Error(String(last));
}

/**
 * Builds the `result` message for a finished session, uploading what must be uploaded.
 *
 * @example
 * ```ts
 * const message = await prepareResultMessage(target, leaseId, result, proxy.completions(id));
 * ```
 */
export async function prepareResultMessage(
  target: UploadTarget | null,
  leaseId: string,
  result: SessionResult,
  records: readonly CompletionRecord[],
): Promise<ResultMessage> {
  const message: ResultMessage = { v: WIRE_VERSION, type: "result", lease_id: leaseId, result };
  const notes: Record<string, string> = {};
  if (target && records.length > 0) {
    try {
      message.completions_ref = await uploadArtifact(
        target,
        result.session_id,
        leaseId,
        "completions",
        records,
      );
    } catch (err) {
      notes.completions_upload_error = messageOf(err);
      target.logger.warn("completion records upload failed; result sent without them", {
        session_id: result.session_id,
        error: messageOf(err),
      });
    }
  }
  const trajectoryBytes = Buffer.byteLength(JSON.stringify(result.trajectory));
  if (target && trajectoryBytes > LIMITS.inlineTrajectoryBytes) {
    try {
      message.trajectory_ref = await uploadArtifact(
        target,
        result.session_id,
        leaseId,
        "trajectory",
        result.trajectory,
      );
      message.result = { ...result, trajectory: { ...result.trajectory, traces: [] } };
    } catch (err) {
      notes.trajectory_upload_error = messageOf(err);
      target.logger.warn("trajectory upload failed; sending it inline", {
        session_id: result.session_id,
        bytes: trajectoryBytes,
        error: messageOf(err),
      });
    }
  }
  if (Object.keys(notes).length) {
    const traj = message.result.trajectory;
    message.result = { ...message.result, trajectory: { ...traj, metadata: { ...traj.metadata, ...notes } } };
  }
  const size = Buffer.byteLength(JSON.stringify(message));
  if (size > LIMITS.maxWireMessageBytes) {
    // The control plane would refuse it and we would re-send it forever: report why instead.
    const why = `result of ${size} bytes exceeds the wire limit of ${LIMITS.maxWireMessageBytes} bytes and could not be uploaded`;
    message.result = {
      ...message.result,
      status: "ERROR",
      trajectory: { ...message.result.trajectory, status: "ERROR", traces: [], error: why },
      error: { kind: "infra", message: why },
    };
    delete message.trajectory_ref;
  }
  return message;
}
