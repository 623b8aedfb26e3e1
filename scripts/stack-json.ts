/**
 * The local stack for programs in other languages (the Python trainer package's tests): starts
 * `cli/local-stack.ts`'s stack (control plane via `wrangler dev`, the simulated engine, N gateways,
 * each under the reaper), prints ONE JSON line on stdout with what a client needs, and stops the
 * stack when its standard input closes (or on SIGTERM / SIGINT). A parent that dies closes the pipe,
 * so the stack never outlives it.
 *
 * Run: `node --import tsx scripts/stack-json.ts [flags]`.
 *
 * Flags: `--gateways N` (default 1), `--engine sglang|sglang-openai|vllm` (default `sglang`, token
 * mode: one `conversation` trace per session with per-turn versions), `--gateway-arg ARG`
 * (repeatable, passed to every `serve_gateway`).
 *
 * The line: `{"url", "tokens": {"trainer", "gateway", "admin"}, "engine_url", "model", "root",
 * "gateways": ["node-0", …]}`.
 *
 * @example
 * ```ts
 * // from Python: p = subprocess.Popen(["node", "--import", "tsx", "scripts/stack-json.ts"], stdin=PIPE, stdout=PIPE)
 * // info = json.loads(p.stdout.readline()); …; p.stdin.close(); p.wait()
 * ```
 *
 * @module
 */
import { parseArgs } from "node:util";
import { startLocalStack } from "../cli/local-stack";

const { values } = parseArgs({
  options: {
    gateways: { type: "string", default: "1" },
    engine: { type: "string", default: "sglang" },
    "gateway-arg": { type: "string", multiple: true, default: [] },
  },
});

const gateways = Number(values.gateways);
if (!Number.isInteger(gateways) || gateways < 1 || gateways > 8) {
  console.error(`stack-json: --gateways must be an integer from 1 to 8, got '${values.gateways}'`);
  process.exit(2);
}
const engine = values.engine;
if (engine !== "sglang" && engine !== "sglang-openai" && engine !== "vllm") {
  console.error(`stack-json: --engine must be sglang, sglang-openai or vllm, got '${engine}'`);
  process.exit(2);
}

const stack = await startLocalStack({ gateways, engine, gatewayArgs: values["gateway-arg"] });
let stopping = false;
async function stop(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    await stack.stop();
  }
  process.exit(code);
}
process.on("SIGTERM", () => void stop(0));
process.on("SIGINT", () => void stop(0));
process.stdin.on("end", () => void stop(0));
process.stdin.on("error", () => void stop(0));
process.stdin.resume();

process.stdout.write(
  `${JSON.stringify({
    url: stack.controlPlane.url,
    tokens: stack.tokens,
    engine_url: stack.engineUrl,
    model: stack.model,
    root: stack.root,
    gateways: stack.gateways.map((_, i) => `node-${i}`),
  })}\n`,
);
