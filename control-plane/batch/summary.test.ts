import { describe, expect, it } from "vitest";
import { ArtifactRef, ErrorBody, type SessionResult } from "../../protocol";
import type { BatchListItem } from "../registry/registry-do";
import { call, Gateway, postBatch, resultFor, TOKENS, task, uniqueId } from "../testing/fixtures";
import { type BatchSummary, rewardHistogram, type SessionListPage } from "./summary";

const asViewer = { headers: { Authorization: `Bearer ${TOKENS.viewer}` } };
async function getJson<T>(path: string): Promise<T> {
  const res = await call(path, asViewer);
  expect(res.status, path).toBe(200);
  return res.json() as Promise<T>;
}
const summaryOf = (batchId: string) => getJson<BatchSummary>(`/v1/batches/${batchId}/summary`);
const sessionsOf = (batchId: string, query = "") =>
  getJson<SessionListPage>(`/v1/batches/${batchId}/sessions${query}`);

/**
 * A batch of two tasks on a fresh queue: task a's two sessions end with rewards 1 and 0.25, task
 * b's first session fails (error kind `agent`) and its second is left waiting.
 */
async function scoredBatch() {
  const queue = uniqueId("sumq");
  const batchId = uniqueId("sum");
  const tasks = [task("a", { num_samples: 2 }), task("b", { num_samples: 2 })];
  expect((await postBatch({ batch_id: batchId, queue, tasks })).status).toBe(201);
  const gw = await Gateway.connect(queue);
  gw.hello("node-sum", 3);
  await gw.expect("welcome");
  const assigns = [await gw.expect("assign"), await gw.expect("assign"), await gw.expect("assign")];
  const rewards = [1, 0.25];
  for (const [i, a] of assigns.entries()) {
    let result: SessionResult = resultFor(a.session, "node-sum");
    if (i < 2) result = { ...result, reward: rewards[i]! };
    else
      result = {
        ...result,
        status: "ERROR",
        reward: null,
        trajectory: { ...result.trajectory, status: "ERROR", traces: [] },
        error: { kind: "agent", message: "the harness exited 2" },
      };
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result });
    expect((await gw.expect("ack")).status).toBe("accepted");
  }
  gw.close();
  return { batchId, queue, sessions: assigns.map((a) => a.session.session_id) };
}

describe("batch state queries", () => {
  it("summarises the batch and each task: counts, rewards, pass rate, histogram, errors, tokens", async () => {
    const { batchId } = await scoredBatch();
    const summary = await summaryOf(batchId);
    expect(summary).toMatchObject({
      batch_id: batchId,
      status: "running",
      total: 4,
      counts_by_status: { COMPLETED: 2, ERROR: 1, QUEUED: 1 },
      mean_reward: 0.625,
      pass_rate: 0.5,
      errors_by_kind: { agent: 1 },
      // resultFor's one trace: 3 prompt ids, 2 response ids; the failed session has none.
      tokens: { prompt: 6, response: 4 },
    });
    const [a, b] = summary.tasks as [BatchSummary["tasks"][number], BatchSummary["tasks"][number]];
    expect(a).toMatchObject({ task_id: "a", harness: "shell", total: 2, mean_reward: 0.625, pass_rate: 0.5 });
    expect(a.reward_histogram).toHaveLength(10);
    expect(a.reward_histogram[2]).toEqual({ lo: 0.2, hi: 0.3, count: 1 });
    expect(a.reward_histogram[9]).toEqual({ lo: 0.9, hi: 1, count: 1 });
    expect(b).toMatchObject({
      task_id: "b",
      counts_by_status: { ERROR: 1, QUEUED: 1 },
      mean_reward: null,
      pass_rate: null,
      errors_by_kind: { agent: 1 },
      tokens: { prompt: 0, response: 0 },
    });
  });

  it("lists sessions with stage timings and errors, filtered and paged", async () => {
    const { batchId, sessions } = await scoredBatch();
    const all = await sessionsOf(batchId);
    expect(all.next).toBeNull();
    expect(all.sessions.map((s) => s.session_id)).toEqual([
      `${batchId}.0.0`,
      `${batchId}.0.1`,
      `${batchId}.1.0`,
      `${batchId}.1.1`,
    ]);
    const first = all.sessions.find((s) => s.session_id === sessions[0]);
    expect(first).toMatchObject({
      task_id: "a",
      status: "COMPLETED",
      stage: null,
      node_id: "node-sum",
      attempt: 1,
      reward: 1,
      error_kind: null,
      has_completions: false,
      stage_timings: { init_ms: 2, ready_wait_ms: 3, run_ms: 4, post_run_ms: 5 },
    });
    expect(first!.started_at).toBeNull();
    expect(first!.finished_at).toBeGreaterThanOrEqual(first!.created_at);
    const waiting = all.sessions.find((s) => s.status === "QUEUED");
    expect(waiting).toMatchObject({ reward: null, stage_timings: null, finished_at: null });
    const errors = await sessionsOf(batchId, `?status=ERROR`);
    expect(errors.sessions).toHaveLength(1);
    expect(errors.sessions[0]).toMatchObject({
      error_kind: "agent",
      error_message: "the harness exited 2",
    });
    expect((await sessionsOf(batchId, `?task_id=b`)).sessions).toHaveLength(2);
    expect((await sessionsOf(batchId, `?node_id=node-sum`)).sessions).toHaveLength(3);
    const p1 = await sessionsOf(batchId, `?limit=3`);
    expect(p1.sessions).toHaveLength(3);
    expect(p1.next).toBe(`${batchId}.1.0`);
    const p2 = await sessionsOf(batchId, `?limit=3&after=${p1.next}`);
    expect(p2.sessions.map((s) => s.session_id)).toEqual([`${batchId}.1.1`]);
    expect(p2.next).toBeNull();
  });

  it("answers 404 for an unknown batch and 400 naming a bad filter", async () => {
    expect((await call(`/v1/batches/${uniqueId("none")}/summary`, asViewer)).status).toBe(404);
    expect((await call(`/v1/batches/${uniqueId("none")}/sessions`, asViewer)).status).toBe(404);
    const bad = await call(`/v1/batches/x/sessions?status=DONE`, asViewer);
    expect(bad.status).toBe(400);
    expect(ErrorBody.parse(await bad.json()).error.message).toMatch(/^status:/);
    const limit = await call(`/v1/batches/x/sessions?limit=0`, asViewer);
    expect(ErrorBody.parse(await limit.json()).error.message).toMatch(/^limit:/);
  });

  it("filters the batch list by status, queue, harness and since", async () => {
    const { batchId, queue } = await scoredBatch();
    const since = Date.now();
    const other = uniqueId("sum-other");
    const codex = {
      ...task("c"),
      agent: { harness: "codex" },
    };
    expect((await postBatch({ batch_id: other, queue, tasks: [codex] })).status).toBe(201);
    const cancelled = await call(`/v1/batches/${other}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(cancelled.status).toBe(200);
    const ids = async (query: string) =>
      (await getJson<{ batches: BatchListItem[] }>(`/v1/batches?${query}`)).batches.map((b) => b.batch_id);
    expect(await ids(`queue=${queue}`)).toEqual([other, batchId]);
    expect(await ids(`queue=${queue}&harness=codex`)).toEqual([other]);
    expect(await ids(`queue=${queue}&harness=shell`)).toEqual([batchId]);
    expect(await ids(`queue=${queue}&since=${since}`)).toEqual([other]);
    expect(await ids(`queue=${queue}&status=running`)).toEqual([batchId]);
    // The ledger copies its status to the registry after its events went out.
    await expect.poll(() => ids(`queue=${queue}&status=cancelled`), { timeout: 10_000 }).toEqual([other]);
    const listed = (await getJson<{ batches: BatchListItem[] }>(`/v1/batches?queue=${queue}&limit=1`))
      .batches[0];
    expect(listed).toMatchObject({ batch_id: other, status: "cancelled", harnesses: ["codex"] });
    const bad = await call("/v1/batches?status=done", asViewer);
    expect(ErrorBody.parse(await bad.json()).error.message).toMatch(/^status:/);
  });
});

describe("tokens of an uploaded trajectory", () => {
  it("are counted from R2 after the result is accepted", async () => {
    const queue = uniqueId("sumup");
    const batchId = uniqueId("sumup");
    expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t")] })).status).toBe(201);
    const gw = await Gateway.connect(queue);
    gw.hello("node-up", 1);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    const result = resultFor(a.session, "node-up");
    const trace = result.trajectory.traces[0]!;
    const big = { ...trace, prompt_ids: Array.from({ length: 70_000 }, (_, i) => i % 1000) };
    const put = await call(
      `/v1/sessions/${a.session.session_id}/artifacts/trajectory?lease_id=${a.lease_id}`,
      {
        method: "PUT",
        headers: { Authorization: `Bearer ${TOKENS.gateway}`, "Content-Type": "application/json" },
        body: JSON.stringify({ ...result.trajectory, traces: [big, trace] }),
      },
    );
    expect(put.status).toBe(201);
    const ref = ArtifactRef.parse(await put.json());
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: { ...result, trajectory: { ...result.trajectory, traces: [] } },
      trajectory_ref: ref,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    gw.close();
    await expect
      .poll(async () => (await summaryOf(batchId)).tokens, { timeout: 10_000 })
      .toEqual({ prompt: 70_003, response: 4 });
  });
});

describe("rewardHistogram", () => {
  it("puts rewards in 10 bins over [0, 1], clamping those outside", () => {
    const bins = rewardHistogram([-1, 0, 0.05, 0.1, 0.55, 1, 3]);
    expect(bins.map((b) => b.count)).toEqual([3, 1, 0, 0, 0, 1, 0, 0, 0, 2]);
    expect(bins[0]).toMatchObject({ lo: 0, hi: 0.1 });
  });
});
