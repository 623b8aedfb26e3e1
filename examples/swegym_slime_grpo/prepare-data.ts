/**
 * SWE-Gym instances → slime's prompt data for the GRPO example: one JSONL row per instance,
 * `{prompt, label, metadata}` (slime's `--input-key prompt --label-key label --metadata-key
 * metadata`). The bridge renders `polar.yaml`'s task template per row: the instruction is the
 * prompt, `{sample.metadata.image}` the instance's image, `{sample.metadata.instance}` the raw row
 * that the gateway's `swebench_harness` evaluator grades with.
 *
 * SWE-Gym rows have SWE-bench's schema (`instance_id, repo, base_commit, patch, test_patch,
 * problem_statement, FAIL_TO_PASS, PASS_TO_PASS, version, …`), so they are checked by the
 * SWE-bench Verified generator's parser (examples/swebench_verified/generate-tasks.ts); a bad row
 * stops the run with `FILE:LINE: FIELD: message`, exit code 2.
 *
 * @module
 */
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import {
  GenerateError,
  type InstanceRow,
  instructionFor,
  parseInstances,
} from "../swebench_verified/generate-tasks";

/**
 * The image naming of SWE-Gym's published per-instance images: `{id}` is the instance id
 * lower-cased with `__` replaced by `_s_`.
 */
export const DEFAULT_SWEGYM_IMAGE_TEMPLATE = "xingyaoww/sweb.eval.x86_64.{id}:latest";

/**
 * The image id of an instance as SWE-Gym names its images.
 *
 * @example
 * ```ts
 * swegymImageId("getmoto__moto-5752"); // "getmoto_s_moto-5752"
 * ```
 */
export function swegymImageId(instanceId: string): string {
  return instanceId.replaceAll("__", "_s_").toLowerCase();
}

/** One prompt row of slime's data (`--input-key prompt --label-key label --metadata-key metadata`). */
export interface PromptRow {
  prompt: string;
  label: string;
  metadata: {
    dataset: "SWE-Gym";
    instance_id: string;
    repo: string;
    version: string | null;
    image: string;
    /** The raw dataset row: the evaluator's `config.instance`. */
    instance: Record<string, unknown>;
  };
}

/**
 * The prompt row of one instance.
 *
 * @example
 * ```ts
 * promptRow(parseInstances(text, "instances.jsonl")[0]!, DEFAULT_SWEGYM_IMAGE_TEMPLATE, false).metadata.image;
 * // "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-99901:latest"
 * ```
 */
export function promptRow(instance: InstanceRow, imageTemplate: string, withHints: boolean): PromptRow {
  const { row, raw } = instance;
  return {
    prompt: instructionFor(row, withHints),
    label: row.instance_id,
    metadata: {
      dataset: "SWE-Gym",
      instance_id: row.instance_id,
      repo: row.repo,
      version: row.version === undefined ? null : String(row.version),
      image: imageTemplate
        .replaceAll("{id}", swegymImageId(row.instance_id))
        .replaceAll("{instance_id}", row.instance_id),
      instance: raw,
    },
  };
}

function positiveInt(flag: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${flag} must be an integer >= 1`);
    return n;
  };
}

/**
 * The command line; returns the exit code (0, or 2 for bad input with a message on stderr).
 *
 * @example
 * ```ts
 * process.exitCode = await main(["node", "prepare-data.ts", "--instances", "swegym.jsonl", "--out", "prompts.jsonl"]);
 * ```
 */
export async function main(argv: string[]): Promise<number> {
  const program = new Command("prepare-data")
    .description("SWE-Gym rows (JSONL) -> slime prompt data (JSONL of {prompt, label, metadata})")
    .requiredOption("--instances <file>", "JSONL of SWE-Gym rows (SWE-bench's schema)")
    .requiredOption("--out <file>", "the prompt data to write")
    .option(
      "--image-template <t>",
      "image name; {id} = SWE-Gym image id, {instance_id} = raw id",
      DEFAULT_SWEGYM_IMAGE_TEMPLATE,
    )
    .option("--with-hints", "append hints_text to the prompt", false)
    .option("--instance-id <id...>", "only these instances")
    .option("--limit <n>", "at most this many instances", positiveInt("--limit"))
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  try {
    program.parse(argv);
  } catch (err) {
    return (err as { exitCode?: number }).exitCode === 0 ? 0 : 2;
  }
  const o = program.opts<{
    instances: string;
    out: string;
    imageTemplate: string;
    withHints: boolean;
    instanceId?: string[];
    limit?: number;
  }>();
  try {
    if (!o.imageTemplate.includes("{id}") && !o.imageTemplate.includes("{instance_id}"))
      throw new GenerateError("--image-template: must contain {id} or {instance_id}");
    let text: string;
    try {
      text = readFileSync(o.instances, "utf8");
    } catch (err) {
      throw new GenerateError(
        `--instances: cannot read ${o.instances} (${(err as NodeJS.ErrnoException).code})`,
      );
    }
    let rows = parseInstances(text, o.instances);
    if (o.instanceId) {
      const wanted = new Set(o.instanceId);
      const missing = [...wanted].filter((id) => !rows.some((r) => r.row.instance_id === id));
      if (missing.length)
        throw new GenerateError(`--instance-id: not in ${o.instances}: ${missing.join(", ")}`);
      rows = rows.filter((r) => wanted.has(r.row.instance_id));
    }
    if (o.limit) rows = rows.slice(0, o.limit);
    const out = rows.map((r) => JSON.stringify(promptRow(r, o.imageTemplate, o.withHints))).join("\n");
    writeFileSync(o.out, `${out}\n`);
    process.stderr.write(`${o.out}: ${rows.length} prompts\n`);
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
