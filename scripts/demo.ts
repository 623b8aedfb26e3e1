/**
 * `npm run demo`: the calculator example end to end on this machine, no GPU.
 *
 * Starts the control plane (`wrangler dev`, temporary state), the SIMULATED SGLang engine (a scripted
 * coding policy answering through the real Qwen3 tokenizer and chat template) and one gateway agent
 * in token mode (its proxy renders the chat template, calls `/generate` with token ids and bridges
 * each turn onto the previous one's exact ids); submits examples/calculator/task.yaml, which names
 * no builder and so gets token mode's default, `conversation` (one task × 4 samples: a small tools
 * agent fixes a bug in a repository; `test_on_output` grades its diff in a fresh runtime); prints each session's reward, turns, tokens
 * and per-turn bridge verdicts as it arrives; saves every result to `.polar/demo/<batch>/` and shows
 * how to open it; shuts everything down.
 *
 * Prints the dashboard's URL (signed in through its `#token=` fragment) as soon as the control plane
 * is up, so the batch can be watched live; `npm run demo -- --hold` keeps everything running after
 * the batch until Ctrl-C, to look at it in the dashboard.
 *
 * Exit code 0 only when every session COMPLETED with tokens recorded and the group got both rewards.
 *
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { dashboardLink } from "../cli/commands/dashboard";
import { startLocalStack } from "../cli/local-stack";
import { sessionTable, summarize, table } from "../cli/report";
import { loadTaskFile } from "../cli/task-file";
import { REPO_ROOT } from "../cli/wrangler-dev";
import type { SessionResult } from "../protocol";
import { type ModelFamily, modelFamily, UnknownModelFamilyError } from "../tokenizer/families";

const TASK_FILE = "examples/calculator/task.yaml";
/** `--hold`: keep the stack up after the batch until a signal, to look at it in the dashboard. */
const HOLD = process.argv.includes("--hold");
/**
 * `--model-family NAME`: the model family the simulated engine serves and the gateway's token mode
 * renders and parses (`qwen3`, the default, or `deepseek_v3`; `tokenizer/families.ts`).
 */
const FAMILY = familyFlag(process.argv.slice(2));
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;

console.log(
  "Polar-TS demo: control plane (wrangler dev) + SIMULATED SGLang engine + 1 gateway, all on loopback.",
);
const familyArgs = ["--model-family", FAMILY.name];
const stack = await startLocalStack({
  gateways: 1,
  engine: "sglang",
  model: FAMILY.model,
  engineArgs: familyArgs,
  gatewayArgs: familyArgs,
});
/** Exit status on a signal: 130 (interrupted), or the batch's verdict once `--hold` holds. */
let exitCode = 130;
// The children run under reapers in sessions of their own, so Ctrl-C reaches only this process:
// stop them in order ourselves (were this process killed outright, the reapers would stop them).
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping…`);
    void stack.stop().finally(() => process.exit(exitCode));
  });
}

let ok = false;
try {
  console.log(
    `[${elapsed()}] control plane ${stack.controlPlane.url}, sim engine ${stack.engineUrl} (${FAMILY.model}, family ${FAMILY.name}), gateway node-0`,
  );
  // Signed in read-only: watching needs no more than the viewer role.
  const dashboard = dashboardLink(stack.controlPlane.url, {
    POLAR_VIEWER_TOKEN: stack.tokens.viewer,
    POLAR_TRAINER_TOKEN: stack.tokens.trainer,
  });
  console.log(`[${elapsed()}] dashboard: ${dashboard.url}`);
  const batch = loadTaskFile(join(REPO_ROOT, TASK_FILE));
  // The task names no builder, so the token-mode gateway gives it `conversation`: one token-exact
  // trace per session, every turn bridged onto the previous turn's sampled ids.
  const created = await stack.client.submit(batch);
  console.log(
    `[${elapsed()}] submitted ${TASK_FILE} as batch ${created.batch_id}: ${created.tasks} task × ${created.sessions} sessions`,
  );

  const outDir = join(REPO_ROOT, ".polar", "demo", created.batch_id);
  mkdirSync(outDir, { recursive: true });
  const results: SessionResult[] = [];
  for await (const { seq, result } of stack.client.streamResults(created.batch_id, { timeoutMs: 150_000 })) {
    results.push(result);
    writeFileSync(join(outDir, `${result.session_id}.json`), `${JSON.stringify(result, null, 2)}\n`);
    const s = summarize(result);
    console.log(
      `[${elapsed()}] result #${seq}: ${result.session_id} ${result.status} reward=${result.reward ?? "-"} turns=${turns(result)} traces=${s.traces} tokens=${s.prompt_tokens}+${s.response_tokens} verdicts=${verdicts(result)}`,
    );
  }

  const summaries = results.map(summarize);
  console.log(`\n${sessionTable(summaries)}\n`);
  const rewards = results.map((r) => r.reward);
  console.log(
    table(
      ["group", "sessions", "mean reward", "rewards"],
      [
        [
          batch.tasks[0]!.task_id,
          results.length,
          mean(rewards).toFixed(2),
          rewards.map((r) => r ?? "-").join(" "),
        ],
      ],
    ),
  );
  const first = results[0];
  console.log(
    `\nTrajectories (token ids, loss masks, logprobs per turn) saved in ${relative(process.cwd(), outDir)}/`,
  );
  if (first) {
    const file = relative(process.cwd(), join(outDir, `${first.session_id}.json`));
    const tokenizer =
      FAMILY.name === "qwen3" ? "" : ` --tokenizer-path ${relative(process.cwd(), FAMILY.tokenizerDir())}`;
    console.log(`Open one decoded:   npx polar inspect ${file}${tokenizer}`);
    console.log(
      `Raw token ids:      node -p 'require("./${file}").trajectory.traces[0].response_ids.slice(0, 20)'`,
    );
  }
  ok =
    summaries.length === created.sessions &&
    summaries.every((s) => s.status === "COMPLETED" && s.prompt_tokens > 0 && s.response_tokens > 0) &&
    rewards.includes(1) &&
    rewards.includes(0);
  console.log(
    ok
      ? `[${elapsed()}] demo OK`
      : `[${elapsed()}] demo FAILED: expected 4 COMPLETED sessions with tokens and mixed rewards`,
  );
  if (HOLD) {
    console.log(`\nHolding the stack (--hold): the dashboard stays at ${dashboard.url} until Ctrl-C.`);
    // The signal handlers above stop the stack and exit.
    exitCode = ok ? 0 : 1;
    await new Promise(() => {});
  }
} catch (err) {
  console.error(`demo failed: ${(err as Error).message}`);
  for (const p of [stack.engine, ...stack.gateways])
    console.error(`--- ${p.name} ---\n${p.output().slice(-3000)}`);
  console.error(`--- control plane ---\n${stack.controlPlane.output().slice(-3000)}`);
} finally {
  await stack.stop();
}
process.exit(ok ? 0 : 1);

/** Model calls in a session (the conversation builder keeps one entry per turn in trace metadata). */
function turns(result: SessionResult): number {
  return result.trajectory.traces.reduce((n, t) => {
    const perTurn = (t.metadata as { turns?: unknown[] }).turns;
    return n + (Array.isArray(perTurn) ? perTurn.length : 1);
  }, 0);
}

/** The token bridge's verdict counts, e.g. `new_chain:1 extended:4`. */
function verdicts(result: SessionResult): string {
  const counts = (result.trajectory.metadata as { bridge_verdicts?: Record<string, number> }).bridge_verdicts;
  return counts
    ? Object.entries(counts)
        .filter(([, n]) => n > 0)
        .map(([v, n]) => `${v}:${n}`)
        .join(" ")
    : "-";
}

function mean(values: Array<number | null>): number {
  const xs = values.filter((v): v is number => v !== null);
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

/** The family named by `--model-family NAME` (or `--model-family=NAME`), qwen3 without it. */
function familyFlag(args: readonly string[]): ModelFamily {
  const at = args.findIndex((a) => a === "--model-family" || a.startsWith("--model-family="));
  if (at < 0) return modelFamily("qwen3");
  const value = args[at]!.includes("=") ? args[at]!.split("=")[1]! : args[at + 1];
  try {
    return modelFamily(value ?? "");
  } catch (err) {
    if (!(err instanceof UnknownModelFamilyError)) throw err;
    console.error(`--model-family: ${err.message}`);
    process.exit(2);
  }
}
