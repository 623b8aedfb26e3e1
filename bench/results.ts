/**
 * Benchmark of results at trainer scale: a batch of 10,000 sessions whose trajectories hold 32k
 * tokens each (one trace: 31,744 prompt + 1,024 response tokens with logprobs, about 220 kB of
 * JSON) goes through the real control plane on local workerd (`wrangler dev`), delivered by
 * in-process wire gateways; then a trainer process reads every result back, by cursor pages and by
 * the SSE stream (`bench/results-reader.ts`, one process per read so its memory is its own).
 *
 * Reports, per way of reading: results/s, MB/s, and the reader's peak resident memory; and what
 * storing the batch took: seconds from the first result sent to the batch completed, workerd CPU
 * per result (process accounting) and the Durable Objects' storage per result.
 *
 * Run: `npm run bench:results` (options: `--sessions N`, `--prompt-tokens N`, `--response-tokens N`,
 * `--gateways N`, `--json FILE`). Prints a Markdown table.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ControlPlaneClient } from "../cli/client";
import { REPO_ROOT, startControlPlaneDev } from "../cli/wrangler-dev";
import { WireGateway } from "../test/support/wire-gateway";
import { devProcesses, devUsage, folderBytes } from "./support/stack-usage";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "10000" },
    "prompt-tokens": { type: "string", default: "31744" },
    "response-tokens": { type: "string", default: "1024" },
    gateways: { type: "string", default: "10" },
    json: { type: "string" },
  },
});
const SESSIONS = Number(values.sessions);
const PROMPT = Number(values["prompt-tokens"]);
const RESPONSE = Number(values["response-tokens"]);
const GATEWAYS = Number(values.gateways);
for (const [name, n] of [
  ["--sessions", SESSIONS],
  ["--prompt-tokens", PROMPT],
  ["--response-tokens", RESPONSE],
  ["--gateways", GATEWAYS],
] as const)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${n}`);
const tokens = { trainer: "bench-trainer", gateway: "bench-gateway", admin: "bench-admin" };
const shell = { harness: "shell" as const, custom_shell: { command: "true" } };
const QUEUE = "results-bench";

/** What one reader process printed. */
export interface ReadRow {
  mode: "cursor" | "sse";
  results: number;
  bytes: number;
  tokens: number;
  seconds: number;
  max_rss_mib: number;
}

/** The whole run's figures. */
export interface ResultsReport {
  sessions: number;
  tokensPerResult: number;
  /** First result sent → batch completed (s). */
  storeSeconds: number;
  workerdCpuMsPerResult: number;
  storageBytesPerResult: number;
  reads: ReadRow[];
  load: [number, number];
}

function read(url: string, batchId: string, mode: "cursor" | "sse"): ReadRow {
  const out = execFileSync(
    process.execPath,
    [
      "--import",
      "tsx",
      join(REPO_ROOT, "bench", "results-reader.ts"),
      "--url",
      url,
      "--token",
      tokens.trainer,
      "--batch",
      batchId,
      "--mode",
      mode,
    ],
    { cwd: REPO_ROOT, encoding: "utf8", maxBuffer: 1 << 20 },
  );
  const row = JSON.parse(out.trim().split("\n").pop()!) as ReadRow;
  if (row.results !== SESSIONS) throw new Error(`${mode} read ${row.results} of ${SESSIONS} results`);
  if (row.tokens !== SESSIONS * (PROMPT + RESPONSE))
    throw new Error(`${mode} read ${row.tokens} tokens, expected ${SESSIONS * (PROMPT + RESPONSE)}`);
  return row;
}

async function main(): Promise<void> {
  const loadStart = loadavg()[0]!;
  const dir = mkdtempSync(join(tmpdir(), "polar-results-"));
  const cp = await startControlPlaneDev({ persistTo: dir, tokens });
  let report: ResultsReport;
  try {
    const procs = devProcesses(cp.pid!, cp.port);
    const client = new ControlPlaneClient(cp.url, tokens.trainer);
    const slots = Math.ceil(SESSIONS / GATEWAYS);
    const gws = await Promise.all(
      Array.from({ length: GATEWAYS }, (_, i) =>
        WireGateway.start({
          url: cp.url,
          token: tokens.gateway,
          nodeId: `results-gw${i}`,
          queue: QUEUE,
          slots,
          runMs: Number.POSITIVE_INFINITY,
          pingIntervalMs: 15_000,
          traceTokens: { prompt: PROMPT, response: RESPONSE },
        }),
      ),
    );
    const tasks = Array.from({ length: Math.ceil(SESSIONS / 100) }, (_, i) => ({
      task_id: `t${i}`,
      instruction: "x",
      num_samples: Math.min(100, SESSIONS - i * 100),
      agent: shell,
      timeout_seconds: 3600,
    }));
    const { batch_id } = await client.submit({ queue: QUEUE, tasks });
    const assigned = () => gws.reduce((n, g) => n + g.assigns.length, 0);
    while (assigned() < SESSIONS) await new Promise((r) => setTimeout(r, 100));
    const storageBefore = folderBytes(dir);
    const cpuBefore = devUsage(procs).runtimeCpu;
    const t0 = performance.now();
    // One gateway's results at a time, so the bench process does not hold every result's JSON.
    for (const g of gws) {
      g.finishAll();
      await g.waitFor(() => g.acks.length >= g.assigns.length, 30 * 60_000, "every result acknowledged");
    }
    for (;;) {
      const status = await client.status(batch_id);
      if (status.status === "completed") break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const storeSeconds = (performance.now() - t0) / 1000;
    const cpu = devUsage(procs).runtimeCpu - cpuBefore;
    const storageBytes = folderBytes(dir) - storageBefore;
    await Promise.all(gws.map((g) => g.close()));
    console.error(`stored ${SESSIONS} results in ${storeSeconds.toFixed(1)} s; reading…`);
    const reads = [read(cp.url, batch_id, "cursor"), read(cp.url, batch_id, "sse")];
    report = {
      sessions: SESSIONS,
      tokensPerResult: PROMPT + RESPONSE,
      storeSeconds,
      workerdCpuMsPerResult: (cpu * 1000) / SESSIONS,
      storageBytesPerResult: storageBytes / SESSIONS,
      reads,
      load: [loadStart, loadavg()[0]!],
    };
  } finally {
    await cp.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  if (values.json) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
  const r = report;
  console.log(
    `\nResults at trainer scale on local workerd: ${r.sessions} results of ${r.tokensPerResult} tokens each`,
  );
  console.log(
    `stored in ${r.storeSeconds.toFixed(1)} s (${(r.sessions / r.storeSeconds).toFixed(0)} results/s), workerd CPU ${r.workerdCpuMsPerResult.toFixed(1)} ms/result, storage ${(r.storageBytesPerResult / 1024).toFixed(0)} KiB/result, load ${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)}\n`,
  );
  console.log("| read by | results | MB | seconds | results/s | MB/s | reader peak RSS (MiB) |");
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const x of r.reads)
    console.log(
      `| ${x.mode} | ${x.results} | ${(x.bytes / 1e6).toFixed(0)} | ${x.seconds.toFixed(1)} | ${(x.results / x.seconds).toFixed(0)} | ${(x.bytes / 1e6 / x.seconds).toFixed(1)} | ${x.max_rss_mib.toFixed(0)} |`,
    );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
