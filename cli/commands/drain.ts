/**
 * `polar drain NODE_ID [--json]` (admin token): the gateway takes no new sessions and finishes the
 * ones it has; its process keeps running until the operator stops it.
 *
 * @module
 */
import { type ConnectionOptions, connect, printJson } from "./connection";

/** Drains the gateway and prints the control plane's answer. */
export async function runDrain(nodeId: string, opts: ConnectionOptions): Promise<void> {
  const answer = await connect(opts, "admin").drain(nodeId);
  if (opts.json) return printJson(answer);
  const queue = typeof answer.queue === "string" ? ` (queue ${answer.queue})` : "";
  console.log(`gateway ${answer.node_id}${queue}: draining`);
}
