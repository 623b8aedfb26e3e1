/**
 * `npm run demo`: the walking skeleton end to end on this machine.
 *
 * Starts the control plane (`wrangler dev`, temporary state), the SIMULATED SGLang engine and one
 * gateway agent; submits examples/hello/task.yaml (one task × 4 samples, a shell harness that asks
 * the model through the gateway's proxy); prints each session's result as it arrives; shuts
 * everything down. Exit code 0 only when every session COMPLETED with tokens recorded.
 *
 * @module
 */
import { join } from "node:path";
import { startLocalStack } from "../cli/local-stack";
import { sessionTable, summarize } from "../cli/report";
import { loadTaskFile } from "../cli/task-file";
import { REPO_ROOT } from "../cli/wrangler-dev";
import type { SessionResult } from "../protocol";

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;

console.log(
  "Polar-TS demo: control plane (wrangler dev) + simulated SGLang engine + 1 gateway, all on loopback.",
);
const stack = await startLocalStack({ gateways: 1 });
// wrangler runs in its own process group, so Ctrl-C would not reach it: stop everything ourselves.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping…`);
    void stack.stop().finally(() => process.exit(130));
  });
}
let ok = false;
try {
  console.log(
    `[${elapsed()}] control plane ${stack.controlPlane.url}, sim engine ${stack.engineUrl}, gateway node-0`,
  );
  const batch = loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml"));
  const created = await stack.client.submit(batch);
  console.log(
    `[${elapsed()}] submitted batch ${created.batch_id}: ${created.tasks} task × ${created.sessions} sessions`,
  );

  const results: SessionResult[] = [];
  for await (const { seq, result } of stack.client.streamResults(created.batch_id, { timeoutMs: 150_000 })) {
    results.push(result);
    const answer = result.trajectory.traces.at(-1)?.response_messages[0]?.content;
    console.log(
      `[${elapsed()}] result #${seq}: ${result.session_id} ${result.status} reward=${result.reward ?? "-"}` +
        (typeof answer === "string" ? `  last answer: ${JSON.stringify(answer.slice(0, 60))}` : ""),
    );
  }
  const summaries = results.map(summarize);
  console.log(`\n${sessionTable(summaries)}\n`);
  console.log(
    `Trajectories (token ids, loss masks, logprobs) are in each result: GET ${stack.controlPlane.url}/v1/batches/${created.batch_id}/results`,
  );
  ok =
    summaries.length === created.sessions &&
    summaries.every((s) => s.status === "COMPLETED" && s.prompt_tokens > 0 && s.response_tokens > 0);
  console.log(
    ok ? `[${elapsed()}] demo OK` : `[${elapsed()}] demo FAILED: not every session completed with tokens`,
  );
} catch (err) {
  console.error(`demo failed: ${(err as Error).message}`);
  for (const p of [stack.engine, ...stack.gateways])
    console.error(`--- ${p.name} ---\n${p.output().slice(-3000)}`);
  console.error(`--- control plane ---\n${stack.controlPlane.output().slice(-3000)}`);
} finally {
  await stack.stop();
}
process.exit(ok ? 0 : 1);
