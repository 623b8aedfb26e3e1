/**
 * Benchmark of the control plane at fleet scale: 10,000 concurrent sessions across 100 gateways
 * (each with 100 slots) on local workerd (`wrangler dev`, the Worker as deployed), on one queue
 * with 1 shard and again with 8. The gateways are in-process and speak the real wire protocol
 * (`test/support/wire-gateway.ts`); their harness holds each session until every one has been
 * dispatched, so all 10,000 leases are held at once, then ends them all together.
 *
 * Per configuration it reports: time to dispatch every session (POST → the last `assign`),
 * dispatch latency p50/p99, leases held at the peak, results accepted and lost, the CPU time of the
 * workerd process per session (process accounting, not wall time) and the sessions/s one core
 * would carry from it, workerd's resident memory, the Durable Objects' storage per session, and
 * the wire messages per session (what a deployment is billed for as requests).
 *
 * Run: `npm run bench:scale` (options: `--sessions N`, `--gateways N`, `--slots N`,
 * `--shards 1,8`, `--batches N`, `--json FILE`). Prints a Markdown table.
 *
 * @module
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ControlPlaneClient } from "../cli/client";
import { startControlPlaneDev } from "../cli/wrangler-dev";
import { LIMITS } from "../protocol";
import { WireGateway } from "../test/support/wire-gateway";
import { type DevProcesses, devProcesses, devUsage, folderBytes, percentile } from "./support/stack-usage";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "10000" },
    gateways: { type: "string", default: "100" },
    slots: { type: "string", default: "100" },
    shards: { type: "string", default: "1,8" },
    batches: { type: "string", default: "1" },
    "phase-timeout-s": { type: "string", default: "1800" },
    json: { type: "string" },
  },
});
const SESSIONS = Number(values.sessions);
const GATEWAYS = Number(values.gateways);
const SLOTS = Number(values.slots);
const SHARDS = values.shards.split(",").map(Number);
const BATCHES = Number(values.batches);
/** Longest wait for one phase (dispatch, completion) before the run is declared stuck. */
const PHASE_TIMEOUT_MS = Number(values["phase-timeout-s"]) * 1000;
const tokens = { trainer: "bench-trainer", gateway: "bench-gateway", admin: "bench-admin" };
const shell = { harness: "shell" as const, custom_shell: { command: "true" } };

for (const [name, n] of [
  ["--sessions", SESSIONS],
  ["--gateways", GATEWAYS],
  ["--slots", SLOTS],
  ["--batches", BATCHES],
] as const)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${n}`);
if (SHARDS.some((n) => !Number.isInteger(n) || n < 1))
  throw new Error(`--shards must list positive integers, got ${values.shards}`);
if (SESSIONS / BATCHES > LIMITS.maxSessionsPerBatch)
  throw new Error(
    `--batches: at most ${LIMITS.maxSessionsPerBatch} sessions per batch (LIMITS.maxSessionsPerBatch)`,
  );
if (GATEWAYS * SLOTS < SESSIONS)
  throw new Error(`--gateways × --slots (${GATEWAYS * SLOTS}) must hold --sessions (${SESSIONS}) at once`);

async function until(what: string, done: () => boolean | Promise<boolean>, log: () => string): Promise<void> {
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  let next = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline)
      throw new Error(`${what}: not reached within ${PHASE_TIMEOUT_MS / 1000} s (${log()})`);
    if (Date.now() > next) {
      console.error(`  … ${what}: ${log()}`);
      next = Date.now() + 10_000;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One configuration's figures. */
export interface ScaleRow {
  shards: number;
  gateways: number;
  slots: number;
  sessions: number;
  batches: number;
  /** POST of the batches (all sent at once): slowest round trip (s). */
  postSeconds: number;
  /** POST → last assign (s). */
  dispatchSeconds: number;
  dispatchP50Ms: number;
  dispatchP99Ms: number;
  /** Leases the gateways held at once once every session was dispatched. */
  leasesHeld: number;
  /** Sessions the ledgers counted started (INITIALIZING: the wire gateway's sessions hold there). */
  startedInLedger: number;
  /** Every result sent → every batch completed (s). */
  completeSeconds: number;
  accepted: number;
  duplicates: number;
  completed: number;
  lost: number;
  /** workerd CPU (ms) per session: dispatch phase (POST to last assign), results phase. */
  cpuMsPerSessionDispatch: number;
  cpuMsPerSessionResults: number;
  /** workerd CPU / wall over the dispatch phase (1 = one core busy throughout). */
  workerdCoresDispatch: number;
  workerdCoresResults: number;
  /** Sessions/s one core carries from the CPU measured (dispatch and result together). */
  projectedSessionsPerCoreSecond: number;
  workerdRssMiB: { before: number; held: number; after: number };
  /** CPU (ms) per session of the local-only parts: wrangler dev's proxy workerd, and wrangler. */
  devProxyCpuMsPerSession: number;
  wranglerCpuMsPerSession: number;
  /** Durable Object storage written, per session (bytes). */
  storageBytesPerSession: number;
  /** Times a gateway's socket was closed under it (it reconnected and resent what was unacknowledged). */
  reconnects: number;
  /** Wire messages per session, gateway → control plane and back. */
  messagesPerSession: { up: number; down: number };
  load: [number, number];
}

async function measure(
  url: string,
  procs: DevProcesses,
  persistDir: string,
  shards: number,
): Promise<ScaleRow> {
  const loadStart = loadavg()[0]!;
  const queue = `scale-${shards}`;
  // A ledger taking a burst of 10,000 stage reports answers its status late: minutes, not 30 s.
  const client = new ControlPlaneClient(url, tokens.trainer, { timeoutMs: 10 * 60_000 });
  const gws = await Promise.all(
    Array.from({ length: GATEWAYS }, (_, i) =>
      WireGateway.start({
        url,
        token: tokens.gateway,
        nodeId: `${queue}-gw${i}`,
        queue,
        slots: SLOTS,
        runMs: Number.POSITIVE_INFINITY,
        pingIntervalMs: 15_000,
      }),
    ),
  );
  const usage = () => devUsage(procs);
  const assigned = () => gws.reduce((n, g) => n + g.assigns.length, 0);
  const held = () => gws.reduce((n, g) => n + g.held.size, 0);
  const storageBefore = folderBytes(persistDir);
  const framesBefore = {
    sent: gws.reduce((n, g) => n + g.frames.sent, 0),
    received: gws.reduce((n, g) => n + g.frames.received, 0),
  };
  const u0 = usage();
  const perBatch = Math.ceil(SESSIONS / BATCHES);
  const batchIds: string[] = [];
  const t0 = performance.now();
  const posts = await Promise.all(
    Array.from({ length: BATCHES }, async (_, b) => {
      const count = Math.min(perBatch, SESSIONS - b * perBatch);
      // Groups of 100 samples, as a trainer's prompts × samples.
      const tasks = Array.from({ length: Math.ceil(count / 100) }, (_, i) => ({
        task_id: `t${i}`,
        instruction: "x",
        num_samples: Math.min(100, count - i * 100),
        agent: shell,
        timeout_seconds: 3600,
      }));
      const { batch_id } = await client.submit({ queue, tasks });
      batchIds.push(batch_id);
      return performance.now() - t0;
    }),
  );
  await until(
    "dispatch",
    () => assigned() >= SESSIONS,
    () => `${assigned()}/${SESSIONS} assigned`,
  );
  const tDispatched = performance.now();
  const u1 = usage();
  const leasesHeld = held();
  let startedInLedger = 0;
  for (const id of batchIds) startedInLedger += (await client.status(id)).counts.INITIALIZING ?? 0;
  const latencies = gws.flatMap((g) => g.assigns.map((a) => a.at - t0)).sort((a, b) => a - b);
  // Every session ends at once: 10,000 results into the ledgers.
  const tRelease = performance.now();
  for (const g of gws) g.finishAll();
  const accepted = () => gws.reduce((n, g) => n + g.acks.filter((a) => a.status === "accepted").length, 0);
  // A session is recorded once its result was accepted, or refused as a duplicate of one that
  // was (the ack of the first send was lost with a socket the control plane closed).
  const recorded = () =>
    new Set(gws.flatMap((g) => g.acks.filter((a) => a.status !== "stale").map((a) => a.session_id))).size;
  await until(
    "results",
    () => recorded() >= SESSIONS,
    () => `${recorded()}/${SESSIONS} recorded (${accepted()} acks accepted)`,
  );
  let completed = 0;
  await until(
    "batches completed",
    async () => {
      completed = 0;
      let done = true;
      for (const id of batchIds) {
        const status = await client.status(id);
        completed += status.counts.COMPLETED ?? 0;
        done &&= status.status === "completed";
      }
      return done;
    },
    () => `${completed}/${SESSIONS} completed`,
  );
  const tComplete = performance.now();
  const u2 = usage();
  const duplicates = gws.reduce((n, g) => n + g.acks.filter((a) => a.status === "duplicate").length, 0);
  const messagesUp = gws.reduce((n, g) => n + g.frames.sent, 0) - framesBefore.sent;
  const messagesDown = gws.reduce((n, g) => n + g.frames.received, 0) - framesBefore.received;
  const storageAfter = folderBytes(persistDir);
  await Promise.all(gws.map((g) => g.close()));
  const dispatchSeconds = (tDispatched - t0) / 1000;
  const completeSeconds = (tComplete - tRelease) / 1000;
  const cpuDispatch = u1.runtimeCpu - u0.runtimeCpu;
  const cpuResults = u2.runtimeCpu - u1.runtimeCpu;
  const mib = (b: number) => Math.round(b / 2 ** 20);
  return {
    shards,
    gateways: GATEWAYS,
    slots: SLOTS,
    sessions: SESSIONS,
    batches: BATCHES,
    postSeconds: Math.max(...posts) / 1000,
    dispatchSeconds,
    dispatchP50Ms: percentile(latencies, 50),
    dispatchP99Ms: percentile(latencies, 99),
    leasesHeld,
    startedInLedger,
    completeSeconds,
    accepted: accepted(),
    duplicates,
    completed,
    lost: SESSIONS - completed,
    cpuMsPerSessionDispatch: (cpuDispatch * 1000) / SESSIONS,
    cpuMsPerSessionResults: (cpuResults * 1000) / SESSIONS,
    workerdCoresDispatch: cpuDispatch / dispatchSeconds,
    workerdCoresResults: cpuResults / ((tComplete - tDispatched) / 1000),
    projectedSessionsPerCoreSecond: SESSIONS / (cpuDispatch + cpuResults),
    workerdRssMiB: { before: mib(u0.runtimeRss), held: mib(u1.runtimeRss), after: mib(u2.runtimeRss) },
    devProxyCpuMsPerSession: ((u2.devProxyCpu - u0.devProxyCpu) * 1000) / SESSIONS,
    wranglerCpuMsPerSession: ((u2.wranglerCpu - u0.wranglerCpu) * 1000) / SESSIONS,
    storageBytesPerSession: (storageAfter - storageBefore) / SESSIONS,
    reconnects: gws.reduce((n, g) => n + g.reconnects, 0),
    messagesPerSession: {
      up: messagesUp / SESSIONS,
      down: messagesDown / SESSIONS,
    },
    load: [loadStart, loadavg()[0]!],
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "polar-scale-"));
  const cp = await startControlPlaneDev({
    persistTo: dir,
    tokens,
    vars: { POLAR_QUEUE_SHARDS: SHARDS.map((n) => `scale-${n}=${n}`).join(",") },
  });
  const rows: ScaleRow[] = [];
  try {
    for (const shards of SHARDS) {
      console.error(`${SESSIONS} sessions, ${GATEWAYS} gateways × ${SLOTS} slots, ${shards} shard(s)…`);
      rows.push(await measure(cp.url, devProcesses(cp.pid!, cp.port), dir, shards));
    }
  } catch (error) {
    // What the Worker logged is the first place to look.
    console.error(`wrangler dev's last output:\n${cp.output().slice(-4000)}`);
    throw error;
  } finally {
    await cp.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  if (values.json) writeFileSync(values.json, `${JSON.stringify(rows, null, 2)}\n`);
  console.log(
    `\nControl plane at scale on local workerd (wrangler dev): ${SESSIONS} sessions held at once by ${GATEWAYS} wire gateways × ${SLOTS} slots, ${BATCHES} batch(es)\n`,
  );
  console.log(
    "| shards | POST (s) | dispatch all (s) | dispatch p50 / p99 (s) | leases held | results accepted / dup / lost | gateway reconnects | results in (s) | workerd CPU ms/session (dispatch + results) | workerd cores busy | projected sessions/s per core | workerd RSS MiB (idle → held → after) | local-only CPU ms/session (dev proxy + wrangler) | storage B/session | wire frames/session up / down | load 1 min |",
  );
  console.log("|---:|---:|---:|---|---:|---|---:|---:|---|---|---:|---|---|---:|---|---|");
  for (const r of rows)
    console.log(
      `| ${r.shards} | ${r.postSeconds.toFixed(1)} | ${r.dispatchSeconds.toFixed(1)} | ${(r.dispatchP50Ms / 1000).toFixed(1)} / ${(r.dispatchP99Ms / 1000).toFixed(1)} | ${r.leasesHeld} | ${r.accepted} / ${r.duplicates} / ${r.lost} | ${r.reconnects} | ${r.completeSeconds.toFixed(1)} | ${r.cpuMsPerSessionDispatch.toFixed(2)} + ${r.cpuMsPerSessionResults.toFixed(2)} | ${r.workerdCoresDispatch.toFixed(2)} / ${r.workerdCoresResults.toFixed(2)} | ${r.projectedSessionsPerCoreSecond.toFixed(0)} | ${r.workerdRssMiB.before} → ${r.workerdRssMiB.held} → ${r.workerdRssMiB.after} | ${r.devProxyCpuMsPerSession.toFixed(2)} + ${r.wranglerCpuMsPerSession.toFixed(2)} | ${r.storageBytesPerSession.toFixed(0)} | ${r.messagesPerSession.up.toFixed(1)} / ${r.messagesPerSession.down.toFixed(1)} | ${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)} |`,
    );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
