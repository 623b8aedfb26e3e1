/**
 * `npm run test:fuzz`: the long property-based run, by default 10,000 cases per fuzzed surface
 * from a fresh seed, then one line per surface (cases, seeds, result, time). Exits 1 when any
 * surface failed, after printing the command that replays the failing run.
 *
 *   npm run test:fuzz -- [--runs 10000] [--seed S] [--segment 500]
 *                        [--surface routes,wire,proxy,task-files]
 *
 * The two control-plane surfaces run in the workers pool, which cannot take 10,000 cases in one
 * run: the pinned `@cloudflare/vitest-pool-workers` (0.15.1) wraps a Durable Object class's
 * prototype in one more `Proxy` at every construction of an instance, so after a thousand or so
 * objects each property read recurses through all of them and throws `RangeError: Maximum call
 * stack size exceeded` inside the pool's own code (upstream workers-sdk issue 15092, fixed in a
 * later release of the pool). They run instead in segments of `--segment` cases, each a fresh
 * `vitest run` (a fresh workerd) from its own seed (the base seed + the segment's index), so the
 * cases add up to `--runs` and every segment still ends with its own "a normal batch completes"
 * check. The proxy and the task files run their `--runs` in one go.
 *
 * @module
 */
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { execa } from "execa";
import { REPO_ROOT } from "../cli/wrangler-dev";

/** A fuzzed surface: its test file, and whether it runs in the workers pool (segmented). */
export interface FuzzSurface {
  name: string;
  file: string;
  segmented: boolean;
}

/** Every surface `npm run test:fuzz` covers (docs/control-plane.md#fuzzing). */
export const FUZZ_SURFACES: readonly FuzzSurface[] = [
  { name: "routes", file: "control-plane/fuzz/routes.test.ts", segmented: true },
  { name: "wire", file: "control-plane/fuzz/wire.test.ts", segmented: true },
  { name: "proxy", file: "proxy/fuzz.test.ts", segmented: false },
  { name: "task-files", file: "cli/task-file.fuzz.test.ts", segmented: false },
];

/** One `vitest run` of the plan: a file, its case count and its seed. */
export interface FuzzRun {
  surface: string;
  file: string;
  runs: number;
  seed: number;
}

/**
 * The `vitest run`s that give `runs` cases per surface: one per unsegmented surface, and
 * ⌈runs / segment⌉ per segmented one, seeded `seed`, `seed + 1`, … (kept in the 32-bit range
 * fast-check takes).
 *
 * @example
 * ```ts
 * fuzzPlan({ runs: 1000, segment: 500, seed: 7, surfaces: FUZZ_SURFACES.slice(0, 1) });
 * // [{ surface: "routes", runs: 500, seed: 7, … }, { surface: "routes", runs: 500, seed: 8, … }]
 * ```
 */
export function fuzzPlan(options: {
  runs: number;
  segment: number;
  seed: number;
  surfaces: readonly FuzzSurface[];
}): FuzzRun[] {
  const { runs, segment, seed, surfaces } = options;
  return surfaces.flatMap((s) => {
    if (!s.segmented) return [{ surface: s.name, file: s.file, runs, seed }];
    const out: FuzzRun[] = [];
    for (let done = 0, k = 0; done < runs; done += segment, k++)
      out.push({ surface: s.name, file: s.file, runs: Math.min(segment, runs - done), seed: (seed + k) | 0 });
    return out;
  });
}

/**
 * The command that replays one run of the plan, as printed when it fails.
 *
 * @example
 * ```ts
 * replayCommand({ surface: "wire", file: "control-plane/fuzz/wire.test.ts", runs: 500, seed: 9 });
 * // "POLAR_FUZZ_RUNS=500 POLAR_FUZZ_SEED=9 npx vitest run control-plane/fuzz/wire.test.ts"
 * ```
 */
export function replayCommand(run: FuzzRun): string {
  return `POLAR_FUZZ_RUNS=${run.runs} POLAR_FUZZ_SEED=${run.seed} npx vitest run ${run.file}`;
}

/** Reads the command line; a bad value is an error naming the option. */
export function parseFuzzArgs(argv: string[]): {
  runs: number;
  segment: number;
  seed: number;
  surfaces: FuzzSurface[];
} {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: "string", default: process.env.POLAR_FUZZ_RUNS || "10000" },
      seed: { type: "string", default: process.env.POLAR_FUZZ_SEED || "" },
      segment: { type: "string", default: "500" },
      surface: { type: "string", default: FUZZ_SURFACES.map((s) => s.name).join(",") },
    },
  });
  const int = (name: "runs" | "segment" | "seed", value: string, min: number) => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isSafeInteger(n) || n < min)
      throw new Error(`test:fuzz: --${name} must be an integer >= ${min}, got '${value}'`);
    return n;
  };
  const surfaces = values.surface.split(",").map((name) => {
    const s = FUZZ_SURFACES.find((x) => x.name === name.trim());
    if (!s)
      throw new Error(
        `test:fuzz: --surface: unknown surface '${name}' (known: ${FUZZ_SURFACES.map((x) => x.name).join(", ")})`,
      );
    return s;
  });
  const seed =
    values.seed === ""
      ? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0
      : int("seed", values.seed, -2147483648);
  return {
    runs: int("runs", values.runs, 1),
    segment: int("segment", values.segment, 1),
    seed,
    surfaces,
  };
}

async function main(): Promise<number> {
  let options: ReturnType<typeof parseFuzzArgs>;
  try {
    options = parseFuzzArgs(process.argv.slice(2));
  } catch (err) {
    console.error((err as Error).message);
    return 2;
  }
  const plan = fuzzPlan(options);
  console.log(
    `test:fuzz: ${options.runs} cases per surface (${options.surfaces.map((s) => s.name).join(", ")}), seed ${options.seed}, ${plan.length} runs`,
  );
  const totals = new Map<string, { cases: number; runs: number; seconds: number; failed?: FuzzRun }>();
  for (const run of plan) {
    const started = Date.now();
    const result = await execa("npx", ["vitest", "run", run.file], {
      cwd: REPO_ROOT,
      env: { POLAR_FUZZ_RUNS: String(run.runs), POLAR_FUZZ_SEED: String(run.seed) },
      reject: false,
      all: true,
    });
    const seconds = (Date.now() - started) / 1000;
    const t = totals.get(run.surface) ?? { cases: 0, runs: 0, seconds: 0 };
    t.runs++;
    t.seconds += seconds;
    if (result.exitCode === 0) t.cases += run.runs;
    else t.failed ??= run;
    totals.set(run.surface, t);
    console.log(
      `test:fuzz: ${run.surface} seed ${run.seed}: ${run.runs} cases ${result.exitCode === 0 ? "passed" : "FAILED"} in ${seconds.toFixed(0)} s`,
    );
    if (result.exitCode !== 0) {
      console.log(result.all);
      console.log(`test:fuzz: replay with: ${replayCommand(run)}`);
    }
  }
  console.log("\n| surface | cases passed | runs | seconds | result |\n|---|---:|---:|---:|---|");
  for (const [surface, t] of totals)
    console.log(
      `| ${surface} | ${t.cases} | ${t.runs} | ${t.seconds.toFixed(0)} | ${t.failed ? `failed: ${replayCommand(t.failed)}` : "passed"} |`,
    );
  return [...totals.values()].some((t) => t.failed) ? 1 : 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) process.exitCode = await main();
