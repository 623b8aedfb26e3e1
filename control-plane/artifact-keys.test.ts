/**
 * Artifact keys cannot leave their prefix: an upload lands at exactly
 * `batches/<batch>/sessions/<session>/<lease>/<kind>.json`, whatever the path segments, encodings
 * or lease ids a gateway sends; ids that would add a level (`/`, encoded or not) are refused
 * before the bucket is touched, and a result cannot point at another session's upload.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { artifactKey } from "./artifacts";
import { call, Gateway, postBatch, resultFor, TOKENS, task, uniqueId } from "./testing/fixtures";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

/** One session of batch `batchId` assigned to a test gateway. */
async function assigned(batchId: string) {
  const queue = uniqueId("keys");
  expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t", { num_samples: 2 })] })).status).toBe(
    201,
  );
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello("node-keys", 2);
  await gw.expect("welcome");
  return { gw, first: await gw.expect("assign"), second: await gw.expect("assign") };
}

function put(path: string, body = '{"status":"COMPLETED","traces":[],"metadata":{},"error":null}') {
  return call(path, {
    method: "PUT",
    headers: { Authorization: `Bearer ${TOKENS.gateway}`, "Content-Type": "application/json" },
    body,
  });
}

async function keys(): Promise<string[]> {
  return (await env.TRAJECTORIES.list()).objects.map((o) => o.key);
}

describe("artifact keys stay under their session's prefix", () => {
  it("refuses traversal in the session id, the kind and the lease id, and writes nothing", async () => {
    const batchId = uniqueId("b");
    const { first } = await assigned(batchId);
    const sessionId = first.session.session_id;
    const lease = first.lease_id;
    const before = await keys();
    const attempts: [string, number][] = [
      [`/v1/sessions/${batchId}%2F..%2Fother.0.0/artifacts/trajectory?lease_id=${lease}`, 400],
      [`/v1/sessions/..%2F${sessionId}/artifacts/trajectory?lease_id=${lease}`, 400],
      [`/v1/sessions/${encodeURIComponent(`${batchId}/x.0.0`)}/artifacts/logs?lease_id=${lease}`, 400],
      [`/v1/sessions/${sessionId}/artifacts/..%2Ftrajectory?lease_id=${lease}`, 400],
      [`/v1/sessions/${sessionId}/artifacts/trajectory%2F..?lease_id=${lease}`, 400],
      [
        `/v1/sessions/${sessionId}/artifacts/trajectory?lease_id=${encodeURIComponent(`../../${lease}`)}`,
        409,
      ],
      [`/v1/sessions/${sessionId}/artifacts/trajectory?lease_id=${encodeURIComponent(`${lease}/../x`)}`, 409],
      [`/v1/sessions/${sessionId}/artifacts/trajectory?lease_id=%2F`, 409],
    ];
    for (const [path, status] of attempts) {
      const res = await put(path);
      expect(res.status, path).toBe(status);
      expect(((await res.json()) as { error: { code: string } }).error.code, path).toMatch(
        /^(validation_failed|stale_lease)$/,
      );
    }
    // Dot segments are resolved by the URL parser before any route sees them: the request lands
    // on another route (here a trainer route, which refuses the gateway token), never an upload.
    const dotted = await put(
      `/v1/sessions/${sessionId}/../../batches/x/artifacts/trajectory?lease_id=${lease}`,
    );
    expect(dotted.status).toBe(401);
    expect(await keys()).toEqual(before);
  });

  it("puts an accepted upload at exactly its key, also for batch ids with dots", async () => {
    const batchId = `${uniqueId("b")}..x`;
    const { gw, first, second } = await assigned(batchId);
    const sessionId = first.session.session_id;
    const res = await put(`/v1/sessions/${sessionId}/artifacts/trajectory?lease_id=${first.lease_id}`);
    expect(res.status).toBe(201);
    const ref = (await res.json()) as { key: string; bytes: number; sha256: string };
    expect(ref.key).toBe(artifactKey(batchId, sessionId, first.lease_id, "trajectory"));
    expect(ref.key.startsWith(`batches/${batchId}/sessions/${sessionId}/${first.lease_id}/`)).toBe(true);
    const mine = (await keys()).filter((k) => k.includes(batchId));
    expect(mine).toEqual([ref.key]);

    // The other session's result may not name this upload as its own.
    const stolen = { ...resultFor(second.session, "node-keys") };
    stolen.trajectory = { ...stolen.trajectory, traces: [] };
    gw.send({ v: 1, type: "result", lease_id: second.lease_id, result: stolen, trajectory_ref: ref });
    expect(await gw.expect("error")).toMatchObject({
      code: "invalid_message",
      message: "trajectory_ref.key: not the upload of this session and lease",
    });
  });

  it("a result whose lease id could not be a key component is refused as invalid, not as a failure", async () => {
    const batchId = uniqueId("b");
    const { gw, first } = await assigned(batchId);
    const result = resultFor(first.session, "node-keys");
    result.trajectory = { ...result.trajectory, traces: [] };
    const ref = { key: `batches/${batchId}/x`, bytes: 2, sha256: "0".repeat(64) };
    gw.send({ v: 1, type: "result", lease_id: `${first.lease_id}/../x`, result, trajectory_ref: ref });
    expect(await gw.expect("error")).toMatchObject({
      code: "invalid_message",
      message: "trajectory_ref.key: not the upload of this session and lease",
    });
  });

  it("artifactKey refuses a component that would add or leave a level", () => {
    expect(artifactKey("b", "b.0.0", "l_1", "logs")).toBe("batches/b/sessions/b.0.0/l_1/logs.json");
    for (const [batch, session, lease] of [
      ["a/b", "a/b.0.0", "l_1"],
      ["b", "b.0.0", "../l_1"],
      ["b", "..", "l_1"],
      ["b", "b.0.0", ""],
      ["b", "b.0.0", "l\\1"],
    ] as const)
      expect(() => artifactKey(batch, session, lease, "logs"), `${batch} ${session} ${lease}`).toThrow(
        /artifact key component/,
      );
  });
});
