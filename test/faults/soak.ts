/**
 * The soak: the fault matrix's stack kept busy for a fixed time (10 minutes by default) while a
 * random fault of the matrix is injected every 20–40 s, then every session's one result is checked
 * as in the matrix (`checks.ts`). Besides the invariants it reports what a long run leaves behind:
 * the resident memory of every process of the stack sampled every 15 s (first, last, peak, and
 * the growth over the second half, where a leak would show), each gateway's journal and the
 * control plane's Durable Object storage (the `--persist-to` folder) before and after.
 *
 * @module
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ControlPlaneClient } from "../../cli/client";
import type { ExpectedTask, MatrixReport } from "./checks";
import { drainAndCheck, FaultInjector, type FaultPlan, QUEUE, sleep, submitOnce, workload } from "./matrix";
import { FaultStack } from "./stack";

/** Options of {@link runSoak}. */
export interface SoakOptions {
  durationMs: number;
  gateways: number;
  maxRun: number;
  seed: number;
  /** Longest a session works (seconds). */
  workSeconds: number;
  engineRetrySeconds: number;
  /** Sessions kept submitted and not yet finished (a new batch goes in below this). */
  inFlight: number;
  log: (line: string) => void;
}

/** Memory of one process of the stack over the run (MiB). */
export interface MemorySeries {
  process: string;
  samples: number;
  firstMiB: number;
  lastMiB: number;
  peakMiB: number;
  /** Last minus the sample at the run's midpoint. */
  secondHalfGrowthMiB: number;
}

/** What {@link runSoak} reports. */
export interface SoakReport {
  matrix: MatrixReport;
  memory: MemorySeries[];
  /** Bytes of each gateway's journal folder, and of the Durable Objects' state, before and after. */
  disk: Array<{ what: string; beforeBytes: number; afterBytes: number }>;
}

const SAMPLE_MS = 15_000;
const FAULT_KINDS: Array<keyof FaultPlan> = [
  "gatewayKillMidRun",
  "gatewayKillBeforeAck",
  "controlPlaneKill",
  "controlPlaneKillDuringLoan",
  "engineErrorBursts",
  "engineOutages",
  "engineStalls",
  "flakyLinkCycles",
  "fenceCycles",
];

/** Parent pid, uid and resident set (bytes) of every process, from /proc. */
function processTable(): Map<number, { ppid: number; uid: number; rss: number; comm: string }> {
  const table = new Map<number, { ppid: number; uid: number; rss: number; comm: string }>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, "utf8");
      const field = (key: string) => new RegExp(`^${key}:\\s+(\\S+)`, "m").exec(status)?.[1];
      table.set(Number(name), {
        ppid: Number(field("PPid") ?? 0),
        uid: Number(field("Uid") ?? -1),
        rss: Number(field("VmRSS") ?? 0) * 1024,
        comm: field("Name") ?? "",
      });
    } catch {
      // The process ended while the table was read.
    }
  }
  return table;
}

/**
 * Resident memory of a service: its processes under `root` that run as this user (a root
 * gateway's sessions run as uids of their own and are not the gateway's memory) and are Node or
 * workerd (not the sandbox's helpers).
 */
function serviceRss(table: ReturnType<typeof processTable>, root: number | undefined): number {
  if (root === undefined) return 0;
  const uid = process.getuid?.() ?? -1;
  let total = 0;
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    const p = table.get(pid);
    if (p && p.uid === uid && /^(node|workerd|MainThread)$/.test(p.comm)) total += p.rss;
    for (const [child, c] of table) if (c.ppid === pid) stack.push(child);
  }
  return total;
}

/** Bytes under `path` (0 when it does not exist). */
function folderBytes(path: string): number {
  let total = 0;
  const walk = (p: string) => {
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(p);
    } catch {
      return;
    }
    if (st.isDirectory()) for (const entry of readdirSync(p)) walk(join(p, entry));
    else total += st.size;
  };
  walk(path);
  return total;
}

const MiB = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10;

/**
 * Runs the soak and returns its report (broken invariants are in `report.matrix.violations`).
 *
 * @example
 * ```ts
 * const report = await runSoak({ durationMs: 600_000, gateways: 4, maxRun: 16, … });
 * report.memory.map((m) => m.secondHalfGrowthMiB);
 * ```
 */
export async function runSoak(opts: SoakOptions): Promise<SoakReport> {
  const root = mkdtempSync(join(tmpdir(), "polar-soak-"));
  const stack = await FaultStack.start({
    root,
    gateways: opts.gateways,
    maxRun: opts.maxRun,
    queue: QUEUE,
    shards: 2,
    flaky: opts.gateways - 1,
    skewed: opts.gateways > 2 ? opts.gateways - 2 : null,
    skewMinutes: 5,
    engineRetrySeconds: opts.engineRetrySeconds,
    vars: { POLAR_LEASE_GRACE_SECONDS: "10", POLAR_PING_INTERVAL_SECONDS: "3" },
  });
  const journals = stack.nodeIds().map((id) => join(root, "work", id, "journal"));
  const state = join(root, "state");
  const before = [...journals.map(folderBytes), folderBytes(state)];
  const series = new Map<string, number[]>();
  const sample = () => {
    const table = processTable();
    const services: Array<[string, number | undefined]> = [
      ["control plane (wrangler + workerd)", stack.controlPlanePid()],
      ["simulated engine", stack.engine.pid],
      ...stack.nodeIds().map((id, i): [string, number | undefined] => [`gateway ${id}`, stack.gatewayPid(i)]),
    ];
    for (const [name, pid] of services) {
      const rss = serviceRss(table, pid);
      // A service that is down (killed, restarting) has no sample at that moment.
      if (rss > 0) series.set(name, [...(series.get(name) ?? []), rss]);
    }
  };
  const injected: Record<string, number> = {};
  const expected: ExpectedTask[] = [];
  const batchIds: string[] = [];
  const submittedAt = new Map<string, number>();
  const started = Date.now();
  try {
    const client = new ControlPlaneClient(stack.url, stack.tokens.trainer);
    const injector = new FaultInjector(stack, client, opts.engineRetrySeconds);
    const until = started + opts.durationMs;
    let nextBatch = 0;
    let done = 0;
    const finished = new Map<string, number>();
    const feeding = (async () => {
      while (Date.now() < until) {
        const submitted = expected.reduce((n, t) => n + t.samples, 0);
        if (submitted - done < opts.inFlight) {
          const { batches, expected: more } = workload(
            {
              sessions: 50,
              seed: opts.seed,
              hangShare: 0.02,
              flakyRuntimeShare: 0.03,
              workSeconds: opts.workSeconds,
            },
            nextBatch++,
          );
          const batch = batches[0]!;
          try {
            await submitOnce(client, batch);
          } catch {
            nextBatch--; // the control plane is restarting: the same batch again next round
            await sleep(2_000);
            continue;
          }
          expected.push(...more);
          batchIds.push(batch.batch_id);
          submittedAt.set(batch.batch_id, Date.now());
        }
        // Sessions ended so far (finished batches are not asked again).
        let ended = 0;
        for (const id of batchIds) {
          if (finished.has(id)) {
            ended += finished.get(id)!;
            continue;
          }
          const st = await client.status(id).catch(() => null);
          if (!st) continue;
          const n = (["COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"] as const).reduce(
            (sum, k) => sum + (st.counts[k] ?? 0),
            0,
          );
          if (st.status === "completed") finished.set(id, n);
          ended += n;
        }
        done = ended;
        await sleep(3_000);
      }
    })();
    const faulting = (async () => {
      const draw = Math.random;
      while (Date.now() < until - 60_000) {
        await sleep(20_000 + draw() * 20_000);
        const kind = FAULT_KINDS[Math.floor(draw() * FAULT_KINDS.length)]!;
        opts.log(`+${((Date.now() - started) / 1000).toFixed(0)} s: ${kind}`);
        const injectedKind = await injector.inject(kind).catch((err: unknown) => {
          opts.log(`fault ${kind} failed: ${String(err)}`);
          return null;
        });
        if (injectedKind) injected[injectedKind] = (injected[injectedKind] ?? 0) + 1;
      }
    })();
    const sampling = (async () => {
      while (Date.now() < until) {
        sample();
        await sleep(SAMPLE_MS);
      }
    })();
    await Promise.all([feeding, faulting, sampling]);
    const matrix = await drainAndCheck(stack, client, {
      batchIds,
      submittedAt,
      deadline: Date.now() + 1_200_000,
      expected,
      seed: opts.seed,
      injected,
      started,
      log: opts.log,
    });
    sample();
    const after = [...journals.map(folderBytes), folderBytes(state)];
    const memory = [...series.entries()].map(([process, values]): MemorySeries => {
      const mid = values[Math.floor(values.length / 2)] ?? 0;
      return {
        process,
        samples: values.length,
        firstMiB: MiB(values[0] ?? 0),
        lastMiB: MiB(values.at(-1) ?? 0),
        peakMiB: MiB(Math.max(...values)),
        secondHalfGrowthMiB: MiB((values.at(-1) ?? 0) - mid),
      };
    });
    const disk = [...stack.nodeIds().map((id) => `journal of ${id}`), "Durable Object state"].map(
      (what, i) => ({
        what,
        beforeBytes: before[i]!,
        afterBytes: after[i]!,
      }),
    );
    return { matrix, memory, disk };
  } finally {
    await stack.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

/**
 * The soak's memory and disk figures as Markdown tables (the invariants: `reportMarkdown`).
 *
 * @example
 * ```ts
 * console.log(soakMarkdown(report));
 * ```
 */
export function soakMarkdown(report: SoakReport): string {
  const mem = report.memory.map(
    (m) =>
      `| ${m.process} | ${m.samples} | ${m.firstMiB} | ${m.peakMiB} | ${m.lastMiB} | ${m.secondHalfGrowthMiB >= 0 ? "+" : ""}${m.secondHalfGrowthMiB} |`,
  );
  const disk = report.disk.map(
    (d) =>
      `| ${d.what} | ${(d.beforeBytes / 1024).toFixed(0)} KiB | ${(d.afterBytes / 1024).toFixed(0)} KiB |`,
  );
  return [
    "| process | samples | first MiB | peak MiB | last MiB | second half |",
    "|---|---|---|---|---|---|",
    ...mem,
    "",
    "| on disk | before | after |",
    "|---|---|---|",
    ...disk,
  ].join("\n");
}
