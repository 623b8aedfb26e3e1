import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { BatchCreated, BatchStatusBody, ErrorBody, LIMITS, ResultsPage } from "../protocol";
import { app } from "./app";
import { splitText } from "./batch/result-store";
import { parseSessionId, sessionIdOf } from "./ids";
import { canonicalHash, canonicalJson } from "./request-body";
import { call, getAsTrainer, postBatch, TOKENS, task, uniqueId } from "./testing/fixtures";

async function errorOf(res: Response): Promise<ErrorBody["error"]> {
  return ErrorBody.parse(await res.json()).error;
}

describe("health and routing", () => {
  it("answers /health without auth", async () => {
    const res = await call("/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it("answers unknown routes with a JSON 404", async () => {
    const res = await call("/nope");
    expect(res.status).toBe(404);
    expect((await errorOf(res)).code).toBe("not_found");
  });
});

describe("auth", () => {
  const batch = { tasks: [task("t0")] };

  it("refuses trainer routes without a token or with a wrong one", async () => {
    const missing = await call("/v1/batches", { method: "POST", body: JSON.stringify(batch) });
    expect(missing.status).toBe(401);
    expect((await errorOf(missing)).code).toBe("unauthorized");
    const wrong = await postBatch(batch, "not-the-token");
    expect(wrong.status).toBe(401);
    const wrongGet = await call("/v1/batches/x", { headers: { Authorization: "Bearer nope" } });
    expect(wrongGet.status).toBe(401);
  });

  it("refuses the gateway token on batches and the trainer token on connect (401)", async () => {
    expect((await postBatch(batch, TOKENS.gateway)).status).toBe(401);
    const res = await call("/v1/gateways/connect", {
      headers: { Upgrade: "websocket", Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(res.status).toBe(401);
    const none = await call("/v1/gateways/connect", { headers: { Upgrade: "websocket" } });
    expect(none.status).toBe(401);
  });

  it("lets the admin token act as trainer", async () => {
    const res = await postBatch({ batch_id: uniqueId("admin"), tasks: [task("t0")] }, TOKENS.admin);
    expect(res.status).toBe(201);
  });

  it("requires a WebSocket upgrade on connect (426) and a valid queue name (400)", async () => {
    const plain = await call("/v1/gateways/connect", {
      headers: { Authorization: `Bearer ${TOKENS.gateway}` },
    });
    expect(plain.status).toBe(426);
    expect((await errorOf(plain)).code).toBe("upgrade_required");
    const badQueue = await call("/v1/gateways/connect?queue=bad%20name", {
      headers: { Upgrade: "websocket", Authorization: `Bearer ${TOKENS.gateway}` },
    });
    expect(badQueue.status).toBe(400);
    expect((await errorOf(badQueue)).message).toMatch(/^queue: /);
  });

  it("answers 503 naming the secret when a token is not configured", async () => {
    const bare = { ...env, POLAR_TRAINER_TOKEN: undefined, POLAR_GATEWAY_TOKEN: undefined };
    const res = await app.request(
      "/v1/batches",
      { method: "POST", headers: { Authorization: "Bearer anything" }, body: "{}" },
      bare,
    );
    expect(res.status).toBe(503);
    const error = await errorOf(res);
    expect(error.code).toBe("not_configured");
    expect(error.message).toContain("POLAR_TRAINER_TOKEN");
    const connect = await app.request(
      "/v1/gateways/connect",
      { headers: { Upgrade: "websocket", Authorization: `Bearer ${TOKENS.admin}` } },
      bare,
    );
    expect(connect.status).toBe(503);
    expect((await errorOf(connect)).message).toContain("POLAR_GATEWAY_TOKEN");
  });
});

describe("validation: nothing is stored on a 4xx", () => {
  async function expectRefused(body: unknown, status: number, code: string, fields: string[]) {
    const batchId = uniqueId("bad");
    const payload = typeof body === "string" ? body : { batch_id: batchId, ...(body as object) };
    const res = await postBatch(payload);
    expect(res.status).toBe(status);
    const error = await errorOf(res);
    expect(error.code).toBe(code);
    for (const field of fields) expect(error.message).toContain(field);
    expect((await getAsTrainer(`/v1/batches/${batchId}`)).status).toBe(404);
    return error;
  }

  it("names a missing instruction", async () => {
    const { instruction: _, ...noInstruction } = task("t0");
    const error = await expectRefused({ tasks: [noInstruction] }, 400, "validation_failed", [
      "tasks[0].instruction:",
    ]);
    expect(error.details).toEqual(
      expect.arrayContaining([expect.objectContaining({ field: "tasks[0].instruction" })]),
    );
  });

  it("names num_samples: 0 and an unknown key, every offending field at once", async () => {
    await expectRefused(
      { tasks: [task("t0"), task("t1", { num_samples: 0, foo: 1 } as object)] },
      400,
      "validation_failed",
      ["tasks[1].num_samples:", "tasks[1].foo: unknown key"],
    );
  });

  it("names an unknown evaluator strategy, builder strategy, harness or runtime backend", async () => {
    const shell = { harness: "shell", custom_shell: { command: "true" } };
    const cases: Array<[object, string, string]> = [
      [{ evaluator: { strategy: "vibes" } }, "tasks[0].evaluator.strategy:", "session_completed"],
      [{ builder: { strategy: "tree" } }, "tasks[0].builder.strategy:", "conversation"],
      [{ agent: { harness: "cursor" } }, "tasks[0].agent.harness:", "claude_code"],
      [{ agent: shell, runtime: { backend: "kubernetes" } }, "tasks[0].runtime.backend:", "apptainer"],
    ];
    for (const [override, field, known] of cases) {
      const error = await expectRefused(
        { tasks: [task("t0", override as never)] },
        400,
        "validation_failed",
        [field],
      );
      expect(error.message).toContain(known); // the message lists what is accepted
    }
  });

  it("accepts custom module paths it cannot check (the gateway resolves them)", async () => {
    const res = await postBatch({
      batch_id: uniqueId("modpath"),
      tasks: [
        task("t0", {
          evaluator: { strategy: "./evals/mine.mjs:evaluate" },
          builder: { strategy: "my_pkg.builders:LastTurn" },
        }),
        task("t1", { agent: { import_path: "./harness.mjs:plan" }, runtime: { import_path: "/opt/rt.mjs" } }),
      ],
    });
    expect(res.status).toBe(201);
  });

  it("refuses a body that is not JSON", async () => {
    await expectRefused("{not json", 400, "invalid_json", ["not valid JSON"]);
  });

  it("refuses a body over the size limit with 413", async () => {
    const res = await postBatch({
      tasks: [task("t0", { metadata: { pad: "x".repeat(LIMITS.maxBodyBytes) } })],
    });
    expect(res.status).toBe(413);
    expect((await errorOf(res)).code).toBe("payload_too_large");
  });

  it("counts the bytes actually received when no Content-Length is sent", async () => {
    const chunk = new TextEncoder().encode(" ".repeat(1024 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > LIMITS.maxBodyBytes) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await call("/v1/batches", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
      body,
    });
    expect(res.status).toBe(413);
    expect((await errorOf(res)).message).toContain(`${LIMITS.maxBodyBytes}`);
  });

  it("refuses a batch id longer than session ids allow", async () => {
    const res = await postBatch({ batch_id: "b".repeat(LIMITS.maxBatchIdChars + 1), tasks: [task("t0")] });
    expect(res.status).toBe(400);
    expect((await errorOf(res)).message).toContain("batch_id:");
  });

  it("refuses bad results query parameters naming them", async () => {
    const id = uniqueId("q");
    expect((await postBatch({ batch_id: id, tasks: [task("t0")] })).status).toBe(201);
    const after = await getAsTrainer(`/v1/batches/${id}/results?after=-1`);
    expect(after.status).toBe(400);
    expect((await errorOf(after)).message).toMatch(/^after: /);
    const limit = await getAsTrainer(`/v1/batches/${id}/results?limit=${LIMITS.maxResultsPerPage + 1}`);
    expect(limit.status).toBe(400);
    expect((await errorOf(limit)).message).toMatch(/^limit: /);
  });
});

describe("batches", () => {
  it("creates once, replays the same body with 200, refuses another body with 409", async () => {
    const batchId = uniqueId("idem");
    const body = {
      batch_id: batchId,
      queue: uniqueId("q"),
      tasks: [task("a", { num_samples: 3 }), task("b")],
    };
    const first = await postBatch(body);
    expect(first.status).toBe(201);
    const created = BatchCreated.parse(await first.json());
    expect(created).toEqual({ batch_id: batchId, queue: body.queue, tasks: 2, sessions: 4, created: true });

    // Same content with keys reordered and a default spelled out: still the same request.
    const reordered = {
      tasks: [task("a", { num_samples: 3 }), { ...task("b"), num_samples: 1 }],
      queue: body.queue,
      batch_id: batchId,
    };
    const replay = await postBatch(reordered);
    expect(replay.status).toBe(200);
    expect(await replay.json()).toEqual({ ...created, created: false });

    const different = await postBatch({ ...body, tasks: [task("a", { num_samples: 2 })] });
    expect(different.status).toBe(409);
    expect((await errorOf(different)).code).toBe("conflict");
  });

  it("generates a b_<24 hex> batch id when none is given and uses queue 'default'", async () => {
    const res = await postBatch({ tasks: [task("t0")] });
    expect(res.status).toBe(201);
    const created = BatchCreated.parse(await res.json());
    expect(created.batch_id).toMatch(/^b_[0-9a-f]{24}$/);
    expect(created.queue).toBe("default");
  });

  it("reports per-task counts", async () => {
    const batchId = uniqueId("status");
    await postBatch({
      batch_id: batchId,
      queue: uniqueId("idle"),
      tasks: [task("a", { num_samples: 2 }), task("b")],
    });
    const res = await getAsTrainer(`/v1/batches/${batchId}`);
    expect(res.status).toBe(200);
    const status = BatchStatusBody.parse(await res.json());
    expect(status.status).toBe("running");
    expect(status.sessions).toBe(3);
    expect(status.completed_sessions).toBe(0);
    expect(status.counts.QUEUED).toBe(3);
    expect(status.tasks.map((t) => [t.task_id, t.num_samples, t.counts.QUEUED, t.done])).toEqual([
      ["a", 2, 2, false],
      ["b", 1, 1, false],
    ]);
    const page = ResultsPage.parse(await (await getAsTrainer(`/v1/batches/${batchId}/results`)).json());
    expect(page).toEqual({ batch_id: batchId, results: [], next: 0, done: false });
  });

  it("answers 404 for an unknown batch and its results", async () => {
    expect((await getAsTrainer(`/v1/batches/${uniqueId("ghost")}`)).status).toBe(404);
    expect((await getAsTrainer(`/v1/batches/${uniqueId("ghost")}/results`)).status).toBe(404);
  });
});

describe("helpers", () => {
  it("hashes canonically", async () => {
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: undefined }] })).toBe('{"a":[{"d":2}],"b":1}');
    expect(await canonicalHash({ a: 1, b: 2 })).toBe(await canonicalHash({ b: 2, a: 1 }));
    expect(await canonicalHash({ a: 1 })).not.toBe(await canonicalHash({ a: 2 }));
  });

  it("round-trips session ids, dots in batch ids included", () => {
    expect(parseSessionId(sessionIdOf("my.batch", 2, 10))).toEqual({
      batchId: "my.batch",
      taskIndex: 2,
      sampleIndex: 10,
    });
    expect(parseSessionId("nodots")).toBeNull();
  });

  it("splits text without cutting surrogate pairs", () => {
    const text = `a${"😀".repeat(5)}`;
    const pieces = splitText(text, 2);
    expect(pieces.join("")).toBe(text);
    // Every piece well-formed: no high surrogate without its low half after it, no low one alone.
    const lone = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
    expect(lone.test(`x${"😀".slice(0, 1)}`)).toBe(true);
    for (const piece of pieces) expect(lone.test(piece), JSON.stringify(piece)).toBe(false);
  });
});

describe("openapi and upstream-compatible routes", () => {
  it("publishes a generated OpenAPI document covering the API", async () => {
    const res = await call("/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as {
      openapi: string;
      paths: Record<
        string,
        Record<
          string,
          { requestBody?: { content: Record<string, { schema: { properties: Record<string, unknown> } }> } }
        >
      >;
    };
    expect(doc.openapi).toBe("3.1.0");
    for (const p of [
      "/v1/batches",
      "/v1/batches/{id}/results",
      "/v1/sessions/{id}/artifacts/{kind}",
      "/rollout/task/submit",
    ])
      expect(Object.keys(doc.paths)).toContain(p);
    const schema = doc.paths["/v1/batches"]!.post!.requestBody!.content["application/json"]!.schema;
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(["batch_id", "queue", "callback_url", "tasks"]),
    );
  });

  it("accepts an upstream TaskRequest and answers upstream's TaskStatus shapes", async () => {
    const auth = { Authorization: `Bearer ${TOKENS.trainer}` };
    const taskId = uniqueId("up");
    const submit = await call("/rollout/task/submit", {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ ...task(taskId, { num_samples: 2 }), queue: uniqueId("upq") }),
    });
    expect(await submit.json()).toEqual({ task_id: taskId, status: "running" });
    const status = await call(`/rollout/task/${taskId}`, { headers: auth });
    expect(await status.json()).toEqual({
      task_id: taskId,
      status: "running",
      total_sessions: 2,
      completed_sessions: 0,
      results: [],
      result_paths: [],
    });
    const overview = (await (await call("/rollout/status", { headers: auth })).json()) as {
      tasks: Record<string, string>;
    };
    expect(overview.tasks[taskId]).toBe("running");
    const cancelled = (await (
      await call(`/rollout/task/${taskId}`, { method: "DELETE", headers: auth })
    ).json()) as {
      status: string;
      results: { status: string; metadata: { polar_ts: { status: string } } }[];
    };
    expect(cancelled.status).toBe("cancelled");
    // Upstream has no CANCELLED session status: a cancelled session reads as ERROR there.
    expect(cancelled.results.map((r) => r.status)).toEqual(["ERROR", "ERROR"]);
    expect(cancelled.results.map((r) => r.metadata.polar_ts.status)).toEqual(["CANCELLED", "CANCELLED"]);
    expect((await call("/rollout/task/never-seen", { headers: auth })).status).toBe(404);
  });
});
