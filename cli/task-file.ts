/**
 * Reading task files: JSON or YAML, holding one task, a list of tasks, or a whole batch.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import {
  BatchRequest,
  type BatchRequestInput,
  describeIssues,
  fieldIssues,
  tooDeep,
  tooDeepMessage,
} from "../protocol";
import { UsageError } from "./usage-error";

/**
 * Loads `file` into a validated batch request. Errors name the file and the offending field.
 *
 * @example
 * ```ts
 * const batch = loadTaskFile("examples/hello/task.yaml", { queue: "default" });
 * ```
 */
export function loadTaskFile(
  file: string,
  overrides: { batchId?: string; queue?: string } = {},
): BatchRequestInput {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(
      `${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  let doc: unknown;
  try {
    doc = /\.ya?ml$/i.test(file) ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new UsageError(
      `${file}: not valid ${/\.ya?ml$/i.test(file) ? "YAML" : "JSON"}: ${(err as Error).message}`,
    );
  }
  const batch: Record<string, unknown> = Array.isArray(doc)
    ? { tasks: doc }
    : doc !== null && typeof doc === "object" && "tasks" in doc
      ? { ...(doc as Record<string, unknown>) }
      : { tasks: [doc] };
  if (overrides.batchId) batch.batch_id = overrides.batchId;
  if (overrides.queue) batch.queue = overrides.queue;
  // Deeper nesting (or a YAML alias that contains itself) could not be sent: JSON.stringify
  // overflows the stack or meets a cycle.
  const deep = tooDeep(batch);
  if (deep !== null) throw new UsageError(`${file}: ${tooDeepMessage(deep)}`);
  const parsed = BatchRequest.safeParse(batch);
  if (!parsed.success) throw new UsageError(`${file}: ${describeIssues(fieldIssues(parsed.error))}`);
  // Send what the user wrote (defaults are applied by the server), now known to be valid.
  return batch as BatchRequestInput;
}
