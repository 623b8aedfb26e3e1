import { afterEach, describe, expect, it } from "vitest";
import { tokenHash } from "../auth";
import { call, Gateway, postBatch, TOKENS, task, uniqueId } from "../testing/fixtures";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

/** Registers a fresh path credential scoped to `queue` (admin route) and returns it. */
async function pathCredential(queue?: string): Promise<{ name: string; token: string }> {
  const name = uniqueId("run");
  const token = `pt_${name}.${crypto.randomUUID().replaceAll("-", "")}`;
  const res = await call("/v1/admin/path_tokens", {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKENS.admin}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name, sha256: await tokenHash(token), ...(queue ? { queue } : {}) }),
  });
  expect(res.status).toBe(201);
  expect(await res.json()).toEqual({ name, queue: queue ?? "default", registered: true });
  return { name, token };
}

const submitBody = (taskId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ ...task(taskId, { num_samples: 1 }), ...extra });

describe("header credentials on the upstream surface", () => {
  it("accepts upstream's X-Polar-Control-Token with the trainer token; refuses a wrong one with 401", async () => {
    const ok = await call("/rollout/status", { headers: { "X-Polar-Control-Token": TOKENS.trainer } });
    expect(ok.status).toBe(200);
    const wrong = await call("/rollout/status", { headers: { "X-Polar-Control-Token": "nope" } });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    const none = await call("/rollout/task/x");
    expect(none.status).toBe(401);
  });

  it("the /v1 API keeps plain bearer auth: X-Polar-Control-Token alone is not read there", async () => {
    const res = await call("/v1/batches", { headers: { "X-Polar-Control-Token": TOKENS.trainer } });
    expect(res.status).toBe(401);
  });

  it("/health: an anonymous check gets {status} only; a credential adds upstream's nodes count", async () => {
    expect(await (await call("/health")).json()).toEqual({ status: "ok" });
    const queue = uniqueId("health");
    const gw = await Gateway.connect(queue);
    open.push(gw);
    gw.hello(uniqueId("node"), 1);
    await gw.expect("welcome");
    const body = (await (
      await call("/health", { headers: { "X-Polar-Control-Token": TOKENS.trainer } })
    ).json()) as { status: string; nodes: number };
    expect(body.status).toBe("ok");
    expect(body.nodes).toBeGreaterThanOrEqual(1);
    const status = (await (
      await call("/rollout/status", { headers: { Authorization: `Bearer ${TOKENS.trainer}` } })
    ).json()) as { nodes: { nodes: unknown[] } };
    expect(body.nodes).toBe(status.nodes.nodes.length);
    expect((await call("/health", { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
  });
});

describe("a base URL with a path credential", () => {
  it("authenticates whatever is appended, without headers; nothing outside the upstream surface", async () => {
    const queue = uniqueId("pathq");
    const { token } = await pathCredential(queue);
    const base = `/u/${token}`;
    const taskId = uniqueId("pt");
    const submit = await call(`${base}/rollout/task/submit`, { method: "POST", body: submitBody(taskId) });
    expect(submit.status).toBe(200);
    expect(await submit.json()).toEqual({ task_id: taskId, status: "running" });
    // No header on the poll, as upstream's bridge polls.
    const polled = await call(`${base}/rollout/task/${taskId}`);
    expect(polled.status).toBe(200);
    expect(await polled.json()).toMatchObject({ task_id: taskId, status: "running", total_sessions: 1 });
    expect(await (await call(`${base}/health`)).json()).toEqual({ status: "ok", nodes: 0 });
    const overview = (await (await call(`${base}/rollout/status`)).json()) as {
      tasks: Record<string, string>;
    };
    expect(overview.tasks).toEqual({ [taskId]: "running" });
    // The task ran on the credential's queue.
    const native = await call(`/v1/batches/rollout:${taskId}`, {
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(((await native.json()) as { queue: string }).queue).toBe(queue);
    expect((await call(`${base}/v1/batches`)).status).toBe(404);
    const cancel = await call(`${base}/rollout/task/${taskId}?register_if_missing=true`, {
      method: "DELETE",
    });
    expect(((await cancel.json()) as { status: string }).status).toBe("cancelled");
  });

  it("is scoped to its queue: another queue is 403 on submit, and its tasks are not visible", async () => {
    const mine = uniqueId("mine");
    const { token } = await pathCredential(mine);
    const other = await call(`/u/${token}/rollout/task/submit`, {
      method: "POST",
      body: submitBody(uniqueId("t"), { queue: uniqueId("theirs") }),
    });
    expect(other.status).toBe(403);
    expect(((await other.json()) as { error: { message: string } }).error.message).toMatch(/^queue: /);
    const foreign = uniqueId("foreign");
    const res = await call("/rollout/task/submit", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
      body: submitBody(foreign, { queue: uniqueId("elsewhere") }),
    });
    expect(res.status).toBe(200);
    expect((await call(`/u/${token}/rollout/task/${foreign}`)).status).toBe(404);
    // A hidden task is not cancelled through a credential that cannot see it, flag or not.
    expect(
      (await call(`/u/${token}/rollout/task/${foreign}?register_if_missing=true`, { method: "DELETE" }))
        .status,
    ).toBe(404);
    const still = await call(`/rollout/task/${foreign}`, {
      headers: { "X-Polar-Control-Token": TOKENS.trainer },
    });
    expect(((await still.json()) as { status: string }).status).toBe("running");
  });

  it("a wrong, unknown or revoked credential is 401 under it: /health, /rollout and /v1 alike", async () => {
    const { name, token } = await pathCredential();
    expect((await call(`/u/${token}/health`)).status).toBe(200);
    expect((await call(`/u/${token}x/health`)).status).toBe(401);
    expect((await call("/u/not-a-credential/rollout/status")).status).toBe(401);
    expect((await call(`/u/${token.replace(/\.[^.]+$/, ".AAAAAAAAAAAAAAAAAAAAAA")}/health`)).status).toBe(
      401,
    );
    const revoke = await call(`/v1/admin/path_tokens/${name}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.admin}` },
    });
    expect(await revoke.json()).toEqual({ name, revoked: 1 });
    const after = await call(`/u/${token}/rollout/status`);
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { message: string } }).error.message).toContain("revoked");
    expect((await call(`/u/${token}/v1/batches`)).status).toBe(401);
  });

  it("the same credential also works in X-Polar-Control-Token, and not as a /v1 bearer", async () => {
    const { token } = await pathCredential();
    expect((await call("/rollout/status", { headers: { "X-Polar-Control-Token": token } })).status).toBe(200);
    expect((await postBatch({ tasks: [task("t")] }, token)).status).toBe(401);
  });

  it("registering needs the admin token and a well-formed body naming the field", async () => {
    const trainer = await call("/v1/admin/path_tokens", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.trainer}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "x", sha256: "0".repeat(64) }),
    });
    expect(trainer.status).toBe(401);
    const bad = await call("/v1/admin/path_tokens", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.admin}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "x", sha256: "not-hex" }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toContain("sha256");
  });
});
