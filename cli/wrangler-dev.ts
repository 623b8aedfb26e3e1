/**
 * Runs the control plane locally: `wrangler dev` on the repository's `wrangler.toml`, as a child
 * process, with the role tokens injected as variables and state persisted to a folder.
 *
 * The same Worker and Durable Object code runs here as in a deployment; only the runtime host
 * differs (workerd started by wrangler instead of Cloudflare's edge).
 *
 * @module
 */
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type SupervisedProcess, startSupervised } from "./child-process";
import type { RoleTokens } from "./dev-tokens";
import { freePort, waitForHttp } from "./ports";
import { ensureWebBuild } from "./web-build";

/** Repository root (the folder holding `wrangler.toml`). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

export interface ControlPlaneDevOptions {
  /** Port to listen on; a free one when omitted. */
  port?: number;
  /** Folder for Durable Object state (`--persist-to`); survives restarts. */
  persistTo: string;
  tokens: RoleTokens;
  /** Forward wrangler's output to this process's stdout/stderr (for `polar dev`). */
  inheritOutput?: boolean;
  /** How long to wait for `/health` (wrangler bundles the Worker first). */
  readyTimeoutMs?: number;
  /** Extra Worker variables, e.g. `POLAR_LEASE_GRACE_SECONDS` for short grace periods in tests. */
  vars?: Record<string, string>;
  /**
   * Set `POLAR_DEV_MODE=1` (default true): callbacks to loopback/private hosts are allowed. False
   * runs the Worker as deployed (e.g. with `POLAR_ALLOW_PRIVATE_CALLBACKS` in `vars` instead).
   */
  devMode?: boolean;
}

/**
 * The running `wrangler dev`: its URL plus process control (`kill()` takes workerd down too, and
 * so does the death of this process).
 */
export interface ControlPlaneDev extends SupervisedProcess {
  url: string;
  port: number;
}

/**
 * Starts `wrangler dev` and waits until `GET /health` answers. The dashboard it serves as static
 * assets is built first when `web/dist` is missing or stale (once, across parallel callers).
 *
 * @example
 * ```ts
 * const cp = await startControlPlaneDev({ persistTo: ".polar/state", tokens: DEV_TOKENS });
 * console.log(cp.url); // http://127.0.0.1:PORT
 * await cp.stop();
 * ```
 */
export async function startControlPlaneDev(opts: ControlPlaneDevOptions): Promise<ControlPlaneDev> {
  await ensureWebBuild();
  const port = opts.port ?? (await freePort());
  mkdirSync(opts.persistTo, { recursive: true });
  const args = [
    "dev",
    "--config",
    join(REPO_ROOT, "wrangler.toml"),
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--persist-to",
    opts.persistTo,
    "--inspector-port",
    "0",
    "--show-interactive-dev-session=false",
    "--log-level",
    opts.inheritOutput ? "info" : "warn",
    "--var",
    `POLAR_TRAINER_TOKEN:${opts.tokens.trainer}`,
    "--var",
    `POLAR_GATEWAY_TOKEN:${opts.tokens.gateway}`,
    "--var",
    `POLAR_ADMIN_TOKEN:${opts.tokens.admin}`,
    ...(opts.tokens.viewer ? ["--var", `POLAR_VIEWER_TOKEN:${opts.tokens.viewer}`] : []),
    // Local development only: callbacks to loopback/private hosts (a trainer on this machine).
    ...(opts.devMode === false ? [] : ["--var", "POLAR_DEV_MODE:1"]),
    ...Object.entries(opts.vars ?? {}).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
  ];
  // Under the reaper: wrangler and its workerd run in a process group of their own, and the whole
  // group goes down with this process, however it ends (cli/child-process.ts).
  const proc = startSupervised("wrangler dev", join(REPO_ROOT, "node_modules", ".bin", "wrangler"), args, {
    cwd: REPO_ROOT,
    stdio: opts.inheritOutput ? "inherit" : "pipe",
    outputLimit: 20_000,
    // wrangler would otherwise try to reach the network for metrics and update checks.
    // CLOUDFLARE_CF_FETCH_ENABLED=false: miniflare would fetch the `Request.cf` object from
    // Cloudflare at start (up to 3 s, then a placeholder) where the control plane reads no cf field.
    env: {
      WRANGLER_SEND_METRICS: "false",
      WRANGLER_HIDE_BANNER: "true",
      CI: "true",
      NO_COLOR: "1",
      CLOUDFLARE_CF_FETCH_ENABLED: "false",
    },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/health`, opts.readyTimeoutMs ?? 60_000, proc.alive);
  } catch (err) {
    await proc.kill();
    throw new Error(`wrangler dev did not start: ${(err as Error).message}\n${proc.output()}`);
  }
  return { ...proc, url, port };
}
