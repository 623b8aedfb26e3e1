/**
 * Parsing path and query parameters with errors that name the parameter.
 *
 * @module
 */
import { describeIssues, fieldIssues, Identifier } from "../../protocol";
import { ApiError } from "../errors";

/**
 * An optional integer query parameter within [min, max], or `fallback`; 400 naming it otherwise.
 *
 * @example
 * ```ts
 * integerParam("after", c.req.query("after"), 0, 0, Number.MAX_SAFE_INTEGER);
 * ```
 */
export function integerParam(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw ApiError.badRequest(
      "validation_failed",
      `${name}: must be an integer between ${min} and ${max}, got '${raw}'`,
      [{ field: name, message: `must be an integer between ${min} and ${max}` }],
    );
  }
  return value;
}

/**
 * An identifier parameter (batch id, task id, node id, queue); 400 naming `name` otherwise.
 *
 * @example
 * ```ts
 * identifierParam("batch_id", c.req.param("id"));
 * ```
 */
export function identifierParam(name: string, raw: string | undefined): string {
  const parsed = Identifier.safeParse(raw ?? "");
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error).map((i) => ({ ...i, field: name }));
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  return parsed.data;
}
