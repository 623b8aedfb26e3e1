import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { SessionAssignment } from "../../protocol";
import type { BatchDO } from "../batch/batch-do";
import { call, Gateway, POLL, resultFor, TOKENS, task, uniqueId } from "../testing/fixtures";
import { parseRolloutBatchId, rolloutBatchId, TOMBSTONE_SECONDS } from "./runs";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

const auth = { "X-Polar-Control-Token": TOKENS.trainer };

function submit(body: Record<string, unknown>): Promise<Response> {
  return call("/rollout/task/submit", { method: "POST", headers: auth, body: JSON.stringify(body) });
}

async function get(taskId: string): Promise<{ status: string; results: { session_id: string }[] }> {
  const res = await call(`/rollout/task/${taskId}`, { headers: auth });
  expect(res.status).toBe(200);
  return (await res.json()) as { status: string; results: { session_id: string }[] };
}

function del(taskId: string, query = ""): Promise<Response> {
  return call(`/rollout/task/${taskId}${query}`, { method: "DELETE", headers: auth });
}

/** A gateway on `queue` with room for `credit` sessions. */
async function gateway(queue: string, credit: number): Promise<Gateway> {
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello(uniqueId("node"), credit);
  await gw.expect("welcome");
  return gw;
}

async function finish(gw: Gateway, a: { lease_id: string; session: SessionAssignment }): Promise<void> {
  gw.send({ v: 1, type: "result", lease_id: a.lease_id, result: resultFor(a.session, "n") });
  expect((await gw.expect("ack")).status).toBe("accepted");
}

describe("batch ids of runs", () => {
  it("run 1 is rollout:<id>, run n rollout::n:<id>; both parse back, and never collide", () => {
    expect(rolloutBatchId("t1")).toBe("rollout:t1");
    expect(rolloutBatchId("t1", 3)).toBe("rollout::3:t1");
    expect(parseRolloutBatchId("rollout::3:t1")).toEqual({ taskId: "t1", run: 3 });
    // A task id that looks like a run suffix stays a run-1 id of that task.
    expect(parseRolloutBatchId(rolloutBatchId("3:t1"))).toEqual({ taskId: "3:t1", run: 1 });
    expect(parseRolloutBatchId("b_1")).toBeNull();
    // Never collide: over task ids shaped like run suffixes, every (id, run) has its own batch id.
    // (A task id starts with a letter or digit, so none begins with a run suffix's ':'.)
    const ids = ["t1", "3:t1", "3:3:t1", "rollout:t1", "1", "10:", "a:b"];
    const made = ids.flatMap((taskId) =>
      [1, 2, 3, 10].map((run) => ({ taskId, run, id: rolloutBatchId(taskId, run) })),
    );
    expect(new Set(made.map((m) => m.id)).size).toBe(made.length);
    for (const m of made) expect(parseRolloutBatchId(m.id)).toEqual({ taskId: m.taskId, run: m.run });
  });
});

describe("resubmitting an upstream task id", () => {
  it("while it runs: the same body replays (200), another body is 409", async () => {
    const taskId = uniqueId("rs");
    const body = { ...task(taskId), queue: uniqueId("q") };
    expect((await submit(body)).status).toBe(200);
    expect((await submit(body)).status).toBe(200);
    const other = await submit({ ...body, instruction: "something else" });
    expect(other.status).toBe(409);
    expect(((await other.json()) as { error: { message: string } }).error.message).toContain(
      "already running",
    );
  });

  it("once it finished: runs afresh (a new run with the new body), as upstream's restarted trainer expects", async () => {
    const queue = uniqueId("rerun");
    const taskId = uniqueId("rr");
    const gw = await gateway(queue, 4);
    expect((await submit({ ...task(taskId), queue })).status).toBe(200);
    await finish(gw, await gw.expect("assign"));
    expect((await get(taskId)).status).toBe("completed");
    // The restarted trainer: same id, a new callback URL (another body).
    const again = await submit({ ...task(taskId), queue, metadata: { restart: 1 } });
    expect(again.status).toBe(200);
    const a = await gw.expect("assign");
    expect(a.session.batch_id).toBe(`rollout::2:${taskId}`);
    expect(a.session.metadata).toEqual({ restart: 1 });
    expect(await get(taskId)).toMatchObject({ status: "running", results: [] });
    await finish(gw, a);
    const done = await get(taskId);
    expect(done.status).toBe("completed");
    expect(done.results.map((r) => r.session_id)).toEqual([`rollout::2:${taskId}.0.0`]);
    // Run 1 is kept, under its own batch id.
    const first = await call(`/v1/batches/rollout:${taskId}/results`, {
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(((await first.json()) as { results: unknown[] }).results).toHaveLength(1);
    const overview = (await (await call("/rollout/status", { headers: auth })).json()) as {
      tasks: Record<string, string>;
    };
    expect(overview.tasks[taskId]).toBe("completed");
  });

  it("two submits racing on a finished id start one run", async () => {
    const queue = uniqueId("race");
    const taskId = uniqueId("rc");
    expect((await submit({ ...task(taskId), queue })).status).toBe(200);
    expect((await del(taskId)).status).toBe(200);
    const body = { ...task(taskId), queue, metadata: { n: 2 } };
    const [x, y] = await Promise.all([submit(body), submit(body)]);
    expect([x.status, y.status]).toEqual([200, 200]);
    expect(await env.BATCH.getByName(rolloutBatchId(taskId)).rolloutGeneration()).toBe(2);
  });

  it("a bad body claims no run: the previous run stays what GET shows", async () => {
    const taskId = uniqueId("bad");
    expect((await submit({ ...task(taskId), queue: uniqueId("q") })).status).toBe(200);
    expect((await del(taskId)).status).toBe(200);
    const bad = await submit({ ...task(taskId), num_samples: 0 });
    expect(bad.status).toBe(400);
    expect(await env.BATCH.getByName(rolloutBatchId(taskId)).rolloutGeneration()).toBe(1);
    expect((await get(taskId)).status).toBe("cancelled");
  });
});

describe("DELETE /rollout/task/{id}", () => {
  it("unknown id: 404 without the flag; with register_if_missing=true a tombstone refuses submits for a while", async () => {
    const taskId = uniqueId("tomb");
    expect((await del(taskId)).status).toBe(404);
    const tomb = await del(taskId, "?register_if_missing=true");
    expect(tomb.status).toBe(200);
    expect(await tomb.json()).toEqual({
      task_id: taskId,
      status: "cancelled",
      total_sessions: 0,
      completed_sessions: 0,
      results: [],
      result_paths: [],
    });
    expect((await call(`/rollout/task/${taskId}`, { headers: auth })).status).toBe(404);
    const refused = await submit(task(taskId));
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
      "cancelled before submission",
    );
    // Once the window is over, the id runs like any finished one.
    await runInDurableObject(env.BATCH.getByName(rolloutBatchId(taskId)), (_, state) => {
      state.storage.sql.exec("UPDATE batch SET cancelled_at = ?", Date.now() - TOMBSTONE_SECONDS * 1000 - 1);
    });
    expect((await submit({ ...task(taskId), queue: uniqueId("q") })).status).toBe(200);
    expect((await get(taskId)).status).toBe("running");
    expect((await del(taskId, "?register_if_missing=maybe")).status).toBe(400);
  });

  it("a finished task is left as it is (no relabelling as cancelled)", async () => {
    const queue = uniqueId("fin");
    const taskId = uniqueId("fin");
    const gw = await gateway(queue, 2);
    expect((await submit({ ...task(taskId), queue })).status).toBe(200);
    await finish(gw, await gw.expect("assign"));
    const res = await del(taskId, "?register_if_missing=true");
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe("completed");
    expect((await get(taskId)).status).toBe("completed");
  });
});

describe("callbacks of upstream tasks", () => {
  it("POST upstream's TaskResult in session order with a callback_id; none for a cancelled task", async () => {
    const queue = uniqueId("cbq");
    const taskId = uniqueId("cb");
    const seen: { key: string | null; body: Record<string, unknown> }[] = [];
    const capture = async (batchId: string) =>
      runInDurableObject(env.BATCH.getByName(batchId), (instance: BatchDO) => {
        instance.callbackFetch = async (_url, init) => {
          seen.push({
            key: new Headers(init?.headers).get("Idempotency-Key"),
            body: JSON.parse(String(init?.body)),
          });
          return new Response("{}", { status: 200 });
        };
      });
    const gw = await gateway(queue, 4);
    const body = { ...task(taskId, { num_samples: 2 }), queue, callback_url: "https://trainer.example/cb" };
    expect((await submit(body)).status).toBe(200);
    await capture(rolloutBatchId(taskId));
    const a = await gw.expect("assign");
    const b = await gw.expect("assign");
    // Sample 1 finishes first.
    await finish(gw, a.session.session_id.endsWith(".1") ? a : b);
    await finish(gw, a.session.session_id.endsWith(".1") ? b : a);
    await expect.poll(() => seen.length, POLL).toBe(1);
    const cb = seen[0]!;
    expect(cb.key).toBe(`rollout:${taskId}:${taskId}`);
    expect(cb.body).toMatchObject({
      task_id: taskId,
      status: "completed",
      callback_id: cb.key,
      result_paths: [],
    });
    const results = cb.body.results as { session_id: string; timing: Record<string, number> }[];
    expect(results.map((r) => r.session_id)).toEqual([`rollout:${taskId}.0.0`, `rollout:${taskId}.0.1`]);
    expect(Object.keys(results[0]!.timing).sort()).toEqual([
      "init_ms",
      "postrun_ms",
      "register_to_init_queue_ms",
      "run_ms",
    ]);
    // Run 2, cancelled while running: no callback (upstream sends none).
    expect((await submit({ ...body, metadata: { run: 2 } })).status).toBe(200);
    await capture(rolloutBatchId(taskId, 2));
    await gw.expect("assign");
    expect((await del(taskId)).status).toBe(200);
    const state = await env.BATCH.getByName(rolloutBatchId(taskId, 2)).callbackState();
    await expect
      .poll(
        async () => (await env.BATCH.getByName(rolloutBatchId(taskId, 2)).callbackState())[0]?.last_error,
        POLL,
      )
      .toContain("not sent");
    expect(state.length).toBeLessThanOrEqual(1);
    expect(seen).toHaveLength(1);
  });
});

describe("private callback URLs on /rollout/*", () => {
  it("a refused callback_url does not fail the submit: the task runs and the answer says why", async () => {
    const taskId = uniqueId("priv");
    const res = await submit({
      ...task(taskId),
      queue: uniqueId("q"),
      callback_url: "http://127.0.0.1:9/callback/task_result",
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { task_id: string; status: string; warnings: string[] };
    expect(body).toMatchObject({ task_id: taskId, status: "running" });
    expect(body.warnings[0]).toMatch(
      /^callback_url host 127\.0\.0\.1 is loopback.*POLAR_ALLOW_PRIVATE_CALLBACKS/,
    );
    expect((await get(taskId)).status).toBe("running");
    // Polar-TS's own API still refuses it with 400 naming the field.
    const native = await call("/v1/batches", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.trainer}`, "Content-Type": "application/json" },
      body: JSON.stringify({ tasks: [task("t", { callback_url: "http://127.0.0.1:9/cb" })] }),
    });
    expect(native.status).toBe(400);
  });
});

describe("eval seeds (metadata.eval_sampling_seed_base)", () => {
  it("give sample i agent.settings.sampling_seed = base + i and metadata.eval_sampling_seed", async () => {
    const queue = uniqueId("seed");
    const gw = await gateway(queue, 4);
    const res = await submit({
      ...task(uniqueId("seed"), { num_samples: 3, metadata: { eval_sampling_seed_base: 1000 } }),
      queue,
    });
    expect(res.status).toBe(200);
    const assigns = [await gw.expect("assign"), await gw.expect("assign"), await gw.expect("assign")];
    const seeds = assigns
      .map((a) => [
        a.session.session_id.at(-1),
        a.session.agent.settings.sampling_seed,
        a.session.metadata.eval_sampling_seed,
      ])
      .sort();
    expect(seeds).toEqual([
      ["0", 1000, 1000],
      ["1", 1001, 1001],
      ["2", 1002, 1002],
    ]);
    for (const bad of [-1, 1.5, true, "7"]) {
      const refused = await submit(task(uniqueId("seed"), { metadata: { eval_sampling_seed_base: bad } }));
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
        "metadata.eval_sampling_seed_base",
      );
    }
  });
});
