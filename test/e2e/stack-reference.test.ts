/**
 * `polar stack --engine reference` as a trainer runs it: one child process starts the control
 * plane, the CPU reference engine on a fresh tiny checkpoint and a token-mode gateway, and prints
 * (`--json`) where they are. One session of examples/hello/task.yaml runs through it, and its
 * trace carries the reference engine's logprobs: exactly what a plain forward pass over the
 * checkpoint the stack printed gives for the sampled ids (at the harness's temperature 0.7), so
 * the simulated engine, or a lost logprob, would fail it. SIGINT stops the stack (exit 0).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, expect } from "vitest";
import { ControlPlaneClient } from "../../cli/client";
import type { StackInfo } from "../../cli/commands/stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { SessionResult } from "../../protocol";
import { forwardPassLogprobs } from "../support/forward-pass";
import { itWith } from "../support/optional-tools";

/** The harness's sampling temperature (examples/hello/ask.mjs sends 0.7). */
const TEMPERATURE = 0.7;

let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

itWith(
  ["torch"],
  "polar stack --engine reference: a session's trace carries the reference engine's logprobs",
  {
    // Loading torch and the checkpoint beside other suites on a two-core machine took past 90 s.
    timeout: 480_000,
  },
  async () => {
    const t0 = Date.now();
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !/^(POLAR_(?!TORCH_PYTHON)|VITEST|NODE_ENV$|TEST$|NODE_OPTIONS$)/.test(k),
      ),
    );
    child = spawn(
      process.execPath,
      [join(REPO_ROOT, "bin/polar.mjs"), "stack", "--engine", "reference", "--port", "0", "--json"],
      { cwd: REPO_ROOT, env: { ...env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child!.once("exit", (code) => r(code)));
    await expect
      .poll(() => (child!.exitCode === null ? stdout : `exited: ${stdout}\n${stderr}`), {
        timeout: 360_000,
        interval: 200,
      })
      .toMatch(/^\{.*\}$/m);
    const info = JSON.parse(/^\{.*\}$/m.exec(stdout)![0]) as StackInfo;
    const startSeconds = (Date.now() - t0) / 1000;
    expect(info).toMatchObject({ engine: "reference", model: "polar-reference-tiny" });
    expect(info.model_path).toBeTruthy();

    const client = new ControlPlaneClient(info.url, info.tokens.trainer);
    const batch = loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml"));
    batch.tasks[0]!.num_samples = 1; // one session is enough to see the engine's logprobs
    const created = await client.submit(batch);
    const results: SessionResult[] = [];
    for await (const { result } of client.streamResults(created.batch_id, { timeoutMs: 180_000 }))
      results.push(result);
    expect(results.map((r) => r.status)).toEqual(["COMPLETED"]);
    const traces = results[0]!.trajectory!.traces;
    expect(traces.length).toBeGreaterThan(0);
    const trace = traces[0]!;
    expect(trace.response_ids.length).toBeGreaterThan(0);
    expect(trace.response_logprobs).toHaveLength(trace.response_ids.length);
    const again = await forwardPassLogprobs(
      info.model_path!,
      [...trace.prompt_ids, ...trace.response_ids],
      trace.prompt_ids.length,
      TEMPERATURE,
    );
    // Sampled tokens (loss_mask 1) only: the second turn's template tokens between them were never
    // sampled, so they carry no engine logprob.
    const sampled = again.flatMap((lp, i) =>
      trace.loss_mask[i] === 1 ? [[lp, trace.response_logprobs![i]!]] : [],
    );
    expect(sampled.length).toBeGreaterThan(0);
    const worst = Math.max(...sampled.map(([a, b]) => Math.abs(a! - b!)));
    expect(worst).toBeLessThan(1e-3);

    child.kill("SIGINT");
    expect(await exited).toBe(0);
    console.log(
      `polar stack --engine reference: up in ${startSeconds.toFixed(1)} s, whole test ${((Date.now() - t0) / 1000).toFixed(1)} s`,
    );
  },
);
