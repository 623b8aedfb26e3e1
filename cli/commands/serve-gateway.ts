/**
 * `polar serve_gateway`: the gateway agent of one GPU host.
 *
 * @module
 */
import { startGateway } from "../../gateway-agent";
import { UsageError } from "../usage-error";

export interface ServeGatewayOptions {
  controlPlane: string;
  nodeId: string;
  queue: string;
  engine: string;
  engineUrl: string;
  model: string;
  maxInit: number;
  maxRun: number;
  maxPostrun: number;
  workRoot?: string;
  keepWorkspaces: boolean;
}

const ENGINES = ["sglang-openai"] as const;

/** Runs until SIGINT/SIGTERM; then stops taking work and closes the connection. */
export async function runServeGateway(opts: ServeGatewayOptions): Promise<void> {
  const token = process.env.POLAR_GATEWAY_TOKEN;
  if (!token) throw new UsageError("POLAR_GATEWAY_TOKEN is not set (the gateway's bearer token)");
  if (!(ENGINES as readonly string[]).includes(opts.engine)) {
    throw new UsageError(`--engine: '${opts.engine}' is not supported; choose one of ${ENGINES.join(", ")}`);
  }
  for (const [flag, value] of [
    ["--control-plane", opts.controlPlane],
    ["--engine-url", opts.engineUrl],
  ] as const) {
    if (!URL.canParse(value) || !/^https?:$/.test(new URL(value).protocol)) {
      throw new UsageError(`${flag}: '${value}' is not an http(s) URL`);
    }
  }
  const gateway = await startGateway({
    controlPlaneUrl: opts.controlPlane,
    nodeId: opts.nodeId,
    token,
    queue: opts.queue,
    engine: "sglang-openai",
    engineUrl: opts.engineUrl,
    model: opts.model,
    maxInit: opts.maxInit,
    maxRun: opts.maxRun,
    maxPostrun: opts.maxPostrun,
    workRoot: opts.workRoot,
    keepWorkspaces: opts.keepWorkspaces,
  });
  console.log(
    `polar gateway ${opts.nodeId}: pulling from ${opts.controlPlane} (queue ${opts.queue}), proxy at ${gateway.proxyUrl}, engine ${opts.engine} ${opts.engineUrl}`,
  );
  const stop = async () => {
    await gateway.stop();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
