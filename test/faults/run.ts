/**
 * `npm run test:faults`: the fault matrix at scale (test/faults/matrix.ts), by default 2,000
 * sessions over 4 gateway processes with every fault injected several times, then the report as
 * Markdown on stdout (the table of docs/reliability.md) and as JSON with `--out FILE`. Exits 1 when
 * any invariant broke. The short variant runs inside `npm test` (fault-matrix.test.ts).
 *
 *   npm run test:faults -- [--sessions 2000] [--gateways 4] [--max-run 32] [--seed 1]
 *                          [--engine-retry-seconds 30] [--work-seconds 20] [--times 3]
 *                          [--out report.json]
 *
 * `--times N` injects each fault N times (the fence is cycled 3N times).
 *
 * `--soak SECONDS` runs the soak instead (soak.ts): the stack kept busy that long (`--in-flight`
 * sessions, 400 by default) with a random fault every 20–40 s, then the same checks, plus the
 * memory of every process and the journal and Durable Object storage before and after.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { reportMarkdown } from "./checks";
import { runFaultMatrix } from "./matrix";
import { runSoak, soakMarkdown } from "./soak";

const { values } = parseArgs({
  options: {
    sessions: { type: "string", default: "2000" },
    gateways: { type: "string", default: "4" },
    "max-run": { type: "string", default: "32" },
    seed: { type: "string", default: "1" },
    "engine-retry-seconds": { type: "string", default: "30" },
    "work-seconds": { type: "string", default: "20" },
    times: { type: "string", default: "3" },
    soak: { type: "string", default: "" },
    "in-flight": { type: "string", default: "400" },
    out: { type: "string", default: "" },
  },
});

function int(name: keyof typeof values, min: number): number {
  const v = Number(values[name]);
  if (!Number.isInteger(v) || v < min) {
    console.error(`test:faults: --${name} must be an integer >= ${min}, got '${values[name]}'`);
    process.exit(2);
  }
  return v;
}

const started = Date.now();
const load = loadavg()[0]!;
// The machine's load over the run (1-minute average every 10 s): sessions that run past their
// budget on a starved host show up as timeouts, so the report says how loaded the host was.
let peakLoad = load;
setInterval(() => {
  peakLoad = Math.max(peakLoad, loadavg()[0]!);
}, 10_000).unref();
const footer = () =>
  `\nload average ${load.toFixed(1)} before, peak ${peakLoad.toFixed(1)}, ${loadavg()[0]!.toFixed(1)} after; ${((Date.now() - started) / 1000).toFixed(0)} s in all`;

if (values.soak) {
  const soak = await runSoak({
    durationMs: int("soak", 60) * 1000,
    gateways: int("gateways", 3),
    maxRun: int("max-run", 1),
    seed: int("seed", 0),
    workSeconds: int("work-seconds", 1),
    engineRetrySeconds: int("engine-retry-seconds", 1),
    inFlight: int("in-flight", 1),
    log: (line) => console.error(`test:faults: ${line}`),
  });
  console.log(`${reportMarkdown(soak.matrix)}\n\n${soakMarkdown(soak)}${footer()}`);
  if (values.out) writeFileSync(values.out, `${JSON.stringify(soak, null, 1)}\n`);
  process.exit(soak.matrix.violations.length === 0 ? 0 : 1);
}

const times = int("times", 0);
const report = await runFaultMatrix({
  sessions: int("sessions", 1),
  gateways: int("gateways", 3),
  maxRun: int("max-run", 1),
  seed: int("seed", 0),
  hangShare: 0.02,
  flakyRuntimeShare: 0.03,
  engineRetrySeconds: int("engine-retry-seconds", 1),
  workSeconds: int("work-seconds", 1),
  timeoutMs: 3_600_000,
  faults: {
    gatewayKillMidRun: times,
    gatewayKillBeforeAck: times,
    controlPlaneKill: times,
    controlPlaneKillDuringLoan: times,
    engineErrorBursts: times,
    engineOutages: times,
    engineStalls: times,
    flakyLinkCycles: times,
    fenceCycles: times * 3,
  },
  log: (line) => console.error(`test:faults: ${line}`),
});
console.log(`${reportMarkdown(report)}${footer()}`);
if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 1)}\n`);
process.exit(report.violations.length === 0 ? 0 : 1);
