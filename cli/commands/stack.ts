/**
 * `polar stack`: a trainer's whole local stack in one command — the control plane (`wrangler dev`),
 * an engine (the simulated SGLang engine, or the CPU reference engine) and one gateway in token
 * mode, working in the repository root so task files' `upload_file` sources resolve — then the
 * `export` lines a trainer pastes, and everything stays up until SIGINT/SIGTERM/SIGHUP.
 *
 * @module
 */
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { tokensFromEnv } from "../dev-tokens";
import { startLocalStack, tinyReferenceEngine } from "../local-stack";
import { freePort } from "../ports";
import { ensureTorch } from "../reference-engine";
import { requireControlPlaneToolchain } from "../toolchain";
import { UsageError } from "../usage-error";
import { REPO_ROOT } from "../wrangler-dev";
import { dashboardLink } from "./dashboard";

export interface StackOptions {
  engine: "sim" | "reference";
  /** The control plane's port (0 = any free one). */
  port: number;
  /** The engine's port (0 = any free one). */
  enginePort: number;
  /** The gateway's `/health` and `/metrics` port (0 = any free one). */
  gatewayPort: number;
  /** Folder for the control plane's state and the gateway's work (kept); a temporary one otherwise. */
  state?: string;
  /** The gateway's RUN workers (`serve_gateway --max-run`). */
  maxRun?: number;
  json: boolean;
}

/** What `polar stack` prints (`--json`: this object as one line). */
export interface StackInfo {
  url: string;
  dashboard: string;
  tokens: { trainer: string; admin: string; viewer: string; gateway: string };
  engine: "sim" | "reference";
  engine_url: string;
  model: string;
  /** The reference engine's initial checkpoint (what a trainer loads and updates); sim: null. */
  model_path: string | null;
  gateways: string[];
  gateway_url: string;
  /** Where the gateway runs: `upload_file` sources of task files resolve against it. */
  gateway_cwd: string;
  state: string;
}

/** The model the reference engine's tiny checkpoint is served as. */
const REFERENCE_MODEL = "polar-reference-tiny";
/** The reference engine's context window (the gateway is told the same). */
const REFERENCE_CONTEXT = 4096;

/**
 * Throws a usage error naming `flag` when `port` (non-zero) cannot be bound on 127.0.0.1 — checked
 * before anything starts, so a busy port is one clear line rather than a child's stack trace.
 *
 * @example
 * ```ts
 * await requirePortFree(8787, "--port"); // throws "--port 8787: 127.0.0.1:8787 is in use …" if taken
 * ```
 */
export async function requirePortFree(port: number, flag: string): Promise<void> {
  if (port === 0) return;
  const problem = await new Promise<string | null>((done) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    server.listen(port, "127.0.0.1", () => server.close(() => done(null)));
  });
  if (problem === "EADDRINUSE")
    throw new UsageError(
      `${flag} ${port}: 127.0.0.1:${port} is in use (another polar dev or stack?); pass another port, or ${flag} 0 for a free one`,
    );
  if (problem) throw new UsageError(`${flag} ${port}: cannot listen on 127.0.0.1:${port} (${problem})`);
}

/**
 * The lines a trainer needs, as shell: `export` lines for what the CLI and `polar_trainer` read,
 * `#` comments for the rest (so the whole block can be pasted).
 *
 * @example
 * ```ts
 * stackLines(info)[0]; // "export POLAR_URL=http://127.0.0.1:8787"
 * ```
 */
export function stackLines(info: StackInfo): string[] {
  return [
    `export POLAR_URL=${info.url}`,
    `export POLAR_TRAINER_TOKEN=${info.tokens.trainer}`,
    `export POLAR_ADMIN_TOKEN=${info.tokens.admin}`,
    `export POLAR_VIEWER_TOKEN=${info.tokens.viewer}`,
    `# dashboard: ${info.dashboard}`,
    `# engine (${info.engine}): ${info.engine_url}, model ${info.model}${info.model_path ? `, checkpoint ${info.model_path}` : ""}`,
    `# gateway ${info.gateways.join(", ")} (token mode): ${info.gateway_url}/metrics, upload_file sources resolve against ${info.gateway_cwd}`,
    `# state: ${info.state}`,
  ];
}

/**
 * Starts the stack, prints how to reach it, and runs until a signal stops it (exit 0). The children
 * run under reapers, so were this process killed outright they would go down with it too.
 *
 * @example
 * ```ts
 * await runStack({ engine: "sim", port: 8787, enginePort: 0, gatewayPort: 0, json: false });
 * ```
 */
export async function runStack(opts: StackOptions): Promise<void> {
  requireControlPlaneToolchain("polar stack");
  await requirePortFree(opts.port, "--port");
  await requirePortFree(opts.enginePort, "--engine-port");
  await requirePortFree(opts.gatewayPort, "--gateway-port");
  if (
    new Set([opts.port, opts.enginePort, opts.gatewayPort].filter((p) => p !== 0)).size !==
    [opts.port, opts.enginePort, opts.gatewayPort].filter((p) => p !== 0).length
  )
    throw new UsageError("--port, --engine-port and --gateway-port must differ");
  const log = (line: string) => (opts.json ? console.error(line) : console.log(line));
  const tokens = tokensFromEnv(process.env);
  const root = opts.state ? resolve(opts.state) : undefined;
  // A port of our choosing rather than the gateway's own pick, so it can be printed.
  const gatewayPort = opts.gatewayPort || (await freePort());
  log(
    `Starting the control plane (wrangler dev), the ${opts.engine === "sim" ? "simulated SGLang" : "reference"} engine and a gateway in token mode…`,
  );
  const python = opts.engine === "reference" ? ensureTorch(log) : undefined;
  // The checkpoint lives in the stack's folder, which startLocalStack hands to startEngine.
  let modelPath: string | null = null;
  const stack = await startLocalStack({
    gateways: 1,
    engine: "sglang",
    tokens,
    ...(root ? { root } : {}),
    ...(opts.port ? { controlPlanePort: opts.port } : {}),
    ...(opts.enginePort ? { enginePort: opts.enginePort } : {}),
    ...(python
      ? {
          model: REFERENCE_MODEL,
          startEngine: (port: number, folder: string) => {
            modelPath = join(folder, "weights", "v0");
            return tinyReferenceEngine({
              python,
              modelDir: modelPath,
              init: { contextLength: REFERENCE_CONTEXT },
            })(port);
          },
        }
      : {}),
    gatewayArgs: [
      "--http-port",
      String(gatewayPort),
      ...(opts.maxRun ? ["--max-run", String(opts.maxRun)] : []),
      ...(python ? ["--context-length", String(REFERENCE_CONTEXT)] : []),
    ],
  });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    log("stopping the stack…");
    await stack.stop();
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(signal, () => void stop());
  const info: StackInfo = {
    url: stack.controlPlane.url,
    dashboard: dashboardLink(stack.controlPlane.url, { POLAR_VIEWER_TOKEN: tokens.viewer }).url,
    tokens: { trainer: tokens.trainer, admin: tokens.admin, viewer: tokens.viewer, gateway: tokens.gateway },
    engine: opts.engine,
    engine_url: stack.engineUrl,
    model: stack.model,
    model_path: modelPath,
    gateways: stack.gateways.map((_, i) => `node-${i}`),
    gateway_url: `http://127.0.0.1:${gatewayPort}`,
    gateway_cwd: REPO_ROOT,
    state: stack.root,
  };
  if (opts.json) console.log(JSON.stringify(info));
  else
    console.log(
      `\nPolar-TS local stack is up. For a trainer:\n\n${stackLines(info).join("\n")}\n\nCtrl-C stops it.`,
    );
  // Stay up while the parts run: a part that dies takes the stack down with a message.
  const parts = [stack.controlPlane, stack.engine, ...stack.gateways];
  const dead = await Promise.race(parts.map((p) => p.exited.then(() => p)));
  if (stopping) return;
  console.error(`polar stack: ${dead.name} exited; stopping the rest\n${dead.output().slice(-3000)}`);
  stopping = true;
  await stack.stop();
  process.exit(1);
}
