/**
 * A bound on how deeply parsed JSON may nest. `JSON.parse` takes any depth, but what comes after
 * recurses: `JSON.stringify`, `structuredClone` and Durable Object RPC (which clones) overflow the
 * stack at a few thousand levels (about 5 000 on Node 20), so an input nested deeper than that
 * would fail as an internal error wherever it is next stored or sent. Inputs are checked once,
 * where they are parsed, against {@link LIMITS.maxJsonDepth}, far above what any real request or
 * result uses.
 *
 * @module
 */
import { formatPath } from "./errors";
import { LIMITS } from "./limits";

/**
 * The path of the first value nested deeper than `limit` levels (an object or array at depth
 * `limit + 1`; the root is depth 1), as `tasks[0].metadata.a`, or null when `value` stays within
 * it. Iterative, so it cannot overflow the stack itself.
 *
 * @example
 * ```ts
 * tooDeep({ a: [[1]] }, 2); // "a[0]"
 * tooDeep({ a: [1] }, 2); // null
 * ```
 */
export function tooDeep(value: unknown, limit: number = LIMITS.maxJsonDepth): string | null {
  const stack: { value: unknown; depth: number; path: PropertyKey[] }[] = [{ value, depth: 1, path: [] }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.value === null || typeof node.value !== "object") continue;
    if (node.depth > limit) return formatPath(node.path);
    const push = (key: PropertyKey, child: unknown) => {
      if (child !== null && typeof child === "object")
        stack.push({ value: child, depth: node.depth + 1, path: [...node.path, key] });
    };
    if (Array.isArray(node.value)) {
      for (let i = 0; i < node.value.length; i++) push(i, node.value[i]);
    } else {
      const record = node.value as Record<string, unknown>;
      for (const key of Object.keys(record)) push(key, record[key]);
    }
  }
  return null;
}

/**
 * The message of a value that nests too deeply, naming where.
 *
 * @example
 * ```ts
 * tooDeepMessage("tasks[0].metadata.a"); // "tasks[0].metadata.a: nests more than 128 levels deep (LIMITS.maxJsonDepth)"
 * ```
 */
export function tooDeepMessage(path: string, limit: number = LIMITS.maxJsonDepth): string {
  // A long path is cut after a whole segment: `tasks[0].metadata.a.a…`.
  const cut = path.slice(0, 120);
  const end = Math.max(cut.lastIndexOf("."), cut.lastIndexOf("["));
  const shown = path.length > 120 ? `${cut.slice(0, end > 0 ? end : 120)}…` : path;
  return `${shown}: nests more than ${limit} levels deep (LIMITS.maxJsonDepth)`;
}
