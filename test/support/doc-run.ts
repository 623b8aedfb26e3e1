/**
 * The doc test's `run` method: each command of a block runs for real, in `bash`, from the
 * repository root, one after the other, against a local stack — the doc test's shared one (control
 * plane via wrangler dev with the documented dev tokens, the simulated engine, a second sim engine
 * as a replica, one gateway), or the servers the block starts itself (`npx polar dev`,
 * `npx polar sim-engine`). The environment has no `POLAR_*` variable: a command gets only what the
 * docs give it (`VAR=… cmd`, `export VAR=…` lines, which carry to the block's next commands).
 *
 * Servers (`polar dev`, `polar stack`, `serve_gateway`, `sim-engine`, `proxy`, or any line ending in `&`) start in
 * the background, under the reaper; the block goes on once each is ready (its `/health` answers;
 * a gateway: the control plane counts one more connected gateway) and they are stopped when the
 * block ends. Any other command must exit 0 within its time limit.
 *
 * What differs from the page is only what {@link PLACEHOLDERS} lists, applied in order.
 *
 * @module
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type SupervisedProcess, startSupervised } from "../../cli/child-process";
import type { RoleTokens } from "../../cli/dev-tokens";
import { freePort, waitForHttp } from "../../cli/ports";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { DocCommand } from "./doc-blocks";
import { splitEnv, words } from "./doc-checks";

/** The servers and values a block's commands are pointed at. */
export interface RunTarget {
  cpPort: number;
  enginePort: number;
  /** A second engine, for replica examples (`--engine-url A,B`). */
  engine2Port: number;
  /** Free ports of this block: a standalone proxy's, a topology's operator server's. */
  proxyPort: number;
  opsPort: number;
  tokens: RoleTokens;
  /** A scratch folder of this block. */
  tmp: string;
}

/** The doc test's shared stack, as far as blocks see it. */
export type SharedStack = Pick<RunTarget, "cpPort" | "enginePort" | "engine2Port" | "tokens">;

/** One placeholder rule: what the docs write, what the test runs instead, and why. */
export interface Placeholder {
  docs: string;
  runs: string;
  apply(text: string, t: RunTarget): string;
}

const TOKEN_ROLE: Record<string, keyof RoleTokens> = {
  POLAR_TRAINER_TOKEN: "trainer",
  POLAR_GATEWAY_TOKEN: "gateway",
  POLAR_ADMIN_TOKEN: "admin",
};

/**
 * Bash that makes pip use the indexes its config lists (when it lists any) as its only ones, so it
 * never waits on an index this machine cannot reach; .ci/run does the same.
 */
const PIP_CONFIGURED_INDEXES =
  'idx=$(python3 -m pip config get global.extra-index-url 2>/dev/null | xargs); if [ -n "$idx" ]; then export PIP_INDEX_URL="$(echo $idx | cut -d" " -f1)" PIP_EXTRA_INDEX_URL="$(echo $idx | cut -s -d" " -f2-)"; fi;';

/** The `polar` command as the doc test runs it: node and the repository's bin (no npm start-up). */
export const POLAR_BIN = `node '${join(REPO_ROOT, "bin", "polar.mjs")}'`;

/** Placeholders of the docs and what they become in the test (the single table). */
export const PLACEHOLDERS: Placeholder[] = [
  {
    docs: "POLAR_TRAINER_TOKEN=… (also ... and with export; the same for GATEWAY and ADMIN)",
    runs: "that role's token of the control plane (the documented dev tokens)",
    apply: (s, t) =>
      s.replace(
        /\b(POLAR_(?:TRAINER|GATEWAY|ADMIN)_TOKEN)=(?:…|\.\.\.)/g,
        (_m, name: string) => `${name}=${t.tokens[TOKEN_ROLE[name]!]}`,
      ),
  },
  {
    docs: "https://… (a deployed control plane's URL)",
    runs: "the control plane's URL",
    apply: (s, t) => s.replace(/https?:\/\/(?:…|\.\.\.)/g, `http://127.0.0.1:${t.cpPort}`),
  },
  {
    docs: "port 8787 (127.0.0.1:8787, --port 8787)",
    runs: "the control plane's port: the shared stack's, or a free one when the block starts `polar dev`",
    apply: (s, t) => s.replace(/(127\.0\.0\.1:|localhost:|--port )8787\b/g, `$1${t.cpPort}`),
  },
  {
    docs: "port 30000 / 30001 (an SGLang engine and a second replica)",
    runs: "the sim engine's port (the block's own when it starts one) / the second sim engine's",
    apply: (s, t) =>
      s
        .replace(/(127\.0\.0\.1:|--port )30000\b/g, `$1${t.enginePort}`)
        .replace(/(127\.0\.0\.1:|--port )30001\b/g, `$1${t.engine2Port}`),
  },
  {
    docs: "polar dev without --port / --persist-to (8787, .polar/state); --persist-to .polar/state",
    runs: "--port of the block's control plane, --persist-to a scratch folder",
    apply: (s, t) => {
      if (!/\bpolar dev\b/.test(s)) return s;
      let out = s.replace(/--persist-to \.polar\/state\b/, `--persist-to ${t.tmp}/state`);
      if (!/--port\b/.test(out)) out = out.replace(/\bpolar dev\b/, `polar dev --port ${t.cpPort}`);
      if (!/--persist-to\b/.test(out))
        out = out.replace(/\bpolar dev\b/, `polar dev --persist-to ${t.tmp}/state`);
      return out;
    },
  },
  {
    docs: "polar stack without --port (8787)",
    runs: "--port of the block's own control plane (a free one)",
    apply: (s, t) =>
      /\bpolar stack\b/.test(s) && !/--port\b/.test(s)
        ? s.replace(/\bpolar stack\b/, `polar stack --port ${t.cpPort}`)
        : s,
  },
  {
    docs: "polar proxy --port 4000",
    runs: "a free port",
    apply: (s, t) => (/\bpolar proxy\b/.test(s) ? s.replace(/--port 4000\b/, `--port ${t.proxyPort}`) : s),
  },
  {
    docs: "-c topology.yaml, -c /etc/polar/topology.yaml (the operator's own file)",
    runs: "a copy of examples/topology.yaml; like every -c file, with the ports above, work_root in scratch, port 9100 free",
    apply: (s, t) =>
      s.replace(
        /(-c|--config) (\S+)/g,
        (_m, flag: string, file: string) => `${flag} ${topologyCopy(file, t)}`,
      ),
  },
  {
    docs: "/opt/polar/harnesses (an operator's harness folder)",
    runs: "$PWD/.polar/harnesses (where scripts/install-harnesses.sh installs by default)",
    apply: (s) => s.replaceAll("/opt/polar/harnesses", "$PWD/.polar/harnesses"),
  },
  {
    docs: "pip install PATH (into the reader's Python environment)",
    runs: "python3 -m pip install --target <scratch>/site PATH, pip's configured indexes its only ones (as .ci/run)",
    apply: (s, t) =>
      s.replace(
        /^pip install\b/,
        `${PIP_CONFIGURED_INDEXES} python3 -m pip install --disable-pip-version-check --target ${t.tmp}/site`,
      ),
  },
  {
    docs: "--instances verified.jsonl, --out tasks.yaml (SWE-bench Verified's export, the generated tasks)",
    runs: "examples/swebench_verified/instances.jsonl (three real rows), a file in scratch",
    apply: (s, t) =>
      s
        .replace(/--instances verified\.jsonl\b/, "--instances examples/swebench_verified/instances.jsonl")
        .replace(/--out tasks\.yaml\b/, `--out ${t.tmp}/tasks.yaml`),
  },
  {
    // Last: the rules above match the documented `polar dev`, `polar stack`… forms.
    docs: "npx polar (npm runs this repository's own bin, package.json `bin`)",
    runs: "node <repository>/bin/polar.mjs: the same file, without npm's start-up of about a second a call (test/docs/commands.test.ts checks once that `npx polar` reaches it)",
    apply: (s) => s.replace(/(^|[\s;&|(`])npx polar\b/g, `$1${POLAR_BIN}`),
  },
];

/** A topology file for the block: `file` (or examples/topology.yaml for the operator's own). */
function topologyCopy(file: string, t: RunTarget): string {
  const source = file === "topology.yaml" || file.startsWith("/etc/") ? "examples/topology.yaml" : file;
  const text = readFileSync(join(REPO_ROOT, source), "utf8")
    .replace(/127\.0\.0\.1:30000\b/g, `127.0.0.1:${t.enginePort}`)
    .replace(/127\.0\.0\.1:8787\b/g, `127.0.0.1:${t.cpPort}`)
    .replace(/^(\s*work_root:)\s*\S+/m, `$1 ${t.tmp}/gateway-work`)
    .replace(/^(\s*port:)\s*9100\b/m, `$1 ${t.opsPort}`);
  const out = join(t.tmp, `topology-${source.replaceAll("/", "_")}`);
  writeFileSync(out, text);
  return out;
}

/** What the test runs for a documented command. */
export function substitute(text: string, t: RunTarget): string {
  return PLACEHOLDERS.reduce((s, p) => p.apply(s, t), text);
}

/** The polar subcommand of a command (`dev`, `serve_gateway`, …), or null. */
export function polarSubcommand(text: string): string | null {
  const { rest } = splitEnv(words(text));
  const i =
    rest[0] === "npx" && rest[1] === "polar"
      ? 2
      : rest[0] === "polar"
        ? 1
        : rest[0] === "node" && rest[1]?.endsWith("/bin/polar.mjs")
          ? 2
          : -1;
  return i < 0 ? null : (rest[i] ?? null);
}

const SERVERS = new Set(["dev", "stack", "serve_gateway", "serve-gateway", "sim-engine", "proxy"]);

/** The value of `--flag` in a command, or null. */
function flag(text: string, name: string): string | null {
  const ws = words(text);
  const i = ws.indexOf(name);
  return i < 0 ? null : (ws[i + 1] ?? null);
}

/** The environment of a block: this process's, without any POLAR_* or test-runner variable. */
function cleanEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("POLAR_") && !k.startsWith("VITEST") && k !== "NODE_ENV") env[k] = v;
  return env;
}

async function connectedGateways(t: RunTarget): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${t.cpPort}/v1/gateways`, {
      headers: { authorization: `Bearer ${t.tokens.trainer}` },
    });
    if (!res.ok) return -1;
    const body = (await res.json()) as { gateways: Array<{ connected: boolean }> };
    return body.gateways.filter((g) => g.connected).length;
  } catch {
    return -1;
  }
}

/** Waits until a background server is ready; throws with its output if it dies or times out. */
async function waitReady(
  sub: string | null,
  text: string,
  proc: SupervisedProcess,
  t: RunTarget,
  before: number,
) {
  const fail = (why: string) => new Error(`${why}\n--- output ---\n${proc.output().slice(-4000)}`);
  const deadline = Date.now() + 120_000;
  if (sub === "serve_gateway" || sub === "serve-gateway") {
    while ((await connectedGateways(t)) <= before) {
      if (!proc.alive()) throw fail("the gateway exited before it connected");
      if (Date.now() > deadline) throw fail("the gateway did not connect within 120 s");
      await new Promise((r) => setTimeout(r, 250));
    }
    return;
  }
  if (sub === "stack") {
    // Ready once its gateway is connected to its control plane (what the stack waits for too).
    while ((await connectedGateways(t)) < 1) {
      if (!proc.alive()) throw fail("polar stack exited before its gateway connected");
      if (Date.now() > deadline) throw fail("polar stack's gateway did not connect within 120 s");
      await new Promise((r) => setTimeout(r, 250));
    }
    return;
  }
  const defaults: Record<string, string> = { dev: "8787", "sim-engine": "30000", proxy: "4000" };
  const port = flag(text, "--port") ?? (sub ? defaults[sub] : undefined);
  if (!port) return; // a plain `cmd &`: started, nothing to wait for
  try {
    await waitForHttp(`http://127.0.0.1:${port}/health`, 120_000, proc.alive);
  } catch (err) {
    throw fail(`not ready on port ${port}: ${(err as Error).message}`);
  }
}

/** The time a foreground command may take: waiting for a batch or a demo takes longer. */
function limitMs(text: string): number {
  return /--wait\b|npm run demo|polar(?:\.mjs')? conformance/.test(text) ? 240_000 : 120_000;
}

/** One command's outcome, for the test's report. */
export interface RunReport {
  command: DocCommand;
  ran: string;
  note: string;
}

/**
 * Runs the `run` commands of one block in order; throws naming the command that failed, with what
 * it printed. Background servers are stopped before it returns.
 *
 * @example
 * ```ts
 * await runBlock(commands, shared);
 * ```
 */
export async function runBlock(commands: DocCommand[], shared: SharedStack): Promise<RunReport[]> {
  const tmp = mkdtempSync(join(tmpdir(), "polar-doc-"));
  // `polar stack` starts a control plane of its own too (and an engine and a gateway).
  const ownCp = commands.some((c) => ["dev", "stack"].includes(polarSubcommand(c.text) ?? ""));
  const ownEngine = commands.some((c) => polarSubcommand(c.text) === "sim-engine");
  const t: RunTarget = {
    ...shared,
    cpPort: ownCp ? await freePort() : shared.cpPort,
    enginePort: ownEngine ? await freePort() : shared.enginePort,
    proxyPort: await freePort(),
    opsPort: await freePort(),
    tmp,
  };
  let env = cleanEnv();
  const servers: SupervisedProcess[] = [];
  const reports: RunReport[] = [];
  try {
    for (const c of commands) {
      // Each command's seconds go into its report line: the doc test's summary shows what costs.
      const t0 = Date.now();
      const took = () => ` (${((Date.now() - t0) / 1000).toFixed(1)} s)`;
      const ran = substitute(c.text, t);
      const where = `${c.block.file}:${c.line}: \`${c.text}\``;
      if (/^export\s/.test(ran)) {
        env = await exported(ran, env);
        reports.push({ command: c, ran, note: `exported into the block's environment${took()}` });
        continue;
      }
      const sub = polarSubcommand(ran);
      if (c.background || (sub !== null && SERVERS.has(sub))) {
        const before = sub === "serve_gateway" || sub === "serve-gateway" ? await connectedGateways(t) : 0;
        const proc = startSupervised(`doc: ${c.text}`, "bash", ["-c", ran], {
          cwd: REPO_ROOT,
          env,
          extendEnv: false,
        });
        servers.push(proc);
        try {
          await waitReady(sub, ran, proc, t, before);
        } catch (err) {
          throw new Error(`${where} (ran: ${ran}): ${(err as Error).message}`);
        }
        reports.push({
          command: c,
          ran,
          note: `server started and ready${took()}, stopped at the end of its block`,
        });
        continue;
      }
      const proc = startSupervised(`doc: ${c.text}`, "bash", ["-c", `set -o pipefail; ${ran}`], {
        cwd: REPO_ROOT,
        env,
        extendEnv: false,
      });
      const timer = setTimeout(() => void proc.kill(), limitMs(ran));
      const { code, signal } = await proc.exited;
      clearTimeout(timer);
      if (code !== 0)
        throw new Error(
          `${where} failed (exit ${code ?? signal}; ran: ${ran})\n--- output ---\n${proc.output().slice(-6000)}`,
        );
      reports.push({ command: c, ran, note: `exit 0${took()}${outcomeNote(ran, proc.output(), where)}` });
    }
  } finally {
    await Promise.allSettled(servers.reverse().map((s) => s.stop()));
    rmSync(tmp, { recursive: true, force: true });
  }
  return reports;
}

/**
 * `polar submit … --wait` (table output) must also see every session of its batch end COMPLETED:
 * exit 0 alone would pass a batch whose sessions all failed. Returns what to report.
 */
function outcomeNote(ran: string, output: string, where: string): string {
  if (polarSubcommand(ran) !== "submit" || !/--wait\b/.test(ran) || /--json\b/.test(ran)) return "";
  const queued = Number(/: (\d+) sessions queued/.exec(output)?.[1] ?? Number.NaN);
  const rows = output.split("\n").filter((l) => /\s(COMPLETED|ERROR|TIMEOUT|CANCELLED)\s/.test(l));
  const completed = rows.filter((l) => /\sCOMPLETED\s/.test(l)).length;
  if (!(queued > 0) || completed !== queued)
    throw new Error(
      `${where}: ${completed} of ${queued} sessions COMPLETED\n--- output ---\n${output.slice(-6000)}`,
    );
  // The table's 4th column: traces per session (1 each = one trajectory per session).
  const traces = rows.map((l) => l.trim().split(/\s+/)[3]).join(" ");
  return `, ${completed}/${queued} sessions COMPLETED, traces ${traces}`;
}

/** The environment after an `export …` line, computed by bash itself (`$PWD` and all). */
async function exported(line: string, env: Record<string, string>): Promise<Record<string, string>> {
  const proc = startSupervised("export", "bash", ["-c", `${line} && env -0`], {
    cwd: REPO_ROOT,
    env,
    extendEnv: false,
  });
  const { code } = await proc.exited;
  if (code !== 0) throw new Error(`\`${line}\` failed: ${proc.output()}`);
  const next: Record<string, string> = {};
  for (const entry of proc.output().split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) next[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return next;
}
