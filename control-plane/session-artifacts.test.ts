/**
 * `GET /v1/sessions/:id/completions` and `/trajectory` answer either the whole JSON document (with
 * its `Content-Length`) or a 4xx error body — never an empty or partial 2xx, whatever state the
 * session and its R2 object are in.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { ArtifactRef } from "../protocol";
import {
  call,
  Gateway,
  getAsTrainer,
  postBatch,
  resultFor,
  TOKENS,
  task,
  uniqueId,
} from "./testing/fixtures";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

/** A batch of one session assigned to a test gateway. */
async function assigned() {
  const queue = uniqueId("art");
  const batchId = uniqueId("b");
  expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t")] })).status).toBe(201);
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello("node-art", 1);
  await gw.expect("welcome");
  const a = await gw.expect("assign");
  const put = async (kind: string, body: string) => {
    const res = await call(`/v1/sessions/${a.session.session_id}/artifacts/${kind}?lease_id=${a.lease_id}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKENS.gateway}`, "Content-Type": "application/json" },
      body,
    });
    expect(res.status).toBe(201);
    return ArtifactRef.parse(await res.json());
  };
  return { gw, a, sessionId: a.session.session_id, put };
}

async function errorOf(res: Response) {
  const body = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: body.error.code, message: body.error.message };
}

describe("session artifacts are served whole or refused", () => {
  it("answers 409 not_ready while the result is not accepted, even when the records are uploaded", async () => {
    const { sessionId, put } = await assigned();
    expect(await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/completions`))).toMatchObject({
      status: 409,
      code: "not_ready",
    });
    await put("completions", '[{"completion_id":"c1"}]');
    const early = await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/completions`));
    expect(early).toMatchObject({ status: 409, code: "not_ready" });
    expect(early.message).toContain(sessionId);
    expect(await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/trajectory`))).toMatchObject({
      status: 409,
      code: "not_ready",
    });
  });

  it("serves the whole document with its Content-Length once accepted", async () => {
    const { gw, a, sessionId, put } = await assigned();
    const records = JSON.stringify([{ completion_id: "c1", pad: "x".repeat(300_000) }]);
    const ref = await put("completions", records);
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-art"),
      completions_ref: ref,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const res = await getAsTrainer(`/v1/sessions/${sessionId}/completions`);
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Length")).toBe(String(ref.bytes));
    expect(await res.text()).toBe(records);
    const traj = await getAsTrainer(`/v1/sessions/${sessionId}/trajectory`);
    expect(traj.status).toBe(200);
    const text = await traj.text();
    expect(traj.headers.get("Content-Length")).toBe(String(new TextEncoder().encode(text).byteLength));
    expect(JSON.parse(text)).toMatchObject({ status: "COMPLETED" });
  });

  it("answers 404 not_found for a finished session without completion records", async () => {
    const { gw, a, sessionId } = await assigned();
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result: resultFor(a.session, "node-art") });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const err = await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/completions`));
    expect(err).toMatchObject({ status: 404, code: "not_found" });
    expect(err.message).toContain("without completion records");
  });

  it("refuses, never serves empty, when the stored object is missing or not the size of the accepted ref", async () => {
    const { gw, a, sessionId, put } = await assigned();
    const ref = await put("completions", '[{"completion_id":"c1"}]');
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-art"),
      completions_ref: ref,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    // An object overwritten with other bytes than the accepted ref describes (here: empty).
    await env.TRAJECTORIES.put(ref.key, new Uint8Array(0));
    const truncated = await getAsTrainer(`/v1/sessions/${sessionId}/completions`);
    expect(truncated.status).toBeGreaterThanOrEqual(400);
    expect(await errorOf(truncated)).toMatchObject({ status: 409, code: "not_ready" });
    await env.TRAJECTORIES.delete(ref.key);
    expect(await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/completions`))).toMatchObject({
      status: 404,
      code: "not_found",
    });
  });

  it("answers HEAD with the GET's status and length but no body", async () => {
    const { gw, a, sessionId, put } = await assigned();
    const ref = await put("completions", '[{"completion_id":"c1"}]');
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-art"),
      completions_ref: ref,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const head = await call(`/v1/sessions/${sessionId}/completions`, {
      method: "HEAD",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(head.status).toBe(200);
    expect(head.headers.get("Content-Length")).toBe(String(ref.bytes));
    expect(await head.text()).toBe("");
  });
});
