/**
 * Schema defaults of tool parameters, for matching echoed tool calls. Some harnesses echo a tool
 * call back with arguments the model never sampled, filled in from the tool's schema: Claude Code
 * 2.1 sends every `Edit` call back with `"replace_all": false` added, and its `Edit` schema declares
 * `"replace_all": {"type": "boolean", "default": false}`. Such a call says the same thing as the
 * one the proxy returned, so for matching, a key whose value equals the default its schema declares
 * (`properties.<key>.default`) is dropped on both sides. Only declared defaults count: an extra
 * `false`, `0` or `""` without a declared default is a different call.
 *
 * @module
 */
import { canonicalJson } from "../parsers/json-text";

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Parameter schemas by tool name, from OpenAI-shaped tools (`{type, function: {name, parameters}}`). */
export type ToolSchemas = ReadonlyMap<string, Record<string, unknown>>;

/**
 * The parameter schema of each tool, by name. Tools in the bridge are in the proxy's internal
 * OpenAI chat form (the Anthropic family turns `input_schema` into `function.parameters`); entries
 * without a name or an object schema are skipped.
 *
 * @example
 * ```ts
 * const schemas = toolSchemas([{ type: "function", function: { name: "Edit", parameters: { type: "object", properties: { replace_all: { type: "boolean", default: false } } } } }]);
 * schemas.get("Edit")?.properties; // { replace_all: { type: "boolean", default: false } }
 * ```
 */
export function toolSchemas(tools: readonly unknown[] | undefined): ToolSchemas {
  const out = new Map<string, Record<string, unknown>>();
  for (const t of tools ?? []) {
    const fn = isObj(t) ? t.function : undefined;
    if (!isObj(fn) || typeof fn.name !== "string" || !isObj(fn.parameters)) continue;
    if (!out.has(fn.name)) out.set(fn.name, fn.parameters);
  }
  return out;
}

/**
 * `value` without the object keys whose value equals the default their schema declares, at every
 * level the schema describes (`properties` of objects, `items` of arrays). Values and schemas are
 * not modified; parts the schema does not describe are returned as they are.
 *
 * @example
 * ```ts
 * const schema = { type: "object", properties: { replace_all: { type: "boolean", default: false } } };
 * withoutDefaults({ file_path: "a.js", replace_all: false }, schema); // { file_path: "a.js" }
 * withoutDefaults({ file_path: "a.js", replace_all: true }, schema); // unchanged
 * ```
 */
export function withoutDefaults(value: unknown, schema: unknown): unknown {
  if (!isObj(schema)) return value;
  if (Array.isArray(value)) {
    return isObj(schema.items) ? value.map((v) => withoutDefaults(v, schema.items)) : value;
  }
  if (!isObj(value) || !isObj(schema.properties)) return value;
  const props = schema.properties;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const prop = Object.hasOwn(props, key) ? props[key] : undefined;
    if (isObj(prop) && Object.hasOwn(prop, "default") && canonicalJson(v) === canonicalJson(prop.default)) {
      continue;
    }
    out[key] = withoutDefaults(v, prop);
  }
  return out;
}
