/**
 * JSON text helpers shared by the output parsers and the token bridge.
 *
 * @module
 */

/**
 * Python's `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` separators, keys in insertion
 * order. SGLang re-serialises parsed tool arguments this way and Jinja's `tojson` in HF chat
 * templates prints the same spacing, so tool calls look to the harness as they would from SGLang.
 *
 * @example
 * ```ts
 * pythonJsonDumps({ a: [1, 2], b: "é" }); // '{"a": [1, 2], "b": "é"}'
 * ```
 */
export function pythonJsonDumps(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * Compact JSON with object keys sorted at every level: two values that differ only in key order or
 * whitespace of their serialisation give the same string. Used to compare tool arguments that a
 * harness re-serialised.
 *
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: { d: 2, c: 3 } }); // '{"a":{"c":3,"d":2},"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value as Record<string, unknown>)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * Parses JSON, returning `undefined` instead of throwing (model output is often malformed).
 *
 * @example
 * ```ts
 * tryParseJson('{"a": 1}'); // { a: 1 }
 * tryParseJson("{oops"); // undefined
 * ```
 */
export function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
