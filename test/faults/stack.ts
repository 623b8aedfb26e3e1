/**
 * The fault matrix's stack: the control plane under `wrangler dev --persist-to` on a fixed port (so
 * a SIGKILLed one comes back where the gateways dial), the simulated engine, and N gateway
 * processes, each of which can be SIGKILLed and started again on its own work root. Gateway
 * `flaky` dials through a TCP fault proxy; gateway `skewed` runs with its wall clock moved by
 * minutes (libfaketime, where installed). Test-only.
 *
 * @module
 */
import { join } from "node:path";
import type { RoleTokens } from "../../cli/dev-tokens";
import { freePort } from "../../cli/ports";
import { type PolarProcess, spawnPolar, waitForProcessHttp } from "../../cli/processes";
import { type ControlPlaneDev, REPO_ROOT, startControlPlaneDev } from "../../cli/wrangler-dev";
import { gatewayShard, shardsOf } from "../../control-plane/queue/shards";
import { FaultProxy } from "../support/fault-proxy";
import { LIBFAKETIME } from "../support/optional-tools";

/** Options of {@link FaultStack.start}. */
export interface FaultStackOptions {
  root: string;
  gateways: number;
  /** RUN workers per gateway. */
  maxRun: number;
  queue: string;
  /** Shards of the queue (`POLAR_QUEUE_SHARDS`); 2 or more exercise loans between shards. */
  shards: number;
  /** The gateway (index) that dials through the fault proxy; null: none. */
  flaky: number | null;
  /** The gateway (index) whose wall clock runs `skewMinutes` ahead; null: none. */
  skewed: number | null;
  skewMinutes: number;
  /** The proxy's engine retry budget on every gateway (seconds). */
  engineRetrySeconds: number;
  /** Extra Worker variables (short grace periods keep a run short). */
  vars: Record<string, string>;
}

/** One gateway slot: its process (null while it is down) and how many times it was started. */
interface GatewaySlot {
  nodeId: string;
  proc: PolarProcess | null;
  starts: number;
}

const TOKENS: Required<RoleTokens> = {
  trainer: "faults-trainer",
  gateway: "faults-gateway",
  admin: "faults-admin",
  viewer: "faults-viewer",
};

/**
 * The running stack.
 *
 * @example
 * ```ts
 * const stack = await FaultStack.start({ root, gateways: 4, maxRun: 16, queue: "faults", shards: 2, … });
 * await stack.killGateway(1); await stack.startGateway(1);
 * await stack.stop();
 * ```
 */
export class FaultStack {
  readonly tokens = TOKENS;
  private readonly slots: GatewaySlot[];
  private cp: ControlPlaneDev | null = null;
  /** Times the control plane was started. */
  controlPlaneStarts = 0;

  private constructor(
    readonly opts: FaultStackOptions,
    readonly cpPort: number,
    readonly engineUrl: string,
    readonly engine: PolarProcess,
    readonly proxy: FaultProxy | null,
  ) {
    this.slots = nodeIdsFor(opts).map((nodeId) => ({ nodeId, proc: null, starts: 0 }));
  }

  /** Starts the control plane, the engine and every gateway; resolves once all are connected. */
  static async start(opts: FaultStackOptions): Promise<FaultStack> {
    const [cpPort, enginePort] = [await freePort(), await freePort()];
    const engine = spawnPolar("sim-engine", [
      "sim-engine",
      "--port",
      String(enginePort),
      "--decode-tps",
      "400",
      "--max-running-requests",
      "64",
    ]);
    const engineUrl = `http://127.0.0.1:${enginePort}`;
    const proxy =
      opts.flaky === null ? null : await FaultProxy.start({ target: { host: "127.0.0.1", port: cpPort } });
    const stack = new FaultStack(opts, cpPort, engineUrl, engine, proxy);
    await Promise.all([
      waitForProcessHttp(engine, `${engineUrl}/health`, 120_000),
      stack.startControlPlane(),
    ]);
    for (let i = 0; i < opts.gateways; i++) stack.startGateway(i);
    await stack.waitConnected(opts.gateways, 120_000);
    return stack;
  }

  get url(): string {
    return `http://127.0.0.1:${this.cpPort}`;
  }

  /** Starts `wrangler dev` on the stack's port and state folder (again after a kill). */
  async startControlPlane(): Promise<void> {
    // The port is fixed (gateways and the fault proxy dial it). Right after a SIGKILL the killed
    // workerd may not have released it yet: the kernel tears a large process down after the
    // reaper has already seen its group signalled (seen once, under a load average above 100).
    for (let attempt = 1; ; attempt++) {
      try {
        this.cp = await startControlPlaneDev({
          port: this.cpPort,
          persistTo: join(this.opts.root, "state"),
          tokens: TOKENS,
          vars: { POLAR_QUEUE_SHARDS: `${this.opts.queue}=${this.opts.shards}`, ...this.opts.vars },
          readyTimeoutMs: 120_000,
        });
        break;
      } catch (err) {
        if (attempt >= 10 || !/Address already in use/.test((err as Error).message)) throw err;
        await new Promise((r) => setTimeout(r, 2_000));
      }
    }
    this.controlPlaneStarts++;
  }

  /** SIGKILL of the control plane (wrangler and workerd). */
  async killControlPlane(): Promise<void> {
    await this.cp?.kill();
    this.cp = null;
  }

  /** Starts gateway `i` on its work root (a restart finds its journal there). */
  startGateway(i: number): void {
    const slot = this.slots[i]!;
    const { opts } = this;
    const viaProxy = i === opts.flaky && this.proxy;
    const skew: Record<string, string> =
      i === opts.skewed
        ? {
            LD_PRELOAD: LIBFAKETIME,
            FAKETIME: `+${opts.skewMinutes}m`,
            // Wall clock only: timers and performance.now() keep real time.
            FAKETIME_DONT_FAKE_MONOTONIC: "1",
          }
        : {};
    slot.proc = spawnPolar(
      `gateway ${slot.nodeId}`,
      [
        "serve_gateway",
        "--control-plane",
        viaProxy ? this.proxy!.url : this.url,
        "--node-id",
        slot.nodeId,
        "--queue",
        opts.queue,
        "--engine",
        "sglang",
        "--engine-url",
        this.engineUrl,
        "--model",
        "Qwen/Qwen3-0.6B",
        "--max-run",
        String(opts.maxRun),
        "--max-init",
        "16",
        "--max-postrun",
        "16",
        "--work-root",
        join(opts.root, "work", slot.nodeId),
        "--reconnect-max-seconds",
        "2",
        "--engine-retry-seconds",
        String(opts.engineRetrySeconds),
      ],
      { POLAR_GATEWAY_TOKEN: TOKENS.gateway, ...skew },
    );
    slot.starts++;
  }

  /** SIGKILL of gateway `i` (its sessions die with it; its journal stays on disk). */
  async killGateway(i: number): Promise<void> {
    const slot = this.slots[i]!;
    await slot.proc?.kill();
    slot.proc = null;
  }

  /** Node ids of the gateways, by index. */
  nodeIds(): string[] {
    return this.slots.map((s) => s.nodeId);
  }

  /** The control plane's supervising pid (wrangler and workerd run under it); undefined while down. */
  controlPlanePid(): number | undefined {
    return this.cp?.pid;
  }

  /** Gateway `i`'s supervising pid; undefined while it is down. */
  gatewayPid(i: number): number | undefined {
    return this.slots[i]?.proc?.pid;
  }

  /** How many times each gateway was started. */
  gatewayStarts(): number[] {
    return this.slots.map((s) => s.starts);
  }

  /** The last output of gateway `i` (for a failure's message). */
  gatewayOutput(i: number): string {
    return this.slots[i]?.proc?.output() ?? "(not running)";
  }

  /** Resolves once `n` gateways are listed as connected. */
  async waitConnected(n: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const connected = await this.connectedGateways().catch(() => 0);
      if (connected >= n) return;
      if (Date.now() > deadline)
        throw new Error(`${connected} of ${n} gateways connected after ${timeoutMs / 1000} s`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  private async connectedGateways(): Promise<number> {
    const res = await fetch(`${this.url}/v1/gateways`, {
      headers: { authorization: `Bearer ${TOKENS.viewer}` },
      signal: AbortSignal.timeout(5_000),
    });
    if (!res.ok) return 0;
    const body = (await res.json()) as { gateways?: Array<{ connected: boolean }> };
    return (body.gateways ?? []).filter((g) => g.connected).length;
  }

  /** Stops everything (gateways first). */
  async stop(): Promise<void> {
    await Promise.allSettled(this.slots.map((s) => s.proc?.stop()));
    await Promise.allSettled([this.cp?.stop(), this.engine.stop(), this.proxy?.close()]);
  }
}

/**
 * Node ids that put the flaky gateway alone on the last shard and the others on the first: while
 * its link is down, its shard's sessions are lent to the other shard (the loans the matrix kills
 * the control plane during). Gateways land on shards by a hash of their node id.
 */
function nodeIdsFor(opts: FaultStackOptions): string[] {
  const config = `${opts.queue}=${opts.shards}`;
  const last = shardsOf(opts.queue, config).at(-1)!;
  const used = new Set<string>();
  return Array.from({ length: opts.gateways }, (_, i) => {
    const want = opts.shards > 1 && i === opts.flaky ? last : shardsOf(opts.queue, config)[0]!;
    for (let k = 0; ; k++) {
      const id = `fm-${i}-${k}`;
      if (!used.has(id) && gatewayShard(opts.queue, id, config) === want) {
        used.add(id);
        return id;
      }
    }
  });
}

/** The fault matrix's session harness, uploaded into every session. */
export const AGENT_PATH = join(REPO_ROOT, "test/faults/agent.mjs");
