/**
 * Session artifacts in R2 (uploaded trajectories and completion records): their keys, and
 * splicing an uploaded trajectory back into a stored result before it is served.
 *
 * @module
 */
import type { ArtifactKind } from "../protocol";
import type { RawResult } from "./shared/ledger-rpc";

/**
 * R2 key of an artifact: by batch, session and lease, so an upload under a superseded lease never
 * overwrites the current one. The routes only pass identifiers and the ledger's own lease ids, so
 * no component can hold a `/`; this checks it again, so a key can never reach outside
 * `batches/<batch>/sessions/<session>/` whatever a caller forgets (R2 keys are flat strings, but
 * listings and cleanups go by prefix).
 *
 * @example
 * ```ts
 * artifactKey("b_1", "b_1.0.0", "l_x", "trajectory"); // "batches/b_1/sessions/b_1.0.0/l_x/trajectory.json"
 * ```
 */
export function artifactKey(batchId: string, sessionId: string, leaseId: string, kind: ArtifactKind): string {
  for (const part of [batchId, sessionId, leaseId, kind]) {
    if (part === "" || part === "." || part === ".." || /[/\\]/.test(part))
      throw new Error(`artifact key component '${part}' would leave its prefix`);
  }
  return `batches/${batchId}/sessions/${sessionId}/${leaseId}/${kind}.json`;
}

/**
 * Thrown when a result refers to an artifact that R2 does not hold (deleted or never uploaded).
 *
 * @example
 * ```ts
 * throw new MissingArtifactError("batches/b/…/trajectory.json");
 * ```
 */
export class MissingArtifactError extends Error {
  override name = "MissingArtifactError";
  constructor(readonly key: string) {
    super(`artifact '${key}' is missing from the TRAJECTORIES bucket`);
  }
}

/**
 * A stored result's JSON with the uploaded trajectory put in place of the empty inline one.
 *
 * @example
 * ```ts
 * const json = await resultJson(env.TRAJECTORIES, raw);
 * ```
 */
export async function resultJson(
  bucket: R2Bucket,
  raw: Pick<RawResult, "json" | "trajectory_key">,
): Promise<string> {
  if (!raw.trajectory_key) return raw.json;
  const object = await bucket.get(raw.trajectory_key);
  if (!object) throw new MissingArtifactError(raw.trajectory_key);
  const trajectory = await object.text();
  // The stored result carries `"trajectory":{…,"traces":[],…}`; replace the whole member.
  const result = JSON.parse(raw.json) as Record<string, unknown>;
  result.trajectory = JSON.parse(trajectory);
  return JSON.stringify(result);
}

/**
 * Results with trajectories spliced, as `{"seq":N,"result":{…}}` JSON texts, fetched in parallel.
 *
 * @example
 * ```ts
 * const items = await sequencedResults(env.TRAJECTORIES, page.results);
 * ```
 */
export async function sequencedResults(bucket: R2Bucket, raws: RawResult[]): Promise<string[]> {
  return Promise.all(raws.map(async (r) => `{"seq":${r.seq},"result":${await resultJson(bucket, r)}}`));
}

/**
 * SHA-256 of bytes as hex.
 *
 * @example
 * ```ts
 * await sha256Hex(new TextEncoder().encode("x"));
 * ```
 */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
