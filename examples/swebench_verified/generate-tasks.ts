/**
 * SWE-bench Verified task generator: reads a JSONL of dataset rows and writes a batch file of
 * task specs for `polar submit` — one task per instance, each in that instance's SWE-bench image,
 * graded by the gateway's `swebench_harness` evaluator in a fresh container.
 *
 * ```sh
 * npx tsx examples/swebench_verified/generate-tasks.ts --instances verified.jsonl \
 *   --harness claude_code --samples 4 --out tasks.yaml
 * ```
 *
 * Layout of a generated task (upstream's SWE-bench example, kept key for key):
 * - the image ships the repository at `/testbed` with its conda env; the prepare step copies it
 *   into the session workspace, where the harness works (so the agent's edits live on the host
 *   bind mount and `/testbed` stays pristine);
 * - the evaluator extracts the agent's diff from the workspace (`patch_command` does the `cd`),
 *   applies it to `/testbed` of a fresh container (`refresh_runtime`) — the path the image's
 *   editable install points at — and runs the instance's tests there.
 *
 * @module
 */
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import { stringify as toYaml } from "yaml";
import { z } from "zod";
import {
  BatchRequest,
  type BatchRequestInput,
  HarnessName,
  LIMITS,
  type TaskSpecInput,
} from "../../protocol";

/** SWE-bench's public image naming: `swebench/sweb.eval.x86_64.<id>:latest`. */
export const DEFAULT_IMAGE_TEMPLATE = "swebench/sweb.eval.x86_64.{id}:latest";
/** Where SWE-bench images keep the repository (and where grading happens). */
export const TESTBED = "/testbed";
/** The gateway docker runtime's default workdir (`/polar/session` is the session bind mount). */
export const WORKSPACE = "/polar/session/workspace";
/** Upstream's per-session budget for SWE-bench (init + run + grading), seconds. */
export const DEFAULT_TIMEOUT_SECONDS = 3600;
/**
 * PATH with the image's `testbed` conda env first. Harness steps run with HOME in the session
 * folder, so the image's `/root/.bashrc` (which activates the env) is never read: without this
 * the agent's `python` and `pytest` would not be the project's.
 */
export const TESTBED_PATH =
  "/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Trajectory builders the generator offers (`--builder`). */
export const BUILDERS = ["prefix_merging", "conversation"] as const;
export type BuilderName = (typeof BUILDERS)[number];

/** A bad input row or option; the message names the file, line and field (or the flag). */
export class GenerateError extends Error {
  override name = "GenerateError";
}

/** A JSON-encoded list of strings (the dataset's encoding) or a plain list of strings. */
const TestList = z.unknown().transform((value, ctx): string[] => {
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      ctx.addIssue({ code: "custom", message: "not a JSON-encoded list of strings" });
      return z.NEVER;
    }
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
      ctx.addIssue({ code: "custom", message: "must encode a list of strings" });
      return z.NEVER;
    }
  } else if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
    ctx.addIssue({ code: "custom", message: "must be a list of strings or a JSON-encoded one" });
    return z.NEVER;
  }
  return v as string[];
});

const required = z.string({ error: "required string" }).min(1, "must not be empty");

/**
 * The SWE-bench Verified row schema, as far as task generation and grading need it. Other keys
 * pass through untouched: the evaluator receives the raw row.
 */
export const SwebenchRow = z.looseObject({
  instance_id: required,
  repo: required.regex(/^[^/\s]+\/[^/\s]+$/, "must be owner/name"),
  base_commit: required.regex(/^[0-9a-f]{7,40}$/, "must be a git commit hash"),
  patch: z.string().optional(),
  test_patch: required,
  problem_statement: required,
  hints_text: z.string().optional(),
  created_at: z.string().optional(),
  version: z.union([z.string(), z.number()]).optional(),
  FAIL_TO_PASS: TestList.refine((l) => l.length > 0, "must list at least one test"),
  PASS_TO_PASS: z.optional(TestList),
  environment_setup_commit: z.string().optional(),
});

/** One input row: its line number, the raw object (sent as is) and the checked view. */
export interface InstanceRow {
  line: number;
  raw: Record<string, unknown>;
  row: z.infer<typeof SwebenchRow>;
}

/**
 * Parses a JSONL text of SWE-bench rows (blank lines skipped). Every problem is reported, each
 * as `file:line: field: message`.
 *
 * @example
 * ```ts
 * const rows = parseInstances(readFileSync("instances.jsonl", "utf8"), "instances.jsonl");
 * ```
 */
export function parseInstances(text: string, source: string): InstanceRow[] {
  const rows: InstanceRow[] = [];
  const problems: string[] = [];
  const ids = new Map<string, number>();
  text.split("\n").forEach((content, i) => {
    const line = i + 1;
    if (!content.trim()) return;
    let raw: unknown;
    try {
      raw = JSON.parse(content);
    } catch (err) {
      problems.push(`${source}:${line}: not valid JSON (${(err as Error).message})`);
      return;
    }
    if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
      problems.push(`${source}:${line}: must be a JSON object`);
      return;
    }
    const parsed = SwebenchRow.safeParse(raw);
    if (!parsed.success) {
      for (const issue of parsed.error.issues)
        problems.push(`${source}:${line}: ${issue.path.join(".") || "(row)"}: ${issue.message}`);
      return;
    }
    const seen = ids.get(parsed.data.instance_id);
    if (seen !== undefined) {
      problems.push(`${source}:${line}: instance_id: '${parsed.data.instance_id}' already on line ${seen}`);
      return;
    }
    ids.set(parsed.data.instance_id, line);
    rows.push({ line, raw: raw as Record<string, unknown>, row: parsed.data });
  });
  if (problems.length) throw new GenerateError(problems.join("\n"));
  if (rows.length === 0) throw new GenerateError(`${source}: no instances`);
  return rows;
}

/**
 * The instance id as SWE-bench names images: lower-cased, `__` replaced by `_1776_` (image names
 * may not hold a double underscore where the dataset ids have one).
 *
 * @example
 * ```ts
 * swebenchImageId("django__django-11099"); // "django_1776_django-11099"
 * ```
 */
export function swebenchImageId(instanceId: string): string {
  return instanceId.replaceAll("__", "_1776_").toLowerCase();
}

/**
 * Fills an image template: `{id}` → {@link swebenchImageId}, `{instance_id}` → the raw id.
 *
 * @example
 * ```ts
 * imageFor("django__django-11099"); // "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
 * ```
 */
export function imageFor(instanceId: string, template = DEFAULT_IMAGE_TEMPLATE): string {
  return template.replaceAll("{id}", swebenchImageId(instanceId)).replaceAll("{instance_id}", instanceId);
}

/** A task id from an instance id: the protocol's identifier alphabet, at most 128 characters. */
export function taskIdFor(instanceId: string, prefix = ""): string {
  return `${prefix}${instanceId}`.replace(/[^A-Za-z0-9_.:-]/g, "-").slice(0, 128);
}

/** The agent's instruction: the issue text, plus the hints when asked for and present. */
export function instructionFor(row: z.infer<typeof SwebenchRow>, withHints: boolean): string {
  const statement = row.problem_statement.trim();
  const hints = row.hints_text?.trim();
  return withHints && hints ? `${statement}\n\nHints:\n${hints}` : statement;
}

/** Generator options (the CLI flags). */
export interface GenerateOptions {
  harness: z.infer<typeof HarnessName>;
  samples: number;
  imageTemplate: string;
  timeoutSeconds: number;
  builder: BuilderName;
  withHints: boolean;
  taskPrefix: string;
}

/** Defaults of {@link GenerateOptions} (besides `harness`). */
export const DEFAULT_OPTIONS: Omit<GenerateOptions, "harness"> = {
  samples: 1,
  imageTemplate: DEFAULT_IMAGE_TEMPLATE,
  timeoutSeconds: DEFAULT_TIMEOUT_SECONDS,
  builder: "prefix_merging",
  withHints: false,
  taskPrefix: "",
};

/**
 * The prepare step: copy `/testbed` (history included) into the workspace. `safe.directory`:
 * the workspace lives on a host bind mount whose owner may differ from the container user, and
 * git refuses to read such a repository (the evaluator's `git diff` would fail).
 */
export const PREPARE_COMMAND = [
  "set -euo pipefail",
  `rm -rf ${WORKSPACE}`,
  `mkdir -p ${WORKSPACE}`,
  `cp -a ${TESTBED}/. ${WORKSPACE}/`,
  "git config --system --add safe.directory '*'",
  `git -C ${WORKSPACE} status --short >/dev/null`,
].join(" && ");

/** Paths a harness writes inside the repository that never belong in the graded diff. */
export const HARNESS_EXCLUDES: Partial<Record<GenerateOptions["harness"], string[]>> = {
  claude_code: [".claude/**"],
  opencode: [".opencode/**"],
  qwen_code: [".qwen/**"],
  gemini_cli: [".gemini/**"],
};

/**
 * One task spec for one instance.
 *
 * @example
 * ```ts
 * const task = buildTask(rows[0], { ...DEFAULT_OPTIONS, harness: "codex" });
 * ```
 */
export function buildTask(instance: InstanceRow, o: GenerateOptions): TaskSpecInput {
  const { row, raw } = instance;
  return {
    task_id: taskIdFor(row.instance_id, o.taskPrefix),
    instruction: instructionFor(row, o.withHints),
    num_samples: o.samples,
    timeout_seconds: o.timeoutSeconds,
    runtime: {
      backend: "docker",
      image: imageFor(row.instance_id, o.imageTemplate),
      workdir: WORKSPACE,
      env: { PATH: TESTBED_PATH },
      // cwd "/": the workspace does not exist before this step, and `exec -w` needs it to.
      prepare: [{ type: "exec", command: PREPARE_COMMAND, cwd: "/" }],
    },
    agent: { harness: o.harness },
    builder: { strategy: o.builder },
    evaluator: {
      strategy: "swebench_harness",
      refresh_runtime: true,
      config: {
        instance: raw,
        repo_dir: TESTBED,
        patch_command: `cd ${WORKSPACE} && git add -A && git diff --cached --binary`,
        ...(HARNESS_EXCLUDES[o.harness] ? { exclude_patterns: HARNESS_EXCLUDES[o.harness] } : {}),
      },
    },
    metadata: {
      dataset: "SWE-bench_Verified",
      instance_id: row.instance_id,
      repo: row.repo,
      ...(row.version !== undefined ? { version: String(row.version) } : {}),
    },
  };
}

/**
 * The whole batch, validated with `BatchRequest`; a failing task is reported by its input line.
 *
 * @example
 * ```ts
 * const batch = generateBatch(rows, { ...DEFAULT_OPTIONS, harness: "claude_code" }, "instances.jsonl");
 * ```
 */
export function generateBatch(rows: InstanceRow[], o: GenerateOptions, source: string): BatchRequestInput {
  const batch: BatchRequestInput = { tasks: rows.map((r) => buildTask(r, o)) };
  const parsed = BatchRequest.safeParse(batch);
  if (!parsed.success) {
    throw new GenerateError(
      parsed.error.issues
        .map((issue) => {
          const [tasks, index, ...rest] = issue.path;
          const row = tasks === "tasks" && typeof index === "number" ? rows[index] : undefined;
          const where = row ? `${source}:${row.line} (${row.row.instance_id})` : source;
          return `${where}: ${rest.join(".") || issue.path.join(".") || "(batch)"}: ${issue.message}`;
        })
        .join("\n"),
    );
  }
  return batch;
}

function positiveInt(flag: string, max: number) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > max)
      throw new InvalidArgumentError(`${flag} must be an integer from 1 to ${max}`);
    return n;
  };
}

/**
 * The command line; returns the exit code (0, or 2 for bad input with a message on stderr).
 *
 * @example
 * ```ts
 * process.exitCode = await main(process.argv);
 * ```
 */
export async function main(argv: string[]): Promise<number> {
  const program = new Command("generate-tasks")
    .description("SWE-bench Verified rows (JSONL) -> a batch of Polar tasks (YAML or JSON)")
    .requiredOption("--instances <file>", "JSONL of SWE-bench rows")
    .requiredOption(
      "--harness <name>",
      `harness preset (${HarnessName.options.filter((h) => h !== "shell").join(", ")})`,
    )
    .option(
      "--samples <n>",
      "sessions per instance (GRPO group size)",
      positiveInt("--samples", LIMITS.maxSamplesPerTask),
      1,
    )
    .option(
      "--image-template <t>",
      "image name; {id} = SWE-bench image id, {instance_id} = raw id",
      DEFAULT_IMAGE_TEMPLATE,
    )
    .option(
      "--timeout <s>",
      "per-session budget in seconds",
      positiveInt("--timeout", LIMITS.maxTimeoutSeconds),
      DEFAULT_TIMEOUT_SECONDS,
    )
    .option("--builder <name>", `trajectory builder (${BUILDERS.join(", ")})`, "prefix_merging")
    .option("--with-hints", "append hints_text to the instruction", false)
    .option("--instance-id <id...>", "only these instances")
    .option(
      "--limit <n>",
      "at most this many instances (after --instance-id)",
      positiveInt("--limit", LIMITS.maxTasksPerBatch),
    )
    .option("--task-prefix <p>", "prefix of every task_id", "")
    .option("--out <file>", "write here (.json → JSON, else YAML); default stdout")
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  try {
    program.parse(argv);
  } catch (err) {
    const code = (err as { exitCode?: number }).exitCode;
    return code === 0 ? 0 : 2;
  }
  const opts = program.opts<{
    instances: string;
    harness: string;
    samples: number;
    imageTemplate: string;
    timeout: number;
    builder: string;
    withHints: boolean;
    instanceId?: string[];
    limit?: number;
    taskPrefix: string;
    out?: string;
  }>();
  try {
    const harness = HarnessName.safeParse(opts.harness);
    if (!harness.success || harness.data === "shell")
      throw new GenerateError(
        `--harness: '${opts.harness}' is not a preset (${HarnessName.options.filter((h) => h !== "shell").join(", ")})`,
      );
    if (!(BUILDERS as readonly string[]).includes(opts.builder))
      throw new GenerateError(`--builder: '${opts.builder}' is not one of ${BUILDERS.join(", ")}`);
    if (!opts.imageTemplate.includes("{id}") && !opts.imageTemplate.includes("{instance_id}"))
      throw new GenerateError("--image-template: must contain {id} or {instance_id}");
    let text: string;
    try {
      text = readFileSync(opts.instances, "utf8");
    } catch (err) {
      throw new GenerateError(
        `--instances: cannot read ${opts.instances} (${(err as NodeJS.ErrnoException).code})`,
      );
    }
    let rows = parseInstances(text, opts.instances);
    if (opts.instanceId) {
      const wanted = new Set(opts.instanceId);
      const missing = [...wanted].filter((id) => !rows.some((r) => r.row.instance_id === id));
      if (missing.length)
        throw new GenerateError(`--instance-id: not in ${opts.instances}: ${missing.join(", ")}`);
      rows = rows.filter((r) => wanted.has(r.row.instance_id));
    }
    if (opts.limit) rows = rows.slice(0, opts.limit);
    const batch = generateBatch(
      rows,
      {
        harness: harness.data,
        samples: opts.samples,
        imageTemplate: opts.imageTemplate,
        timeoutSeconds: opts.timeout,
        builder: opts.builder as BuilderName,
        withHints: opts.withHints,
        taskPrefix: opts.taskPrefix,
      },
      opts.instances,
    );
    const out = opts.out?.endsWith(".json")
      ? `${JSON.stringify(batch, null, 2)}\n`
      : toYaml(batch, { lineWidth: 0, aliasDuplicateObjects: false });
    if (opts.out) {
      writeFileSync(opts.out, out);
      process.stderr.write(`${opts.out}: ${batch.tasks.length} tasks\n`);
    } else process.stdout.write(out);
    return 0;
  } catch (err) {
    if (err instanceof GenerateError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv);
}
