/**
 * `polar proxy`: the recording proxy on its own, for agents run outside Polar. Sessions are
 * created over HTTP with the admin token from `POLAR_ADMIN_TOKEN` (see `docs/proxy.md`).
 *
 * @module
 */
import { ENGINE_NAMES, type EngineName } from "../../proxy/engines";
import { startProxy } from "../../proxy/server";
import { UsageError } from "../usage-error";

/** Options of {@link runProxy}, as commander parses them. */
export interface ProxyCommandOptions {
  engine: string;
  engineUrl?: string;
  routerUrl?: string;
  model: string;
  port: number;
  host: string;
  tokenizerPath?: string;
  captureDir?: string;
  requestTimeoutMs?: number;
}

/**
 * Checks the flags and returns the proxy options; throws {@link UsageError} naming the flag.
 *
 * @example
 * ```ts
 * proxyOptionsFrom({ engine: "vllm", engineUrl: "http://127.0.0.1:8000", model: "Qwen/Qwen3-8B", port: 4000, host: "127.0.0.1" }, "tok");
 * ```
 */
export function proxyOptionsFrom(opts: ProxyCommandOptions, adminToken: string | undefined) {
  if (!ENGINE_NAMES.includes(opts.engine as EngineName)) {
    throw new UsageError(`--engine: '${opts.engine}' is not one of ${ENGINE_NAMES.join(", ")}`);
  }
  const urls = (opts.engineUrl ?? "")
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
  if (urls.length === 0 && !opts.routerUrl)
    throw new UsageError("--engine-url: give at least one URL (or --router-url)");
  for (const u of [...urls, ...(opts.routerUrl ? [opts.routerUrl] : [])]) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new UsageError(`--engine-url: '${u}' is not a URL`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
      throw new UsageError(`--engine-url: '${u}' must be http(s)`);
  }
  if (!opts.model) throw new UsageError("--model: required (the model name the engine serves)");
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535)
    throw new UsageError("--port: must be 0-65535");
  if (!adminToken)
    throw new UsageError("POLAR_ADMIN_TOKEN: set it; it guards POST /sessions and /admin/inference/*");
  return {
    engine: opts.engine as EngineName,
    engineUrls: urls,
    ...(opts.routerUrl ? { routerUrl: opts.routerUrl } : {}),
    modelServed: opts.model,
    port: opts.port,
    host: opts.host,
    adminToken,
    ...(opts.tokenizerPath ? { tokenizerPath: opts.tokenizerPath } : {}),
    ...(opts.captureDir ? { captureDir: opts.captureDir } : {}),
    ...(opts.requestTimeoutMs ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
  };
}

/**
 * Runs the proxy until SIGINT/SIGTERM.
 *
 * @example
 * ```ts
 * await runProxy({ engine: "sglang-openai", engineUrl: "http://127.0.0.1:30000", model: "Qwen/Qwen3-8B", port: 4000, host: "127.0.0.1" });
 * ```
 */
export async function runProxy(opts: ProxyCommandOptions): Promise<void> {
  const proxy = await startProxy(proxyOptionsFrom(opts, process.env.POLAR_ADMIN_TOKEN));
  console.log(`polar proxy (${opts.engine}, model ${opts.model}) listening at ${proxy.url}`);
  console.log(
    `create a session: curl -X POST -H "Authorization: Bearer $POLAR_ADMIN_TOKEN" ${proxy.url}/sessions`,
  );
  const stop = async () => {
    await proxy.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
