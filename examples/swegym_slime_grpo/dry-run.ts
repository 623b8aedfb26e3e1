/**
 * The SWE-Gym example's dry run: the GPU host's configuration driven against the local stack with
 * the simulated engine, so CI proves the example's files work together without a GPU, the SWE-Gym
 * images or slime.
 *
 * 1. prepare-data.ts converts instances.jsonl into slime's prompt rows.
 * 2. The control plane (`wrangler dev`) and the simulated engine start; the gateway is started from
 *    topology.yaml itself (`polar serve_gateway -c`, `${VAR}` filled as on the GPU host, with the
 *    simulated engine as "slime's router": token mode, `/generate` with token ids).
 * 3. polar.yaml is rendered as run.sh renders it (`${VAR}` from the environment) and handed to
 *    dry_run_slime.py, which reads the bridge's flags from run.sh and makes slime's calls: data
 *    source, `generate_rollout`, `reward_func`, `post_process_rewards`, the weight-update fence
 *    around a weight sync, the checkpoint's `save`.
 * 4. The report is checked (dry-run-checks.ts) and written to `<out>/summary.json`.
 *
 * Offline replacements (the report lists them): the task template's `runtime` (local, not the
 * instance's image), `agent` (a shell command that asks the model once, not codex) and `evaluator`
 * (dry-run-evaluator.mjs, which checks the row the real grader would get); fewer samples per
 * prompt than the GPU host (`--n-samples-per-prompt`, `--rollout-batch-size`).
 *
 * Usage: `npx tsx examples/swegym_slime_grpo/dry-run.ts [--out DIR] [--rollouts N]
 * [--rollout-batch-size N] [--n-samples-per-prompt N]`; exit 0 when every check passed.
 *
 * @module
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { startSupervised } from "../../cli/child-process";
import { startLocalStack } from "../../cli/local-stack";
import { spawnPolar } from "../../cli/processes";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { checkReport, type DryRunReport } from "./dry-run-checks";
import { main as prepareData } from "./prepare-data";

const HERE = join(REPO_ROOT, "examples", "swegym_slime_grpo");

/** The template keys the dry run replaces: nothing here has the images or a codex login. */
const OFFLINE_TEMPLATE = {
  runtime: { backend: "local" },
  agent: {
    harness: "shell",
    custom_shell: {
      // One model call through the gateway's recording proxy, as any OpenAI client makes it.
      command:
        'node -e \'fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {method: "POST", headers: {"content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY}, body: JSON.stringify({model: process.env.OPENAI_MODEL, messages: [{role: "user", content: process.env.POLAR_INSTRUCTION}], max_tokens: 64})}).then(async (r) => { console.log(r.status, await r.text()); process.exit(r.ok ? 0 : 1); })\'',
    },
  },
  evaluator: {
    strategy: "./examples/swegym_slime_grpo/dry-run-evaluator.mjs:instanceReceived",
    config: { instance: "{sample.metadata.instance}" },
  },
};

/** `${VAR}` from `env`, an unset one an error naming it (run.sh's envsubst, made strict). */
function envsubst(text: string, env: Record<string, string | undefined>, source: string): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
    const v = env[name];
    if (v === undefined) throw new Error(`${source}: environment variable ${name} is not set`);
    return v;
  });
}

const { values: flags } = parseArgs({
  options: {
    out: { type: "string", default: join(".polar", "swegym-dry-run") },
    rollouts: { type: "string", default: "3" },
    "rollout-batch-size": { type: "string", default: "2" },
    "n-samples-per-prompt": { type: "string", default: "4" },
  },
});
function int(name: keyof typeof flags): number {
  const v = Number(flags[name]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`dry-run: --${name} must be an integer >= 1, got '${flags[name]}'`);
    process.exit(2);
  }
  return v;
}
const rollouts = int("rollouts");
const batch = int("rollout-batch-size");
const samples = int("n-samples-per-prompt");
const out = join(REPO_ROOT, flags.out!);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const started = Date.now();
const say = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);

const prompts = join(out, "prompts.jsonl");
const code = await prepareData([
  "node",
  "prepare-data.ts",
  "--instances",
  join(HERE, "instances.jsonl"),
  "--out",
  prompts,
]);
if (code !== 0) process.exit(code);

// The simulated engine serves the context slime's SGLang is started with (run.sh's
// --sglang-context-length, topology.yaml's context_length): the gateway checks the two agree.
const stack = await startLocalStack({
  gateways: 0,
  engine: "sglang",
  engineArgs: ["--context-length", "65536"],
});
let gateway: ReturnType<typeof spawnPolar> | undefined;
let ok = false;
try {
  const env: Record<string, string> = {
    POLAR_URL: stack.controlPlane.url,
    POLAR_GATEWAY_TOKEN: stack.tokens.gateway,
    POLAR_GATEWAY_WORK_ROOT: join(stack.root, "work"),
    POLAR_CONTAINER_CLI: "podman",
    POLAR_GATEWAY_NODE_ID: "swegym-dry-run-0",
    POLAR_MODEL: stack.model,
    SGLANG_ROUTER_BASE_URL: stack.engineUrl,
    RUN_ID: `swegym-dry-run-${Date.now().toString(36)}`,
    POLAR_MAX_ASYNC_LEVEL: "2",
  };
  gateway = spawnPolar("gateway (topology.yaml)", ["serve_gateway", "-c", join(HERE, "topology.yaml")], env);
  say(
    `control plane ${stack.controlPlane.url}, simulated engine ${stack.engineUrl} as slime's router, gateway from topology.yaml`,
  );

  const config = parseYaml(envsubst(readFileSync(join(HERE, "polar.yaml"), "utf8"), env, "polar.yaml"));
  writeFileSync(join(out, "polar.json"), JSON.stringify(config, null, 2));
  writeFileSync(join(out, "override.json"), JSON.stringify(OFFLINE_TEMPLATE, null, 2));
  const report = join(out, "report.json");
  const py = startSupervised(
    "slime side",
    "python3",
    [
      join(HERE, "dry_run_slime.py"),
      "--run-sh",
      join(HERE, "run.sh"),
      "--config",
      join(out, "polar.json"),
      "--prompts",
      prompts,
      "--override",
      join(out, "override.json"),
      "--set",
      `rollout_batch_size=${batch}`,
      "--set",
      `n_samples_per_prompt=${samples}`,
      "--rollouts",
      String(rollouts),
      "--save",
      join(out, "save"),
      "--report",
      report,
    ],
    {
      cwd: REPO_ROOT,
      env: {
        PYTHONPATH: [
          join(REPO_ROOT, "clients", "python", "src"),
          join(REPO_ROOT, "clients", "python", "tests", "standins"),
        ].join(":"),
        PYTHONDONTWRITEBYTECODE: "1",
        POLAR_TRAINER_TOKEN: stack.tokens.trainer,
        ENGINE_URL: stack.engineUrl,
      },
      stdio: "inherit",
    },
  );
  const exit = await py.exited;
  if (exit.code !== 0) {
    console.error(`--- gateway ---\n${gateway.output().slice(-3000)}`);
    throw new Error(`dry_run_slime.py exited with ${exit.code ?? exit.signal}`);
  }
  const r = JSON.parse(readFileSync(report, "utf8")) as DryRunReport;
  const problems = checkReport(r);
  const summary = {
    ok: problems.length === 0,
    problems,
    rollouts: r.rollouts.length,
    groups: r.rollouts.map((ro) => ro.groups.length),
    samples: r.rollouts.map((ro) => ro.groups.flat().length),
    rewards: r.rollouts.map((ro) => ro.raw_rewards),
    weight_versions: r.rollouts.map((ro) =>
      [...new Set(ro.groups.flat().flatMap((s) => s.weight_versions))].sort(),
    ),
    replaced_template_keys: r.replaced_template_keys,
    changed_flags: r.changed_flags,
    bridge_flags: r.flags,
    polar_keys: r.polar_keys,
    wall_seconds: (Date.now() - started) / 1000,
  };
  writeFileSync(join(out, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  for (const p of problems) console.error(`dry-run: ${p}`);
  ok = problems.length === 0;
  say(
    ok
      ? `dry run OK: ${summary.rollouts} rollouts, ${summary.samples.join("+")} samples, weight versions ${summary.weight_versions.map((v) => v.join(",")).join(" | ")}; replaced ${r.replaced_template_keys.join(", ")}`
      : `dry run FAILED (${problems.length} problems)`,
  );
} catch (err) {
  console.error(`dry-run failed: ${(err as Error).message}`);
} finally {
  await gateway?.stop();
  await stack.stop();
}
process.exit(ok ? 0 : 1);
