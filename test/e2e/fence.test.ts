/**
 * The weight-update fence end to end, every part a real process: `wrangler dev` (Worker + QueueDOs
 * in workerd), simulated SGLang engines, gateway agents in token mode running a one-call shell
 * harness. A turn longer than the old 10 s ack window drains and the pause answers `ok`; `abort`
 * aborts the turn at the engine and the harness still gets its answer after resume; a gateway that
 * connects during a pause starts paused with the current version; the fence survives a SIGKILL of
 * the control plane.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RoleTokens } from "../../cli/dev-tokens";
import { freePort } from "../../cli/ports";
import { type PolarProcess, spawnPolar, waitForProcessHttp } from "../../cli/processes";
import { type ControlPlaneDev, startControlPlaneDev } from "../../cli/wrangler-dev";
import { ASK, ASK_SCRIPT } from "../../gateway-agent/testing/session-fixtures";
import {
  type CompletionRecord,
  FenceChangeResponse,
  FenceStatusResponse,
  type SessionResult,
} from "../../protocol";

const tokens: RoleTokens = { trainer: "fence-trainer", gateway: "fence-gateway", admin: "fence-admin" };
const MODEL = "Qwen/Qwen3-0.6B";
/** Every generation of the slow engine takes this long: longer than the old 10 s ack window. */
const SLOW_TURN_MS = 11_000;

let dir: string;
let cp: ControlPlaneDev;
const procs: PolarProcess[] = [];
let slowEngine: string;
let late: PolarProcess | null = null;
/** The gateway started after the control plane's SIGKILL; it serves fence-late from then on. */
let after: PolarProcess | null = null;
let fastEngine: string;

async function engine(extra: string[]): Promise<string> {
  const port = await freePort();
  const p = spawnPolar(`sim ${port}`, ["sim-engine", "--port", String(port), "--model", MODEL, ...extra]);
  procs.push(p);
  const url = `http://127.0.0.1:${port}`;
  await waitForProcessHttp(p, `${url}/health`);
  return url;
}

async function gateway(
  nodeId: string,
  queue: string,
  engineUrl: string,
): Promise<{ health: string; proc: PolarProcess }> {
  const httpPort = await freePort();
  const p = spawnPolar(
    `gateway ${nodeId}`,
    [
      "serve_gateway",
      "--control-plane",
      cp.url,
      "--node-id",
      nodeId,
      "--queue",
      queue,
      "--engine",
      "sglang",
      "--engine-url",
      engineUrl,
      "--model",
      MODEL,
      "--work-root",
      join(dir, "work", nodeId),
      "--http-port",
      String(httpPort),
    ],
    { POLAR_GATEWAY_TOKEN: tokens.gateway },
  );
  procs.push(p);
  const health = `http://127.0.0.1:${httpPort}/health`;
  await waitForProcessHttp(p, health);
  await expect
    .poll(async () => (await getJson<{ connected: boolean }>(health)).connected, { timeout: 30_000 })
    .toBe(true);
  return { health, proc: p };
}

async function getJson<T>(url: string, token?: string): Promise<T> {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  expect(res.status, url).toBe(200);
  return (await res.json()) as T;
}

async function post(path: string, body: unknown, token = tokens.trainer): Promise<Response> {
  return fetch(`${cp.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function fence(path: string, body: unknown = {}): Promise<FenceChangeResponse> {
  const res = await post(path, body);
  expect(res.status, await res.clone().text()).toBe(200);
  return FenceChangeResponse.parse(await res.json());
}

async function simStats(
  url: string,
): Promise<{ running: number; requests_total: number; aborted_total: number }> {
  return getJson(`${url}/sim/stats`);
}

/** Submits one single-call session to `queue`; returns its session id. */
async function submit(queue: string, batchId: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await post("/v1/batches", {
    batch_id: batchId,
    queue,
    tasks: [
      {
        task_id: "t",
        instruction: "What is 2 + 3?",
        timeout_seconds: 120,
        agent: { harness: "shell", custom_shell: { command: ASK, env: { ASK_SCRIPT } } },
        evaluator: { strategy: "session_completed" },
        builder: { strategy: "per_request" },
        ...extra,
      },
    ],
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return `${batchId}.0.0`;
}

async function finished(sessionId: string): Promise<SessionResult> {
  let result: SessionResult | null = null;
  await expect
    .poll(
      async () => {
        const s = await getJson<{ result: SessionResult | null }>(
          `${cp.url}/v1/sessions/${sessionId}`,
          tokens.trainer,
        );
        result = s.result;
        return result?.status ?? null;
      },
      { timeout: 90_000, interval: 500 },
    )
    .toBe("COMPLETED");
  return result!;
}

async function completions(sessionId: string): Promise<CompletionRecord[]> {
  return getJson(`${cp.url}/v1/sessions/${sessionId}/completions`, tokens.trainer);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "polar-fence-e2e-"));
  [cp, slowEngine, fastEngine] = await Promise.all([
    startControlPlaneDev({ persistTo: join(dir, "state"), tokens }),
    engine(["--stall-rate", "1", "--stall-ms", String(SLOW_TURN_MS)]),
    engine([]),
  ]);
});

afterAll(async () => {
  await Promise.allSettled(procs.reverse().map((p) => p.stop()));
  await cp?.kill();
  rmSync(dir, { recursive: true, force: true });
});

describe("the weight-update fence across real processes", () => {
  it("drain: a turn longer than 10 s drains and the pause acks ok; the turn keeps its version", async () => {
    await gateway("gw-slow", "fence-slow", slowEngine);
    await fence("/v1/queues/fence-slow/policy_version", { policy_version: "0" });
    const session = await submit("fence-slow", "fence-drain");
    await expect.poll(async () => (await simStats(slowEngine)).running, { timeout: 30_000 }).toBe(1);
    const started = Date.now();
    const paused = await fence("/v1/queues/fence-slow/inference/pause", {});
    const elapsed = Date.now() - started;
    console.info(`drain pause: ok=${paused.ok} after ${elapsed} ms (turn of ${SLOW_TURN_MS} ms in flight)`);
    expect(paused).toMatchObject({ ok: true, fence: { paused: true, mode: "drain", policy_version: "0" } });
    expect(paused.nodes).toEqual([
      { node_id: "gw-slow", ok: true, paused: true, inflight: 0, policy_version: "0" },
    ]);
    expect(elapsed).toBeGreaterThan(5_000);
    const result = await finished(session);
    expect(result.status).toBe("COMPLETED");
    await fence("/v1/queues/fence-slow/inference/resume", { policy_version: "1" });
    const [record] = await completions(session);
    expect(record).toMatchObject({ policy_version: "0", weight_version: "default" });
  });

  it("abort: the turn is aborted at the engine, and the harness gets its answer after resume", async () => {
    const before = await simStats(slowEngine);
    const session = await submit("fence-slow", "fence-abort");
    await expect.poll(async () => (await simStats(slowEngine)).running, { timeout: 30_000 }).toBe(1);
    const started = Date.now();
    const paused = await fence("/v1/queues/fence-slow/inference/pause", {
      mode: "abort",
      timeout_seconds: 30,
    });
    const elapsed = Date.now() - started;
    console.info(`abort pause: ok=${paused.ok} after ${elapsed} ms`);
    expect(paused).toMatchObject({ ok: true, fence: { mode: "abort" } });
    expect(elapsed).toBeLessThan(SLOW_TURN_MS / 2);
    const after = await simStats(slowEngine);
    expect(after.aborted_total).toBe(before.aborted_total + 1);
    expect(after.running).toBe(0);
    await fence("/v1/queues/fence-slow/inference/resume", { policy_version: "2" });
    const result = await finished(session);
    expect(result.status).toBe("COMPLETED");
    const records = await completions(session);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ policy_version: "2" });
  });

  it("a gateway that connects during a pause starts paused with the current version", async () => {
    await fence("/v1/queues/fence-late/policy_version", { policy_version: "7" });
    const paused = await fence("/v1/queues/fence-late/inference/pause", { timeout_seconds: 5 });
    expect(paused).toMatchObject({ ok: true, nodes: [] });
    const { health, proc } = await gateway("gw-late", "fence-late", fastEngine);
    late = proc;
    expect((await getJson<{ inference: object }>(health)).inference).toMatchObject({
      paused: true,
      mode: "drain",
      policy_version: "7",
    });
    const session = await submit("fence-late", "fence-late-1");
    await expect
      .poll(async () => (await getJson<{ inference: { waiting: number } }>(health)).inference.waiting, {
        timeout: 30_000,
      })
      .toBe(1);
    expect((await simStats(fastEngine)).requests_total).toBe(0);
    const status = FenceStatusResponse.parse(
      await getJson(`${cp.url}/v1/queues/fence-late/inference`, tokens.trainer),
    );
    expect(status.nodes).toEqual([
      { node_id: "gw-late", ok: true, paused: true, inflight: 0, policy_version: "7" },
    ]);
    await fence("/v1/queues/fence-late/inference/resume", {});
    await finished(session);
    expect((await completions(session))[0]).toMatchObject({ policy_version: "7" });
  });

  it("the fence survives a SIGKILL of the control plane: a gateway started afterwards comes up paused", async () => {
    await fence("/v1/queues/fence-late/policy_version", { policy_version: "8" });
    await fence("/v1/queues/fence-late/inference/pause", { mode: "abort", timeout_seconds: 5 });
    await late?.stop();
    await cp.kill();
    cp = await startControlPlaneDev({ port: cp.port, persistTo: join(dir, "state"), tokens });
    const { health, proc } = await gateway("gw-after", "fence-late", fastEngine);
    after = proc;
    expect((await getJson<{ inference: object }>(health)).inference).toMatchObject({
      paused: true,
      mode: "abort",
      policy_version: "8",
    });
    const status = FenceStatusResponse.parse(
      await getJson(`${cp.url}/v1/queues/fence-late/inference`, tokens.trainer),
    );
    expect(status.fence).toMatchObject({ paused: true, mode: "abort", policy_version: "8" });
    expect(status.nodes).toEqual([
      { node_id: "gw-after", ok: true, paused: true, inflight: 0, policy_version: "8" },
    ]);
  });

  it("min_policy_version: the gateway holds the turn until its engine serves that version", async () => {
    await fence("/v1/queues/fence-late/inference/resume", { policy_version: "9" });
    const session = await submit("fence-late", "fence-min", { min_policy_version: 9 });
    const before = (await simStats(fastEngine)).requests_total;
    await expect
      .poll(
        async () =>
          (await getJson<{ status: string }>(`${cp.url}/v1/sessions/${session}`, tokens.trainer)).status,
        { timeout: 30_000 },
      )
      .toBe("RUNNING");
    // The engine still serves the initial weights ("default" = 0): the gateway says it holds the
    // call (after asking the engine its weights), and nothing reached the engine.
    await expect
      .poll(
        () => after!.output().includes("holding a call: every replica is behind its min_policy_version"),
        {
          timeout: 30_000,
        },
      )
      .toBe(true);
    expect((await simStats(fastEngine)).requests_total).toBe(before);
    const update = await fetch(`${fastEngine}/update_weights_from_disk`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_path: "/ckpt/9", weight_version: "9" }),
    });
    expect(update.status).toBe(200);
    await finished(session);
    expect((await completions(session))[0]).toMatchObject({
      policy_version: "9",
      weight_version_start: "9",
      weight_version: "9",
    });
  });
});
