/**
 * Benchmark of the control plane on local workerd (`wrangler dev`): dispatch latency from enqueue
 * (the trainer's POST) to the gateway's `assign`, p50/p99, and sustained sessions/s from submit to
 * the batch completing, with 1, 10 and 100 in-process gateways (no-op harness). Prints a table.
 *
 * Run: `npm run bench:control-plane` (options: `--sessions N` per throughput run, `--probes N`
 * latency samples per configuration).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
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
const tokens = { trainer: "bench-trainer", gateway: "bench-gateway", admin: "bench-admin" };
const shell = { harness: "shell" as const, custom_shell: { command: "true" } };

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

interface Row {
  gateways: number;
  p50: number;
  p99: number;
  sessions: number;
  seconds: number;
}

async function measure(url: string, n: number): Promise<Row> {
  const client = new ControlPlaneClient(url, tokens.trainer);
  const queue = `bench-${n}`;
  const gws = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      WireGateway.start({
        url,
        token: tokens.gateway,
        nodeId: `bench-${n}-${i}`,
        queue,
        slots: SLOTS,
        runMs: 0,
      }),
    ),
  );
  const assigned = () => gws.reduce((sum, g) => sum + g.assigns.length, 0);
  // Latency: one session at a time into idle gateways, so the figure is dispatch alone.
  const latencies: number[] = [];
  for (let i = 0; i < PROBES; i++) {
    const before = assigned();
    const t0 = performance.now();
    await client.submit({ queue, tasks: [{ task_id: "probe", instruction: "x", agent: shell }] });
    while (assigned() === before) await new Promise((r) => setImmediate(r));
    const latest = gws.flatMap((g) => g.assigns).reduce((a, b) => (b.at > a.at ? b : a));
    latencies.push(latest.at - t0);
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
  return { gateways: n, p50: percentile(latencies, 50), p99: percentile(latencies, 99), sessions, seconds };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "polar-bench-"));
  const cp = await startControlPlaneDev({ persistTo: dir, tokens });
  const rows: Row[] = [];
  try {
    for (const n of [1, 10, 100]) {
      rows.push(await measure(cp.url, n));
      console.error(`done: ${n} gateway(s)`);
    }
  } finally {
    await cp.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nControl plane on local workerd (wrangler dev), ${SLOTS} slots per gateway, no-op harness`);
  console.log(`dispatch latency = trainer POST → gateway assign (${PROBES} single-session probes)`);
  console.log(`throughput = ${SESSIONS}-session batch, submit → last result accepted\n`);
  console.log("| gateways | dispatch p50 (ms) | dispatch p99 (ms) | sessions | seconds | sessions/s |");
  console.log("|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    console.log(
      `| ${r.gateways} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.sessions} | ${r.seconds.toFixed(2)} | ${(r.sessions / r.seconds).toFixed(1)} |`,
    );
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
