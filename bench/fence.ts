/**
 * Benchmark of the weight-update fence: the time from `POST /v1/queues/:queue/inference/pause` to
 * its `ok` answer with N gateways (in-process, each with its real proxy in token mode) whose
 * sessions each have one model call in flight of a known length (the simulated engine holds every
 * generation for `--turn-ms`), in `drain` and `abort` mode, on a plain and a sharded queue, and
 * with nothing in flight. Against `wrangler dev` (Worker + QueueDOs in workerd). Prints a table.
 *
 * Run: `npm run bench:fence` (options: `--turn-ms N`, `--gateways 1,4,8`).
 *
 * In `drain` mode the answer cannot come before the turns end: the column "turn left" is how much
 * of the last-started call's turn was still to run when the pause was sent (from when the engine
 * was seen running all N calls, polled every 25 ms), so "pause → ok" minus it is the fence's own
 * cost. Wall-clock on a shared
 * machine: the 1-minute load average is printed with each row.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startControlPlaneDev } from "../cli/wrangler-dev";
import { type Gateway, startGateway } from "../gateway-agent/gateway";
import { ASK, ASK_SCRIPT } from "../gateway-agent/testing/session-fixtures";
import { FenceChangeResponse, type FenceMode } from "../protocol";
import { startSimEngine } from "../sim/server";

const { values } = parseArgs({
  options: {
    "turn-ms": { type: "string", default: "4000" },
    gateways: { type: "string", default: "1,4,8" },
  },
});
const TURN_MS = Number(values["turn-ms"]);
const COUNTS = values.gateways.split(",").map(Number);
const MODEL = "Qwen/Qwen3-0.6B";
const tokens = { trainer: "bench-trainer", gateway: "bench-gateway", admin: "bench-admin" };
const quiet = { info() {}, warn() {}, error() {} };

interface Row {
  gateways: number;
  shards: number;
  mode: FenceMode;
  inflight: number;
  turnLeftMs: number | null;
  pauseMs: number;
  ok: boolean;
  load: number;
}

const dir = mkdtempSync(join(tmpdir(), "polar-bench-fence-"));
const cp = await startControlPlaneDev({
  persistTo: join(dir, "state"),
  tokens,
  vars: { POLAR_QUEUE_SHARDS: "bench-fence-sharded-*=4" },
});
const sim = await startSimEngine({ model: MODEL, faults: { stallRate: 1, stallMs: TURN_MS } });

async function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${cp.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${tokens.trainer}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function running(): Promise<number> {
  return ((await (await fetch(`${sim.url}/sim/stats`)).json()) as { running: number }).running;
}

async function waitFor(pred: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function done(batchId: string): Promise<boolean> {
  const res = await fetch(`${cp.url}/v1/batches/${batchId}`, {
    headers: { authorization: `Bearer ${tokens.trainer}` },
  });
  return ((await res.json()) as { status: string }).status === "completed";
}

let rowIndex = 0;
async function measure(n: number, shards: number, mode: FenceMode, withTurns: boolean): Promise<Row> {
  const queue = `${shards > 1 ? "bench-fence-sharded" : "bench-fence"}-${rowIndex++}`;
  const gateways: Gateway[] = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      startGateway({
        controlPlaneUrl: cp.url,
        nodeId: `${queue}-gw${i}`,
        token: tokens.gateway,
        queue,
        engine: "sglang",
        engineUrl: sim.url,
        model: MODEL,
        maxInit: 1,
        maxRun: 1,
        maxPostrun: 1,
        workRoot: join(dir, "work", `${queue}-${i}`),
        runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
        logger: quiet,
      }),
    ),
  );
  await waitFor(async () => gateways.every((g) => g.stats().connected), 30_000, "gateways to connect");
  const batchId = `${queue}-b`;
  let turnLeftMs: number | null = null;
  if (withTurns) {
    const res = await post("/v1/batches", {
      batch_id: batchId,
      queue,
      tasks: [
        {
          task_id: "t",
          instruction: "What is 2 + 3?",
          num_samples: n,
          agent: { harness: "shell", custom_shell: { command: ASK, env: { ASK_SCRIPT } } },
          evaluator: { strategy: "session_completed" },
          builder: { strategy: "per_request" },
        },
      ],
    });
    if (res.status !== 201) throw new Error(`submit: ${res.status} ${await res.text()}`);
    // When the last of the N calls started (polled every 25 ms): the turn left runs from there.
    let seen = 0;
    let lastStart = 0;
    await waitFor(
      async () => {
        const now = await running();
        if (now > seen) {
          seen = now;
          lastStart = performance.now();
        }
        return now >= n;
      },
      60_000,
      `${n} calls in flight`,
    );
    turnLeftMs = TURN_MS - (performance.now() - lastStart);
  }
  const load = loadavg()[0]!;
  const started = performance.now();
  const res = await post(`/v1/queues/${queue}/inference/pause`, { mode, timeout_seconds: 60 });
  const pauseMs = performance.now() - started;
  const body = FenceChangeResponse.parse(await res.json());
  const inflightAtPause = withTurns ? n : 0;
  await post(`/v1/queues/${queue}/inference/resume`, { policy_version: "1" });
  if (withTurns) await waitFor(() => done(batchId), 120_000, "the batch to finish");
  await Promise.all(gateways.map((g) => g.stop()));
  return { gateways: n, shards, mode, inflight: inflightAtPause, turnLeftMs, pauseMs, ok: body.ok, load };
}

const rows: Row[] = [];
try {
  for (const n of COUNTS) {
    rows.push(await measure(n, 1, "drain", false));
    rows.push(await measure(n, 1, "drain", true));
    rows.push(await measure(n, 1, "abort", true));
  }
  const most = Math.max(...COUNTS);
  rows.push(await measure(most, 4, "drain", true));
  rows.push(await measure(most, 4, "abort", true));
} finally {
  await sim.close();
  await cp.kill();
  rmSync(dir, { recursive: true, force: true });
}

console.log(`\nturn length ${TURN_MS} ms (every generation held that long by the simulated engine)\n`);
console.log(
  "| gateways | shards | mode | calls in flight | turn left at pause (ms) | pause → ok (ms) | ok | load 1 min |",
);
console.log("|---:|---:|---|---:|---:|---:|---|---:|");
for (const r of rows) {
  console.log(
    `| ${r.gateways} | ${r.shards} | ${r.mode} | ${r.inflight} | ${r.turnLeftMs === null ? "—" : r.turnLeftMs.toFixed(0)} | ${r.pauseMs.toFixed(0)} | ${r.ok} | ${r.load.toFixed(1)} |`,
  );
}
