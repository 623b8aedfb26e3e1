/**
 * Benchmark of the gateway package as a GPU host installs it: builds and packs it from this
 * checkout, installs it with `npm install -g --prefix` into empty prefixes, and prints:
 *
 * - the tarball's size and the installed prefix's size (`du`), with its largest packages;
 * - the install's wall time: a first install, then one into a second empty prefix with the npm
 *   cache warm (every dependency already in it: what a fleet's second host with a shared or
 *   pre-filled cache pays; a cold cache adds the download, which depends on the network);
 * - `polar --version` and `polar serve_gateway --help` wall time, median of 5, from a folder
 *   outside the repository;
 * - `polar serve_gateway` (token mode, so it loads the tokenizer the package ships) from spawn to
 *   its first log line and to the control plane listing it connected, median of 3, against a
 *   local control plane (`wrangler dev`) and the simulated engine started from the repository.
 *
 * Run: `npm run bench:install`. Wall-clock on a shared machine: the 1-minute load average at the
 * start and the end is printed with the figures.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { startSupervised } from "../cli/child-process";
import { startLocalStack } from "../cli/local-stack";
import { installPacked, packGateway } from "../test/support/gateway-package";

const run = promisify(execFile);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const load = () => loadavg()[0]!.toFixed(2);

/** Disk use of a folder in bytes, as `du` counts it (blocks, not apparent sizes). */
async function du(dir: string): Promise<number> {
  const { stdout } = await run("du", ["-sk", dir]);
  return Number(stdout.split("\t")[0]) * 1024;
}

/** The largest packages under a node_modules folder (scoped ones by their full name). */
async function largest(nodeModules: string, n: number): Promise<Array<[string, number]>> {
  const names = readdirSync(nodeModules).flatMap((d) =>
    d.startsWith("@")
      ? readdirSync(join(nodeModules, d)).map((s) => `${d}/${s}`)
      : d.startsWith(".")
        ? []
        : [d],
  );
  const sizes = await Promise.all(
    names.map(async (p) => [p, await du(join(nodeModules, p))] as [string, number]),
  );
  return sizes.sort((a, b) => b[1] - a[1]).slice(0, n);
}

/** Wall time of one `polar ARGS` run, seconds (throws when it exits non-zero). */
async function timed(bin: string, args: string[], cwd: string): Promise<number> {
  const t0 = performance.now();
  await run(bin, args, { cwd });
  return (performance.now() - t0) / 1000;
}

const root = mkdtempSync(join(tmpdir(), "polar-bench-install-"));
const outside = join(root, "empty");
mkdirSync(outside);
const loadStart = load();
let packWork: string | undefined;
try {
  const t0 = performance.now();
  const tgz = await packGateway();
  packWork = dirname(dirname(tgz));
  const packSeconds = (performance.now() - t0) / 1000;
  mkdirSync(join(root, "p1"));
  const first = await installPacked(tgz, join(root, "p1"));
  const prefix = join(root, "p2");
  mkdirSync(prefix);
  const warm = await installPacked(tgz, prefix);
  const installed = await du(prefix);
  const pkgDir = join(prefix, "lib", "node_modules", "@polar-ts", "gateway");
  const top = await largest(join(pkgDir, "node_modules"), 5);
  const distSize = await du(join(pkgDir, "dist"));

  const version: number[] = [];
  const help: number[] = [];
  for (let i = 0; i < 5; i++) {
    version.push(await timed(warm.bin, ["--version"], outside));
    help.push(await timed(warm.bin, ["serve_gateway", "--help"], outside));
  }

  const stack = await startLocalStack({ gateways: 0 });
  const firstLine: number[] = [];
  const connected: number[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const nodeId = `bench-${i}`;
      const started = performance.now();
      const gw = startSupervised(
        nodeId,
        warm.bin,
        [
          "serve_gateway",
          ...["--control-plane", stack.controlPlane.url, "--node-id", nodeId, "--engine", "sglang"],
          ...[
            "--engine-url",
            stack.engineUrl,
            "--model",
            stack.model,
            "--work-root",
            join(root, "work", nodeId),
          ],
        ],
        { cwd: outside, env: { POLAR_GATEWAY_TOKEN: stack.tokens.gateway, NO_COLOR: "1" } },
      );
      try {
        let sawLine = 0;
        for (;;) {
          if (!gw.alive()) throw new Error(`${nodeId} exited:\n${gw.output()}`);
          if (!sawLine && gw.output().length > 0) sawLine = performance.now();
          const res = await fetch(`${stack.controlPlane.url}/v1/gateways`, {
            headers: { authorization: `Bearer ${stack.tokens.trainer}` },
          });
          const body = (await res.json()) as { gateways?: Array<{ node_id: string; connected: boolean }> };
          if (body.gateways?.some((g) => g.node_id === nodeId && g.connected)) {
            const now = performance.now();
            firstLine.push(((sawLine || now) - started) / 1000);
            connected.push((now - started) / 1000);
            break;
          }
          if (performance.now() - started > 60_000) throw new Error(`${nodeId} did not connect in 60 s`);
          await new Promise((r) => setTimeout(r, 25));
        }
      } finally {
        await gw.stop();
      }
    }
  } finally {
    await stack.stop();
  }

  const s = (x: number) => `${x.toFixed(2)} s`;
  console.log(`gateway package install (load average ${loadStart} at start, ${load()} at end)`);
  const rows: Array<[string, string]> = [
    ["build + npm pack", s(packSeconds)],
    ["tarball", mb(statSync(tgz).size)],
    ["installed prefix (du)", `${mb(installed)} (package dist/ ${mb(distSize)})`],
    ["largest dependencies", top.map(([n, b]) => `${n} ${mb(b)}`).join(", ")],
    ["npm install -g, first", s(first.seconds)],
    ["npm install -g, warm npm cache", s(warm.seconds)],
    ["polar --version", `${s(median(version))} (median of 5)`],
    ["polar serve_gateway --help", `${s(median(help))} (median of 5)`],
    ["serve_gateway to first log line", `${s(median(firstLine))} (median of 3, token mode)`],
    ["serve_gateway to connected", `${s(median(connected))} (median of 3, token mode)`],
  ];
  for (const [what, value] of rows) console.log(`  ${what.padEnd(34)}${value}`);
} finally {
  rmSync(root, { recursive: true, force: true });
  // packGateway's scratch folder (package copy, dist/, tarball).
  if (packWork) rmSync(packWork, { recursive: true, force: true });
}
