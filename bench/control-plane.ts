/**
 * Benchmark of the control plane on local workerd (`wrangler dev`): dispatch latency from enqueue
 * (the trainer's POST) to the gateway's `assign`, p50/p99, and sustained sessions/s from submit to
 * the batch completing, with 1, 10 and 100 in-process gateways (no-op harness) on one queue, and
 * 100 gateways on a queue sharded four ways. Prints a table.
 *
 * Run: `npm run bench:control-plane` (options: `--sessions N` per throughput run, `--probes N`
 * latency samples per configuration).
 *
 * The figures are wall-clock on a shared machine: the 1-minute load average at the start and end
 * of each row is printed with it, because CPU contention from other processes inflates every
 * latency (workerd, wrangler and the gateways all run on the same cores).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ControlPlaneClient } from "../cli/client";
import { startControlPlaneDev } from "../cli/wrangler-dev";
import { WireGateway } from "../test/support/wire-gateway";

const { values } = parseArgs({
  options: { sessions: { type: "string", default: "500" }, probes: { type: "string", default: "40" } },
});
const SESSIONS = Number(values.sessions);
const PROBES = Number(values.probes);
const SLOTS = 4;
/** Queues named bench-sharded-… get this many shards (Worker variable POLAR_QUEUE_SHARDS). */
const SHARDS = 4;
const tokens = { trainer: "bench-trainer", gateway: "bench-gateway", admin: "bench-admin" };
const shell = { harness: "shell" as const, custom_shell: { command: "true" } };

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

interface Config {
  gateways: number;
  shards: number;
}

interface Row extends Config {
  p50: number;
  p99: number;
  /** p50 of the POST round trip (201 received). */
  postP50: number;
  /** Probes whose assign arrived before the POST's 201: dispatch ran inside the enqueue. */
  beforeReply: number;
  sessions: number;
  seconds: number;
  load: [number, number];
}

async function measure(url: string, { gateways: n, shards }: Config): Promise<Row> {
  const loadStart = loadavg()[0]!;
  // A ledger taking a burst of stage reports answers its status late: minutes, not 30 s.
  const client = new ControlPlaneClient(url, tokens.trainer, { timeoutMs: 10 * 60_000 });
  const queue = shards > 1 ? `bench-sharded-${n}` : `bench-${n}`;
  const gws = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      WireGateway.start({
        url,
        token: tokens.gateway,
        nodeId: `${queue}-${i}`,
        queue,
        slots: SLOTS,
        runMs: 0,
      }),
    ),
  );
  const assigned = () => gws.reduce((sum, g) => sum + g.assigns.length, 0);
  // Latency: one session at a time into idle gateways, so the figure is dispatch alone.
  const latencies: number[] = [];
  const posts: number[] = [];
  let beforeReply = 0;
  for (let i = 0; i < PROBES; i++) {
    const before = assigned();
    const t0 = performance.now();
    await client.submit({ queue, tasks: [{ task_id: "probe", instruction: "x", agent: shell }] });
    const replied = performance.now();
    while (assigned() === before) await new Promise((r) => setImmediate(r));
    const latest = gws.flatMap((g) => g.assigns).reduce((a, b) => (b.at > a.at ? b : a));
    latencies.push(latest.at - t0);
    posts.push(replied - t0);
    if (latest.at <= replied) beforeReply++;
  }
  // Throughput: a batch of SESSIONS, from submit until every result is accepted.
  const tasks = Array.from({ length: Math.ceil(SESSIONS / 10) }, (_, i) => ({
    task_id: `t${i}`,
    instruction: "x",
    num_samples: 10,
    agent: shell,
  }));
  const t0 = performance.now();
  const { batch_id, sessions } = await client.submit({ queue, tasks });
  for (;;) {
    const status = await client.status(batch_id);
    if (status.status === "completed") break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(gws.map((g) => g.close()));
  latencies.sort((a, b) => a - b);
  posts.sort((a, b) => a - b);
  return {
    gateways: n,
    shards,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    postP50: percentile(posts, 50),
    beforeReply,
    sessions,
    seconds,
    load: [loadStart, loadavg()[0]!],
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "polar-bench-"));
  const cp = await startControlPlaneDev({
    persistTo: dir,
    tokens,
    vars: { POLAR_QUEUE_SHARDS: `bench-sharded-*=${SHARDS}` },
  });
  const rows: Row[] = [];
  const configs: Config[] = [
    { gateways: 1, shards: 1 },
    { gateways: 10, shards: 1 },
    { gateways: 100, shards: 1 },
    { gateways: 100, shards: SHARDS },
  ];
  try {
    for (const config of configs) {
      rows.push(await measure(cp.url, config));
      console.error(`done: ${config.gateways} gateway(s), ${config.shards} shard(s)`);
    }
  } finally {
    await cp.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nControl plane on local workerd (wrangler dev), ${SLOTS} slots per gateway, no-op harness`);
  console.log(`dispatch latency = trainer POST → gateway assign (${PROBES} single-session probes)`);
  console.log(`throughput = ${SESSIONS}-session batch, submit → last result accepted\n`);
  console.log(
    "| gateways | shards | dispatch p50 (ms) | dispatch p99 (ms) | POST p50 (ms) | assign before 201 | sessions | seconds | sessions/s | load 1 min |",
  );
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
  for (const r of rows) {
    console.log(
      `| ${r.gateways} | ${r.shards} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.postP50.toFixed(1)} | ${r.beforeReply}/${PROBES} | ${r.sessions} | ${r.seconds.toFixed(2)} | ${(r.sessions / r.seconds).toFixed(1)} | ${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)} |`,
    );
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
