/**
 * `polar serve_gateway`: the gateway agent of one GPU host, configured by flags or by a topology
 * file (`-c topology.yaml --node-id ID`; flags given with `-c` override the file).
 *
 * @module
 */
import { type Gateway, type GatewayOptions, jsonLogger, startGateway } from "../../gateway-agent";
import { gatewayOptionsFromTopology, loadTopology, TopologyError } from "../../gateway-agent/topology";
import { ENGINE_NAMES } from "../../proxy/engines";
import { UsageError } from "../usage-error";

export interface ServeGatewayOptions {
  /** Topology file (`-c`). */
  config?: string;
  controlPlane?: string;
  nodeId?: string;
  queue?: string;
  engine?: string;
  engineUrl?: string;
  model?: string;
  maxInit?: number;
  maxRun?: number;
  maxPostrun?: number;
  workRoot?: string;
  keepWorkspaces?: boolean;
  /** Operator HTTP port (`/health`, `/metrics`); 0 = any free port. */
  httpPort?: number;
  httpHost?: string;
  /** `json` (default with -c) or `text` logs. */
  logFormat?: "json" | "text";
}

const isHttpUrl = (value: string) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);

/**
 * Resolves flags and/or a topology file into gateway options; every error names the flag or key.
 *
 * @example
 * ```ts
 * const opts = resolveServeGatewayOptions({ config: "topology.yaml", nodeId: "gpu-0" }, token);
 * ```
 */
export function resolveServeGatewayOptions(opts: ServeGatewayOptions, token: string): GatewayOptions {
  let base: Partial<GatewayOptions> = {};
  if (opts.config) {
    try {
      base = gatewayOptionsFromTopology(loadTopology(opts.config), opts.nodeId, token, opts.config);
    } catch (err) {
      if (err instanceof TopologyError) throw new UsageError(err.message);
      throw err;
    }
  }
  const merged: Partial<GatewayOptions> = {
    ...base,
    token,
    ...(opts.controlPlane !== undefined ? { controlPlaneUrl: opts.controlPlane } : {}),
    ...(opts.nodeId !== undefined ? { nodeId: opts.nodeId } : {}),
    ...(opts.queue !== undefined ? { queue: opts.queue } : {}),
    ...(opts.engine !== undefined ? { engine: opts.engine as GatewayOptions["engine"] } : {}),
    ...(opts.engineUrl !== undefined ? { engineUrl: opts.engineUrl } : {}),
    ...(opts.model !== undefined ? { model: opts.model } : {}),
    ...(opts.maxInit !== undefined ? { maxInit: opts.maxInit } : {}),
    ...(opts.maxRun !== undefined ? { maxRun: opts.maxRun } : {}),
    ...(opts.maxPostrun !== undefined ? { maxPostrun: opts.maxPostrun } : {}),
    ...(opts.workRoot !== undefined ? { workRoot: opts.workRoot } : {}),
    ...(opts.keepWorkspaces ? { keepWorkspaces: true } : {}),
    ...(opts.httpPort !== undefined
      ? { http: { host: opts.httpHost ?? "127.0.0.1", port: opts.httpPort } }
      : {}),
  };
  const where = (flag: string, key: string) => (opts.config ? `${flag} (or ${key} in ${opts.config})` : flag);
  if (!merged.controlPlaneUrl)
    throw new UsageError(`${where("--control-plane", "gateway.control_plane_url")} is required`);
  if (!merged.nodeId) throw new UsageError(`--node-id is required`);
  if (!merged.engineUrl)
    throw new UsageError(`${where("--engine-url", "gateway.nodes[].inference.base_url")} is required`);
  if (!merged.model) throw new UsageError(`${where("--model", "gateway.nodes[].model_served")} is required`);
  const engine = merged.engine ?? "sglang-openai";
  if (!(ENGINE_NAMES as readonly string[]).includes(engine)) {
    throw new UsageError(
      `${where("--engine", "gateway.nodes[].inference.engine")}: '${engine}' is not supported; choose one of ${ENGINE_NAMES.join(", ")} (or upstream's 'sglang')`,
    );
  }
  for (const [flag, value] of [
    [where("--control-plane", "gateway.control_plane_url"), merged.controlPlaneUrl],
    [where("--engine-url", "gateway.nodes[].inference.base_url"), merged.engineUrl],
  ] as const) {
    if (!isHttpUrl(value)) throw new UsageError(`${flag}: '${value}' is not an http(s) URL`);
  }
  return { ...(merged as GatewayOptions), engine: engine as GatewayOptions["engine"] };
}

/**
 * Runs the gateway until SIGINT/SIGTERM; then stops taking work and closes the connection.
 *
 * @example
 * ```ts
 * await runServeGateway({ config: "examples/topology.yaml", nodeId: "gpu-0" });
 * ```
 */
export async function runServeGateway(opts: ServeGatewayOptions): Promise<void> {
  await startServeGateway(opts);
}

/**
 * Starts the gateway of `serve_gateway` and returns it (tests stop it themselves).
 *
 * @example
 * ```ts
 * const gateway = await startServeGateway(opts, { installSignalHandlers: false });
 * ```
 */
export async function startServeGateway(
  opts: ServeGatewayOptions,
  o: { installSignalHandlers?: boolean } = {},
): Promise<Gateway> {
  const token = process.env.POLAR_GATEWAY_TOKEN;
  if (!token) throw new UsageError("POLAR_GATEWAY_TOKEN is not set (the gateway's bearer token)");
  const resolved = resolveServeGatewayOptions(opts, token);
  const format = opts.logFormat ?? (opts.config ? "json" : "text");
  const logger =
    format === "json" ? jsonLogger({ component: "gateway", node_id: resolved.nodeId }) : undefined;
  const gateway = await startGateway({ ...resolved, ...(logger ? { logger } : {}) });
  const line = {
    msg: "gateway started",
    node_id: resolved.nodeId,
    control_plane: resolved.controlPlaneUrl,
    queue: resolved.queue ?? "default",
    proxy: gateway.proxyUrl,
    engine: `${resolved.engine} ${resolved.engineUrl}`,
    http: gateway.httpUrl,
    work_root: gateway.workRoot,
  };
  if (logger) logger.info(line.msg, line);
  else
    console.log(
      `polar gateway ${line.node_id}: pulling from ${line.control_plane} (queue ${line.queue}), proxy at ${line.proxy}, engine ${line.engine}${line.http ? `, health/metrics at ${line.http}` : ""}`,
    );
  if (o.installSignalHandlers ?? true) {
    const stop = async () => {
      await gateway.stop();
      process.exit(0);
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  }
  return gateway;
}
