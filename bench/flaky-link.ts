/**
 * The flaky-link scenario: one gateway process reaches the control plane (`wrangler dev`, Worker
 * + Durable Objects in workerd) only through a TCP fault proxy — the WebSocket and the artifact
 * uploads alike — while it runs a batch of shell sessions that each sleep 2–8 s and make one model
 * call (simulated engine). The link goes through: `latency` (300 ms each way, 20 s), `blackhole`
 * (65 s: open connections die silently, new dials hang), pass-through, `reset` (15 s: connections
 * destroyed, dials reset), pass-through. Run twice on the same stack. Production timeouts unless
 * an option changes them.
 *
 * Run: `npm run bench:flaky-link` (options: `--runs 2 --sessions 48 --max-run 4 --latency-s 20
 * --latency-ms 300 --blackhole-s 65 --pass-s 20 --reset-s 15 --json FILE`; `--cp-var K=V` sets a
 * Worker variable, `--gateway-arg X` passes a flag to `serve_gateway`).
 *
 * Prints per run: results, lost, duplicated, sessions run twice (stale results: a run of a
 * session whose result did not count because its lease had been declared lost), accepted results
 * of attempt > 1 and requeued leases (an assign that vanished into a dead socket is requeued
 * without having run), model calls beyond one per session, COMPLETED sessions whose `GET /v1/sessions/:id/completions` is not 200, how
 * long each side took to notice the silent WebSocket (from the last chunk the fault proxy
 * delivered to it to its close), and how soon results flowed again after each fault ended.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { freePort } from "../cli/ports";
import { spawnPolar, waitForProcessHttp } from "../cli/processes";
import { startControlPlaneDev } from "../cli/wrangler-dev";
import { ASK, ASK_SCRIPT } from "../gateway-agent/testing/session-fixtures";
import type { ResultsPage } from "../protocol";
import { startSimEngine } from "../sim/server";
import { type ConnectionRecord, type FaultMode, FaultProxy } from "../test/support/fault-proxy";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "2" },
    sessions: { type: "string", default: "48" },
    "max-run": { type: "string", default: "4" },
    "latency-s": { type: "string", default: "20" },
    "latency-ms": { type: "string", default: "300" },
    "blackhole-s": { type: "string", default: "65" },
    "pass-s": { type: "string", default: "20" },
    "reset-s": { type: "string", default: "15" },
    "lead-s": { type: "string", default: "8" },
    json: { type: "string" },
    "cp-var": { type: "string", multiple: true, default: [] },
    "gateway-arg": { type: "string", multiple: true, default: [] },
  },
});
const num = (k: keyof typeof values) => Number(values[k]);
const SESSIONS = num("sessions");
const MODEL = "Qwen/Qwen3-0.6B";
const tokens = { trainer: "flaky-trainer", gateway: "flaky-gateway", admin: "flaky-admin" };
const NODE = "flaky-node";
const vars = Object.fromEntries(
  (values["cp-var"] as string[]).map((kv) => kv.split("=", 2) as [string, string]),
);

const dir = mkdtempSync(join(tmpdir(), "polar-flaky-"));
const cp = await startControlPlaneDev({ persistTo: join(dir, "state"), tokens, vars });
const sim = await startSimEngine({ model: MODEL });
const proxy = await FaultProxy.start({ target: { host: "127.0.0.1", port: cp.port } });
const httpPort = await freePort();
const gateway = spawnPolar(
  "gateway",
  [
    "serve_gateway",
    "--control-plane",
    proxy.url,
    "--node-id",
    NODE,
    "--engine",
    "sglang-openai",
    "--engine-url",
    sim.url,
    "--model",
    MODEL,
    "--max-init",
    values["max-run"] as string,
    "--max-run",
    values["max-run"] as string,
    "--work-root",
    join(dir, "work"),
    "--http-port",
    String(httpPort),
    ...(values["gateway-arg"] as string[]),
  ],
  { POLAR_GATEWAY_TOKEN: tokens.gateway },
);

const engineRequests = async () =>
  ((await (await fetch(`${sim.url}/sim/stats`)).json()) as { requests_total: number }).requests_total;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function api<T>(path: string, init: RequestInit = {}): Promise<{ status: number; body: T }> {
  const res = await fetch(`${cp.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${tokens.trainer}`, "content-type": "application/json" },
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
}

interface Counters {
  stale_results: number;
  duplicate_results: number;
  requeued_leases: number;
}

/** The dispatcher's counters, summed over the queue's shards. */
async function counters(): Promise<Counters> {
  const g = await api<{ queues: Array<{ counters: Counters }> }>("/v1/gateways");
  const sum: Counters = { stale_results: 0, duplicate_results: 0, requeued_leases: 0 };
  for (const q of g.body.queues)
    for (const k of Object.keys(sum) as Array<keyof Counters>) sum[k] += q.counters[k] ?? 0;
  return sum;
}

interface GatewayRow {
  node_id: string;
  connected: boolean;
  disconnected_at: number | null;
}

interface RunReport {
  run: number;
  results: number;
  distinct: number;
  lost: number;
  duplicated: number;
  statuses: Record<string, number>;
  /** Stale results: runs of a session whose result did not count (the session ran again). */
  runTwice: number;
  /** Accepted results of attempt > 1 (requeued; an assign lost in the dead socket counts, though it never ran). */
  laterAttempt: number;
  requeued: number;
  extraModelCalls: number;
  missingRecords: number;
  uploadErrorsNoted: number;
  gatewayDetectMs: number[];
  controlPlaneDetectMs: number[];
  flowAgainMs: Record<string, number | null>;
  wallS: number;
  /** The WebSocket connections of the run as the fault proxy saw them (times relative to the run start). */
  sockets: Array<Record<string, number | string | boolean | null>>;
  phases: Record<string, [number, number]>;
}

/** The harness: sleep 2–8 s (by sample index), then one chat call through the proxy. */
const HARNESS = `s=\${POLAR_SESSION_ID##*.}; sleep $((2 + s % 7)); ${ASK}`;

async function run(index: number): Promise<RunReport> {
  const batchId = `flaky-${index}`;
  const requestsBefore = await engineRequests();
  const countersBefore = await counters();
  const sub = await api("/v1/batches", {
    method: "POST",
    body: JSON.stringify({
      batch_id: batchId,
      tasks: [
        {
          task_id: "t",
          instruction: "What is 2 + 3?",
          num_samples: SESSIONS,
          timeout_seconds: 900,
          max_attempts: 5,
          agent: { harness: "shell", custom_shell: { command: HARNESS, env: { ASK_SCRIPT } } },
          evaluator: { strategy: "session_completed" },
          builder: { strategy: "per_request" },
        },
      ],
    }),
  });
  if (sub.status !== 201) throw new Error(`submit: ${sub.status} ${JSON.stringify(sub.body)}`);
  const t0 = Date.now();
  const received: Array<{ at: number; result: ResultsPage["results"][number]["result"] }> = [];
  let done = false;
  const cpDown: number[] = [];
  // Results as the trainer sees them, with the time each arrived (long-poll by cursor).
  const reader = (async () => {
    let after = 0;
    while (!done) {
      const page = await api<ResultsPage>(`/v1/batches/${batchId}/results?after=${after}&wait=1`);
      for (const r of page.body.results) received.push({ at: Date.now(), result: r.result });
      after = page.body.next;
      const st = await api<{ status: string }>(`/v1/batches/${batchId}`);
      if (st.body.status === "completed" && page.body.results.length === 0) done = true;
    }
  })();
  // When the control plane marked the gateway disconnected (polled; the row keeps the exact time).
  const watcher = (async () => {
    let wasConnected = true;
    while (!done) {
      const g = await api<{ gateways: GatewayRow[] }>("/v1/gateways");
      const row = g.body.gateways.find((x) => x.node_id === NODE);
      if (row && wasConnected && !row.connected && row.disconnected_at) cpDown.push(row.disconnected_at);
      wasConnected = row?.connected ?? wasConnected;
      await sleep(200);
    }
  })();
  const phases: Array<[string, FaultMode, number]> = [
    ["lead", { kind: "pass" }, num("lead-s")],
    ["latency", { kind: "latency", ms: num("latency-ms") }, num("latency-s")],
    ["blackhole", { kind: "blackhole" }, num("blackhole-s")],
    ["pass", { kind: "pass" }, num("pass-s")],
    ["reset", { kind: "reset" }, num("reset-s")],
  ];
  const ends: Record<string, number> = {};
  const starts: Record<string, number> = {};
  for (const [name, mode, seconds] of phases) {
    starts[name] = Date.now(); // before set(): the proxy stamps the flows a blackhole kills in it
    proxy.set(mode);
    console.log(`run ${index}: ${name} for ${seconds} s (${received.length} results so far)`);
    await sleep(seconds * 1000);
    ends[name] = Date.now();
  }
  proxy.set({ kind: "pass" });
  console.log(`run ${index}: pass until done (${received.length} results so far)`);
  const deadline = Date.now() + 15 * 60_000;
  while (!done && Date.now() < deadline) await sleep(500);
  done = true;
  await Promise.all([reader, watcher]);
  const wallS = (Date.now() - t0) / 1000;
  // Stale results of this run arrive when the gateway reconnects: before the batch completes.
  const countersAfter = await counters();

  const ids = received.map((r) => r.result.session_id);
  const distinct = new Set(ids);
  const statuses: Record<string, number> = {};
  for (const r of received) statuses[r.result.status] = (statuses[r.result.status] ?? 0) + 1;
  let missing = 0;
  for (const r of received) {
    if (r.result.status !== "COMPLETED") continue;
    const c = await api(`/v1/sessions/${r.result.session_id}/completions`);
    if (c.status !== 200) missing++;
  }
  const noted = received.filter((r) => r.result.trajectory.metadata?.completions_upload_error).length;
  // Detection: WebSocket connections the blackhole caught; each side from the last chunk it got.
  const inRun = (c: ConnectionRecord) =>
    (c.clientClosedAt === null || c.clientClosedAt >= t0) && c.label.includes("/v1/gateways/connect");
  const caught = proxy
    .connections()
    .filter((c) => inRun(c) && c.deadSince !== null && c.deadSince >= starts.blackhole!);
  const gatewayDetectMs = caught
    .filter(
      (c) =>
        c.lastToClientAt !== null &&
        c.lastToServerAt !== null &&
        c.clientClosedAt !== null &&
        c.clientClosedAt < starts.reset!, // closed by the gateway, not by the reset
    )
    .map((c) => c.clientClosedAt! - c.lastToClientAt!);
  const controlPlaneDetectMs: number[] = [];
  for (const c of caught) {
    if (c.lastToServerAt === null) continue; // a dial into the blackhole: never reached the server
    const down = cpDown.find((at) => at >= c.deadSince! && at < starts.reset!);
    if (down !== undefined) controlPlaneDetectMs.push(down - c.lastToServerAt);
  }
  const flowAgain = (after: number) => {
    const first = received.find((r) => r.at >= after);
    return first ? first.at - after : null;
  };
  return {
    run: index,
    results: received.length,
    distinct: distinct.size,
    lost: SESSIONS - distinct.size,
    duplicated: received.length - distinct.size,
    statuses,
    runTwice: countersAfter.stale_results - countersBefore.stale_results,
    laterAttempt: received.filter((r) => r.result.attempt > 1).length,
    requeued: countersAfter.requeued_leases - countersBefore.requeued_leases,
    extraModelCalls: (await engineRequests()) - requestsBefore - SESSIONS,
    missingRecords: missing,
    uploadErrorsNoted: noted,
    gatewayDetectMs,
    controlPlaneDetectMs,
    flowAgainMs: { blackhole: flowAgain(ends.blackhole!), reset: flowAgain(ends.reset!) },
    wallS,
    sockets: proxy
      .connections()
      .filter(inRun)
      .map((c) => {
        const rel = (v: number | null) => (v === null ? null : v - t0);
        return {
          id: c.id,
          opened: rel(c.openedAt),
          dead: rel(c.deadSince),
          last_to_server: rel(c.lastToServerAt),
          last_to_client: rel(c.lastToClientAt),
          client_closed: rel(c.clientClosedAt),
          server_closed: rel(c.serverClosedAt),
          reset: c.reset,
        };
      }),
    phases: Object.fromEntries(Object.keys(starts).map((k) => [k, [starts[k]! - t0, ends[k]! - t0]])),
  };
}

const reports: RunReport[] = [];
try {
  await waitForProcessHttp(gateway, `http://127.0.0.1:${httpPort}/health`);
  for (let waited = 0; ; waited += 250) {
    const h = (await (await fetch(`http://127.0.0.1:${httpPort}/health`)).json()) as { connected: boolean };
    if (h.connected) break;
    if (waited > 30_000) throw new Error("gateway did not connect");
    await sleep(250);
  }
  for (let i = 1; i <= num("runs"); i++) reports.push(await run(i));
} finally {
  const out = gateway.output();
  await gateway.stop();
  await proxy.close();
  await sim.close();
  await cp.kill();
  const count = (s: string) => out.split(s).length - 1;
  console.log(
    `\ngateway log (last ${out.length} chars): "completion records upload failed" ×${count("completion records upload failed")}, "cancel for a lease not held" ×${count("cancel for a lease not held")}, "control plane silent" ×${count("control plane silent")}`,
  );
  rmSync(dir, { recursive: true, force: true });
}

const ms = (xs: number[]) => (xs.length ? xs.map((x) => (x / 1000).toFixed(1)).join(", ") : "—");
console.log(
  `\n${SESSIONS} sessions, max-run ${values["max-run"]}; faults: ${values["latency-s"]} s of ${values["latency-ms"]} ms latency, ${values["blackhole-s"]} s blackhole, ${values["pass-s"]} s pass, ${values["reset-s"]} s reset, pass\n`,
);
console.log(
  "| run | results | lost | duplicated | run twice (stale results) | attempt > 1 (requeued leases) | extra model calls | missing records | upload errors noted | statuses | gateway noticed silence (s) | control plane noticed (s) | flow again after blackhole / reset (s) | wall (s) |",
);
console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|");
for (const r of reports) {
  const fa = (v: number | null) => (v === null ? "—" : (v / 1000).toFixed(1));
  console.log(
    `| ${r.run} | ${r.results} | ${r.lost} | ${r.duplicated} | ${r.runTwice} | ${r.laterAttempt} (${r.requeued}) | ${r.extraModelCalls} | ${r.missingRecords} | ${r.uploadErrorsNoted} | ${Object.entries(
      r.statuses,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ", ",
      )} | ${ms(r.gatewayDetectMs)} | ${ms(r.controlPlaneDetectMs)} | ${fa(r.flowAgainMs.blackhole ?? null)} / ${fa(r.flowAgainMs.reset ?? null)} | ${r.wallS.toFixed(0)} |`,
  );
}
if (values.json) writeFileSync(values.json, JSON.stringify(reports, null, 2));
