/**
 * `GET /v1/sessions/:id/logs` and `/tokens` in workerd: the gateway uploads the artifacts under
 * its lease, the result carries their refs, the ledger keeps keys and sizes, and a trainer reads
 * them back (token text expanded to whole prompts); `has_logs` / `has_tokens` on the session
 * view; 409 before the result, 404 without the artifact, 400 for a bad upload shape; the viewer
 * role reads them.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { ArtifactRef, type LogsUpload, type TokenTextUpload } from "../protocol";
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

const LOGS: LogsUpload = {
  limit_bytes: 262144,
  streams: [
    {
      name: "prepare",
      bytes_total: 30,
      bytes_kept: 30,
      truncated: false,
      text: "==> prepare-0.stdout.log <==\nok",
    },
    {
      name: "harness.stderr",
      bytes_total: 900_000,
      bytes_kept: 262144,
      truncated: true,
      text: "fatal: config.toml not found\n",
    },
  ],
};

/** Two traces; the second prompt repeats the first trace's 4 ids and adds one. */
const TOKENS_UPLOAD: TokenTextUpload = {
  v: 1,
  traces: [
    { prompt_shared: 0, prompt: ["<|im_start|>", "user", "\n"], response: ["hi"] },
    { prompt_shared: 4, prompt: ["!"], response: ["ok", "<|im_end|>"] },
  ],
};

async function assigned() {
  const queue = uniqueId("logs");
  const batchId = uniqueId("b");
  expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t")] })).status).toBe(201);
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello("node-logs", 1);
  await gw.expect("welcome");
  const a = await gw.expect("assign");
  const put = (kind: string, body: unknown) =>
    call(`/v1/sessions/${a.session.session_id}/artifacts/${kind}?lease_id=${a.lease_id}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKENS.gateway}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  return { gw, a, sessionId: a.session.session_id, put };
}

async function errorOf(res: Response) {
  const body = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: body.error.code, message: body.error.message };
}

describe("session logs and token text", () => {
  it("a failed session's logs and token text are served to the trainer once its result is accepted", async () => {
    const { gw, a, sessionId, put } = await assigned();
    const logsRes = await put("logs", LOGS);
    expect(logsRes.status).toBe(201);
    const logsRef = ArtifactRef.parse(await logsRes.json());
    const tokensRes = await put("tokens", TOKENS_UPLOAD);
    expect(tokensRes.status).toBe(201);
    const tokensRef = ArtifactRef.parse(await tokensRes.json());
    expect(await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/logs`))).toMatchObject({
      status: 409,
      code: "not_ready",
    });
    const failed = {
      ...resultFor(a.session, "node-logs"),
      status: "ERROR" as const,
      reward: null,
      error: { kind: "agent" as const, message: "harness exited with code 3" },
    };
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: failed,
      logs_ref: logsRef,
      tokens_ref: tokensRef,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");

    const logs = await getAsTrainer(`/v1/sessions/${sessionId}/logs`);
    expect(logs.status).toBe(200);
    expect(await logs.json()).toEqual({ session_id: sessionId, ...LOGS });

    const tokens = await getAsTrainer(`/v1/sessions/${sessionId}/tokens`);
    expect(tokens.status).toBe(200);
    expect(await tokens.json()).toEqual({
      session_id: sessionId,
      traces: [
        { prompt: ["<|im_start|>", "user", "\n"], response: ["hi"] },
        { prompt: ["<|im_start|>", "user", "\n", "hi", "!"], response: ["ok", "<|im_end|>"] },
      ],
    });

    const view = (await (await getAsTrainer(`/v1/sessions/${sessionId}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({ status: "ERROR", has_logs: true, has_tokens: true, has_completions: false });
    expect(view).not.toHaveProperty("logs_key");
    expect(view).not.toHaveProperty("tokens_bytes");
  });

  it("answers 404 for a finished session without logs or token text, and has_logs false", async () => {
    const { gw, a, sessionId } = await assigned();
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result: resultFor(a.session, "node-logs") });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const logs = await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/logs`));
    expect(logs).toMatchObject({ status: 404, code: "not_found" });
    expect(logs.message).toContain("without logs");
    const tokens = await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/tokens`));
    expect(tokens).toMatchObject({ status: 404, code: "not_found" });
    expect(tokens.message).toContain("no token text");
    const view = (await (await getAsTrainer(`/v1/sessions/${sessionId}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({ has_logs: false, has_tokens: false });
    expect(await errorOf(await getAsTrainer(`/v1/sessions/${uniqueId("nob")}.0.0/logs`))).toMatchObject({
      status: 404,
    });
  });

  it("refuses, never serves a guess, when the stored logs are not the accepted upload", async () => {
    const { gw, a, sessionId, put } = await assigned();
    const ref = ArtifactRef.parse(await (await put("logs", LOGS)).json());
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-logs"),
      logs_ref: ref,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    await env.TRAJECTORIES.put(ref.key, '{"limit_bytes":0,"streams":[]}');
    expect(await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/logs`))).toMatchObject({
      status: 409,
      code: "not_ready",
    });
    await env.TRAJECTORIES.delete(ref.key);
    const gone = await errorOf(await getAsTrainer(`/v1/sessions/${sessionId}/logs`));
    expect(gone).toMatchObject({ status: 404, code: "not_found" });
    expect(gone.message).toContain("missing from storage");
  });

  it("refuses an upload of the wrong shape, naming the field", async () => {
    const { put } = await assigned();
    const bad = await errorOf(
      await put("logs", { ...LOGS, streams: [{ ...LOGS.streams[0], bytes_total: "30" }] }),
    );
    expect(bad).toMatchObject({ status: 400, code: "validation_failed" });
    expect(bad.message).toContain("streams.0.bytes_total");
    const shared = await errorOf(
      await put("tokens", { v: 1, traces: [{ prompt_shared: 3, prompt: [], response: [] }] }),
    );
    expect(shared).toMatchObject({ status: 400, code: "validation_failed" });
    expect(shared.message).toContain("traces[0].prompt_shared");
  });

  it("refuses a result whose logs_ref is another session's upload", async () => {
    const { gw, a } = await assigned();
    const ref = { key: "batches/x/sessions/x.0.0/l/logs.json", bytes: 2, sha256: "0".repeat(64) };
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-logs"),
      logs_ref: ref,
    });
    const err = (await gw.expect("error")) as { message: string };
    expect(err.message).toContain("logs_ref.key");
  });

  it("are in the OpenAPI document", async () => {
    const doc = (await (await call("/openapi.json")).json()) as { paths: Record<string, { get?: unknown }> };
    expect(doc.paths["/v1/sessions/{id}/logs"]?.get).toBeDefined();
    expect(doc.paths["/v1/sessions/{id}/tokens"]?.get).toBeDefined();
  });

  it("the viewer (and the trainer) may read them; no token or the gateway's may not", async () => {
    const { gw, a, sessionId, put } = await assigned();
    const logsRef = ArtifactRef.parse(await (await put("logs", LOGS)).json());
    const tokensRef = ArtifactRef.parse(await (await put("tokens", TOKENS_UPLOAD)).json());
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-logs"),
      logs_ref: logsRef,
      tokens_ref: tokensRef,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const as = (token: string | null, what: string) =>
      call(
        `/v1/sessions/${sessionId}/${what}`,
        token ? { headers: { Authorization: `Bearer ${token}` } } : {},
      );
    for (const what of ["logs", "tokens"]) {
      expect((await as(TOKENS.viewer, what)).status, `viewer ${what}`).toBe(200);
      expect((await as(TOKENS.trainer, what)).status, `trainer ${what}`).toBe(200);
      expect((await as(TOKENS.gateway, what)).status, `gateway ${what}`).toBe(401);
      expect((await as(null, what)).status, `no token ${what}`).toBe(401);
    }
    // Uploading stays the gateway's.
    const viewerPut = await call(`/v1/sessions/${sessionId}/artifacts/logs?lease_id=${a.lease_id}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${TOKENS.viewer}`, "Content-Type": "application/json" },
      body: JSON.stringify(LOGS),
    });
    expect(viewerPut.status).toBe(403);
  });
});
