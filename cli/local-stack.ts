/**
 * The whole system on one machine: control plane (`wrangler dev`), the simulated engine and N
 * gateway agents, each as its own process. Used by `npm run demo` and the end-to-end tests.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ControlPlaneClient } from "./client";
import type { RoleTokens } from "./dev-tokens";
import { freePort } from "./ports";
import { type PolarProcess, spawnPolar, waitForProcessHttp } from "./processes";
import { type ControlPlaneDev, startControlPlaneDev } from "./wrangler-dev";

export interface LocalStackOptions {
  gateways?: number;
  model?: string;
  /** Extra `serve_gateway` flags for every gateway. */
  gatewayArgs?: string[];
  /**
   * The queue of gateway i (`--queue`; the control plane's `default` where not given): gateways on
   * separate queues have separate fences, so runs that move one queue's version do not relabel the
   * other's turns.
   */
  gatewayQueues?: string[];
  /** Extra `sim-engine` flags (its latency model: `--decode-tps`, `--max-running-requests`, …). */
  engineArgs?: string[];
  /**
   * The gateways' `--engine`: `sglang-openai` (default: SGLang's chat endpoint) or `sglang` (token
   * mode: the proxy renders the template and calls the sim's `/generate` with ids).
   */
  engine?: "sglang" | "sglang-openai" | "vllm";
  /** Keep the temporary folder (state, workspaces) after stop. */
  keepState?: boolean;
  /** Role tokens; fresh random ones when omitted (a missing `viewer` gets a fresh one too). */
  tokens?: RoleTokens;
  /** Extra Worker variables of the control plane (`startControlPlaneDev`'s `vars`). */
  controlPlaneVars?: Record<string, string>;
  /** The control plane's `POLAR_DEV_MODE=1` (default true; see `startControlPlaneDev`). */
  devMode?: boolean;
  /**
   * Starts the engine on `port` instead of the simulated one (e.g. `referenceEngineProcess` of
   * `cli/reference-engine.ts`); it must answer `GET /health` there. It may be asynchronous (work
   * before the process starts runs while the control plane starts).
   */
  startEngine?: (port: number) => PolarProcess | Promise<PolarProcess>;
}

export interface LocalStack {
  root: string;
  tokens: Required<RoleTokens>;
  controlPlane: ControlPlaneDev;
  engineUrl: string;
  engine: PolarProcess;
  gateways: PolarProcess[];
  client: ControlPlaneClient;
  model: string;
  stop(): Promise<void>;
}

/** How long a started gateway may take to connect before the stack gives up. */
const GATEWAY_CONNECT_TIMEOUT_MS = 120_000;

/**
 * Waits until `GET /v1/gateways` lists each of `gateways` (`node-0`, `node-1`, … by position) as
 * connected; throws with a gateway's output if it exits first or the time runs out.
 */
async function waitForGateways(url: string, token: string, gateways: PolarProcess[]): Promise<void> {
  const deadline = Date.now() + GATEWAY_CONNECT_TIMEOUT_MS;
  const wanted = gateways.map((_, i) => `node-${i}`);
  for (;;) {
    const connected = new Set<string>();
    try {
      const res = await fetch(new URL("/v1/gateways", url), {
        headers: { authorization: `Bearer ${token}` },
      });
      if (res.ok) {
        const body = (await res.json()) as { gateways?: Array<{ node_id: string; connected: boolean }> };
        for (const g of body.gateways ?? []) if (g.connected) connected.add(g.node_id);
      }
    } catch {
      // The control plane answered /health already; a failed listing is retried until the deadline.
    }
    const missing = wanted.filter((id) => !connected.has(id));
    if (missing.length === 0) return;
    const dead = gateways.find((g, i) => missing.includes(wanted[i]!) && !g.alive());
    const stuck = dead ?? (Date.now() > deadline ? gateways[wanted.indexOf(missing[0]!)] : undefined);
    if (stuck) {
      const why = dead
        ? "exited before it connected"
        : `did not connect within ${GATEWAY_CONNECT_TIMEOUT_MS / 1000} s`;
      throw new Error(`${stuck.name} ${why}\n--- output ---\n${stuck.output().slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Starts everything on loopback with fresh random tokens and a temporary state folder.
 *
 * @example
 * ```ts
 * const stack = await startLocalStack({ gateways: 1 });
 * const { batch_id } = await stack.client.submit(batch);
 * await stack.stop();
 * ```
 */
export async function startLocalStack(opts: LocalStackOptions = {}): Promise<LocalStack> {
  const root = mkdtempSync(join(tmpdir(), "polar-stack-"));
  const tokens: Required<RoleTokens> = {
    viewer: `viewer-${randomBytes(16).toString("hex")}`,
    ...(opts.tokens ?? {
      trainer: `trainer-${randomBytes(16).toString("hex")}`,
      gateway: `gateway-${randomBytes(16).toString("hex")}`,
      admin: `admin-${randomBytes(16).toString("hex")}`,
    }),
  };
  const model = opts.model ?? "Qwen/Qwen3-0.6B";
  const started: Array<{ stop(): Promise<void> }> = [];
  const stopAll = async () => {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    if (!opts.keepState) rmSync(root, { recursive: true, force: true });
  };
  try {
    const enginePort = await freePort();
    // The engine (which may first have to prepare, e.g. write a checkpoint) and the control plane
    // start together; each is pushed to `started` as soon as it exists, so a failure stops both.
    const engineReady = (async () => {
      const engine = await (opts.startEngine
        ? opts.startEngine(enginePort)
        : spawnPolar("sim-engine", [
            "sim-engine",
            "--port",
            String(enginePort),
            "--model",
            model,
            ...(opts.engineArgs ?? []),
          ]));
      started.push(engine);
      await waitForProcessHttp(engine, `http://127.0.0.1:${enginePort}/health`, 120_000);
      return engine;
    })();
    const controlPlaneReady = startControlPlaneDev({
      persistTo: join(root, "state"),
      tokens,
      ...(opts.controlPlaneVars ? { vars: opts.controlPlaneVars } : {}),
      ...(opts.devMode === undefined ? {} : { devMode: opts.devMode }),
    }).then((cp) => {
      started.push(cp);
      return cp;
    });
    const settled = await Promise.allSettled([controlPlaneReady, engineReady]);
    const failed = settled.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const [controlPlane, engine] = [await controlPlaneReady, await engineReady];
    const engineUrl = `http://127.0.0.1:${enginePort}`;
    const gateways: PolarProcess[] = [];
    for (let i = 0; i < (opts.gateways ?? 1); i++) {
      const nodeId = `node-${i}`;
      const queue = opts.gatewayQueues?.[i];
      const gw = spawnPolar(
        `gateway ${nodeId}`,
        [
          "serve_gateway",
          "--control-plane",
          controlPlane.url,
          "--node-id",
          nodeId,
          "--engine",
          opts.engine ?? "sglang-openai",
          "--engine-url",
          engineUrl,
          "--model",
          model,
          "--work-root",
          join(root, "work", nodeId),
          ...(queue ? ["--queue", queue] : []),
          ...(opts.gatewayArgs ?? []),
        ],
        { POLAR_GATEWAY_TOKEN: tokens.gateway },
      );
      started.push(gw);
      gateways.push(gw);
    }
    // A gateway process that has started has not yet said hello: callers (the fence routes above
    // all, which list connected gateways only) must find every gateway connected on return.
    await waitForGateways(controlPlane.url, tokens.trainer, gateways);
    return {
      root,
      tokens,
      controlPlane,
      engineUrl,
      engine,
      gateways,
      client: new ControlPlaneClient(controlPlane.url, tokens.trainer),
      model,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
