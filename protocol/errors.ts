/**
 * Turning validation failures into messages that name the offending field.
 *
 * @module
 */
import type { z } from "zod";

/** One problem with an input: a dotted path (`tasks[0].num_samples`) and what is wrong. */
export interface FieldIssue {
  field: string;
  message: string;
}

/** Renders a zod path as `tasks[0].agent.harness`; the root is `(body)`. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out || "(body)";
}

/**
 * Flattens a zod error into field issues. Unknown keys become one issue per key, with the key in
 * the field path, so `{tasks:[{foo:1}]}` reports `tasks[0].foo: unknown key`.
 *
 * @example
 * ```ts
 * const r = TaskSpec.safeParse(input);
 * if (!r.success) console.error(describeIssues(fieldIssues(r.error)));
 * ```
 */
export function fieldIssues(error: z.ZodError): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys)
        out.push({ field: formatPath([...issue.path, key]), message: "unknown key" });
      continue;
    }
    if (issue.code === "invalid_union" && "errors" in issue && Array.isArray(issue.errors)) {
      // Report the first branch's issues: they name the real field instead of "invalid input".
      const first = issue.errors[0] as z.core.$ZodIssue[] | undefined;
      if (first && first.length > 0) {
        for (const sub of first)
          out.push({ field: formatPath([...issue.path, ...sub.path]), message: sub.message });
        continue;
      }
    }
    out.push({ field: formatPath(issue.path), message: issue.message });
  }
  return out;
}

/** `field: message; field: message` — for CLI output and error bodies. */
export function describeIssues(issues: FieldIssue[]): string {
  return issues.map((i) => `${i.field}: ${i.message}`).join("; ");
}
