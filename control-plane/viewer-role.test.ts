import { describe, expect, it } from "vitest";
import { ErrorBody } from "../protocol";
import { call, postBatch, TOKENS, task, uniqueId } from "./testing/fixtures";

const as = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", ...init.headers },
});

async function expectForbidden(res: Response): Promise<void> {
  expect(res.status).toBe(403);
  const body = ErrorBody.parse(await res.json());
  expect(body.error.code).toBe("forbidden");
  expect(body.error.message).toMatch(/viewer token is read-only/);
}

describe("viewer role", () => {
  it("reads batches, sessions, gateways, the fence state and events", async () => {
    const batchId = uniqueId("viewer");
    expect((await postBatch({ batch_id: batchId, tasks: [task("t0")] })).status).toBe(201);
    const sessionId = `${batchId}.0.0`;
    for (const path of [
      "/v1/batches",
      `/v1/batches/${batchId}`,
      `/v1/batches/${batchId}/results`,
      `/v1/batches/${batchId}/sessions`,
      `/v1/batches/${batchId}/summary`,
      `/v1/sessions/${sessionId}`,
      "/v1/gateways",
      "/v1/queues/default/inference",
      "/v1/events",
      "/metrics",
    ]) {
      const res = await call(path, as(TOKENS.viewer));
      expect(res.status, path).toBe(200);
      await res.body?.cancel();
    }
  });

  it("reaches a session's logs and token text (no 401 or 403: the session has none yet)", async () => {
    const batchId = uniqueId("viewer-logs");
    expect((await postBatch({ batch_id: batchId, tasks: [task("t0")] })).status).toBe(201);
    for (const what of ["logs", "tokens"]) {
      const res = await call(`/v1/sessions/${batchId}.0.0/${what}`, as(TOKENS.viewer));
      expect(res.status, what).toBe(409);
      expect(ErrorBody.parse(await res.json()).error.code).toBe("not_ready");
    }
  });

  it("is satisfied by the trainer and admin tokens", async () => {
    for (const token of [TOKENS.trainer, TOKENS.admin]) {
      const res = await call("/v1/events?limit=1", as(token));
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
  });

  it("cannot create or cancel batches (403)", async () => {
    const batchId = uniqueId("viewer-write");
    await expectForbidden(await postBatch({ batch_id: batchId, tasks: [task("t0")] }, TOKENS.viewer));
    expect((await postBatch({ batch_id: batchId, tasks: [task("t0")] })).status).toBe(201);
    await expectForbidden(await call(`/v1/batches/${batchId}`, as(TOKENS.viewer, { method: "DELETE" })));
    await expectForbidden(
      await call(`/v1/batches/${batchId}/tasks/t0`, as(TOKENS.viewer, { method: "DELETE" })),
    );
  });

  it("cannot drain a gateway or change the fence (403)", async () => {
    await expectForbidden(await call("/v1/gateways/node-x/drain", as(TOKENS.viewer, { method: "POST" })));
    await expectForbidden(
      await call(
        "/v1/queues/default/inference/pause",
        as(TOKENS.viewer, { method: "POST", body: JSON.stringify({ mode: "drain" }) }),
      ),
    );
    await expectForbidden(
      await call(
        "/v1/queues/default/policy_version",
        as(TOKENS.viewer, { method: "POST", body: JSON.stringify({ policy_version: 2 }) }),
      ),
    );
  });

  it("cannot connect as a gateway or use admin routes", async () => {
    const connect = await call("/v1/gateways/connect", {
      headers: { Upgrade: "websocket", Authorization: `Bearer ${TOKENS.viewer}` },
    });
    expect(connect.status).toBe(403);
    await expectForbidden(await call("/v1/admin/tokens", as(TOKENS.viewer, { method: "POST", body: "{}" })));
  });
});
