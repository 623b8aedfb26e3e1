/**
 * The engine's own parsers, for a model whose format Polar-TS does not parse: which ones the engine
 * was launched with, and whether it has the ones named, both asked at start.
 *
 * - SGLang's `GET /server_info` (`/get_server_info` before 0.5) returns its server arguments flat,
 *   `tool_call_parser` and `reasoning_parser` among them (null when not given at launch).
 * - `POST /parse_function_call {text: "", tools: [], tool_call_parser}` and
 *   `POST /separate_reasoning {text: "", reasoning_parser}` build the named parser before parsing
 *   anything; a name SGLang does not have raises `ValueError` there (a 500 naming it), so an empty
 *   parse is a check of the name that costs nothing.
 *
 * @module
 */
import type { JsonObject } from "../../../protocol";

/** The parsers an engine was launched with (null: not given at launch). */
export interface EngineParserArgs {
  url: string;
  toolCallParser: string | null;
  reasoningParser: string | null;
}

async function fetchJson(
  url: string,
  timeoutMs: number,
  body?: JsonObject,
): Promise<{ status: number; json: unknown } | null> {
  try {
    const r = await fetch(url, {
      signal: AbortSignal.timeout(timeoutMs),
      ...(body === undefined
        ? {}
        : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    });
    const text = await r.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: r.status, json };
  } catch {
    return null;
  }
}

const nameOf = (v: unknown) => (typeof v === "string" && v !== "" ? v : null);

/**
 * The parser names of the first replica whose `/server_info` answers; null when none does
 * (unreachable, a router, a build without the endpoint).
 *
 * @example
 * ```ts
 * await engineParserArgs(["http://127.0.0.1:30000"]);
 * // { url: "http://127.0.0.1:30000", toolCallParser: "mistral", reasoningParser: null }
 * ```
 */
export async function engineParserArgs(
  urls: readonly string[],
  opts: { timeoutMs?: number } = {},
): Promise<EngineParserArgs | null> {
  for (const url of urls) {
    const base = url.replace(/\/+$/, "");
    for (const path of ["/server_info", "/get_server_info"]) {
      const r = await fetchJson(`${base}${path}`, opts.timeoutMs ?? 3_000);
      if (r === null || r.status !== 200 || typeof r.json !== "object" || r.json === null) continue;
      const info = r.json as Record<string, unknown>;
      return {
        url,
        toolCallParser: nameOf(info.tool_call_parser),
        reasoningParser: nameOf(info.reasoning_parser),
      };
    }
  }
  return null;
}

/**
 * The engine has no parser of a name it was asked for; `option` is the token-mode option that
 * gave the name (`toolCallParser`, `reasoningParser`).
 *
 * @example
 * ```ts
 * try { await checkEngineParsers(url, { tool: "nope", reasoning: null }); } catch (e) { (e as EngineParserError).option; } // "toolCallParser"
 * ```
 */
export class EngineParserError extends Error {
  override readonly name = "EngineParserError";
  constructor(
    readonly option: "toolCallParser" | "reasoningParser",
    message: string,
  ) {
    super(message);
  }
}

/**
 * Asks the engine at `url` to build each named parser (an empty parse). Resolves `true` when it
 * did, `false` when the engine could not be reached (the names stay unchecked); throws
 * {@link EngineParserError} when the engine refused a name.
 *
 * @example
 * ```ts
 * await checkEngineParsers("http://127.0.0.1:30000", { tool: "mistral", reasoning: null }); // true
 * ```
 */
export async function checkEngineParsers(
  url: string,
  names: { tool: string; reasoning: string | null },
  opts: { timeoutMs?: number } = {},
): Promise<boolean> {
  const base = url.replace(/\/+$/, "");
  const timeoutMs = opts.timeoutMs ?? 3_000;
  const asks: Array<[EngineParserError["option"], string, JsonObject]> = [
    ["toolCallParser", "/parse_function_call", { text: "", tools: [], tool_call_parser: names.tool }],
  ];
  if (names.reasoning !== null)
    asks.push(["reasoningParser", "/separate_reasoning", { text: "", reasoning_parser: names.reasoning }]);
  for (const [option, path, body] of asks) {
    const r = await fetchJson(`${base}${path}`, timeoutMs, body);
    if (r === null) return false;
    if (r.status < 200 || r.status >= 300) {
      const said = typeof r.json === "string" ? r.json : JSON.stringify(r.json);
      const name = option === "toolCallParser" ? names.tool : names.reasoning;
      throw new EngineParserError(
        option,
        `the engine at ${url} has no parser '${name}': POST ${path} answered ${r.status} ${said.slice(0, 200)}`,
      );
    }
  }
  return true;
}
