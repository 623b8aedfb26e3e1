/**
 * Delegated parsing (`--delegate-parsing`): the sampled text is split into reasoning, content and
 * tool calls by SGLang's own parsers instead of the proxy's TS ones. Polar's parser names are
 * mapped to the names the engine (or the router) registers, because neither knows Polar's
 * `qwen3` tool-call parser; a name with no mapping is refused when the proxy starts. A worker is
 * asked at `POST /separate_reasoning` and `POST /parse_function_call`; the router itself (when
 * the proxy has to call it) at `POST /parse/reasoning` and `POST /parse/function_call`, whose
 * bodies and answers differ.
 *
 * @module
 */
import type { JsonObject } from "../../../protocol";
import type { ToolDefinition } from "../../../tokenizer/chat-tokenizer";
import type { AssistantView } from "../../../tokenizer/parsers";
import { newToolCallId, pythonJsonDumps, tryParseJson } from "../../../tokenizer/parsers";
import { EngineContractError, EngineStatusError } from "../../errors";
import { isObject, objects } from "../../json";
import { postJson } from "../../upstream";

/** What delegated parsing needs of the proxy's call context (not the whole of it: `call.ts` imports the token mode, which imports this). */
interface ParseDeps {
  timeoutMs: number;
}

/** Which parse API a replica speaks: an SGLang server's, or the model gateway's (router). */
export type ParseTarget = "engine" | "router";

/**
 * Polar tool-call parser name → the name SGLang's `FunctionCallParser.ToolCallParserEnum`
 * registers (`function_call_parser.py`, SGLang 0.5.x / main as of 2026-11: `qwen`, `qwen25`,
 * `qwen3_coder`, `hermes`, …; there is no `qwen3`, and an unknown name raises `ValueError`, a 500),
 * and the name the router's tool-parser factory registers (`qwen`, `qwen_coder`, …; unknown → 400).
 * Qwen3's `<tool_call>{json}</tool_call>` format is what SGLang's `Qwen25Detector` parses.
 */
const TOOL_PARSER_NAMES: Readonly<Record<string, Record<ParseTarget, string>>> = {
  qwen3: { engine: "qwen25", router: "qwen" },
  qwen25: { engine: "qwen25", router: "qwen" },
  qwen: { engine: "qwen", router: "qwen" },
  hermes: { engine: "hermes", router: "qwen" },
  qwen3_coder: { engine: "qwen3_coder", router: "qwen_coder" },
  // DeepSeek V3's calls: SGLang's `DeepSeekV3Detector`, the router's `deepseek` parser.
  deepseekv3: { engine: "deepseekv3", router: "deepseek" },
};

/**
 * Polar reasoning parser name → SGLang's `ReasoningParser.DetectorMap` key (`reasoning_parser.py`:
 * `qwen3`, `qwen3-thinking`, `deepseek-r1`, …; unknown → `ValueError`, a 500) and the router's
 * reasoning-parser factory key (`qwen3`, `qwen3_thinking`, `deepseek_r1`). `none` asks no one.
 */
const REASONING_PARSER_NAMES: Readonly<Record<string, Record<ParseTarget, string> | null>> = {
  qwen3: { engine: "qwen3", router: "qwen3" },
  "qwen3-thinking": { engine: "qwen3-thinking", router: "qwen3_thinking" },
  "deepseek-r1": { engine: "deepseek-r1", router: "deepseek_r1" },
  none: null,
};

/** The engine-side parser names of one proxy, for both parse APIs. */
export interface DelegatedParserNames {
  tool: Record<ParseTarget, string>;
  /** null: reasoning is not separated (`none`). */
  reasoning: Record<ParseTarget, string> | null;
}

/** A Polar parser name has no engine-side name; `option` is the proxy option to fix. */
export class UnmappedParserError extends Error {
  override readonly name = "UnmappedParserError";
  constructor(
    readonly option: "toolCallParser" | "reasoningParser",
    value: string,
    known: readonly string[],
  ) {
    super(`'${value}' has no SGLang parser to delegate to (delegable: ${known.join(", ")})`);
  }
}

/**
 * The names to send SGLang for Polar's parser names; throws {@link UnmappedParserError} for a
 * name SGLang has no parser for, so `--delegate-parsing` fails at start, not on the first tool turn.
 *
 * @example
 * ```ts
 * delegatedParserNames("qwen3", "qwen3-thinking");
 * // { tool: { engine: "qwen25", router: "qwen" }, reasoning: { engine: "qwen3-thinking", router: "qwen3_thinking" } }
 * ```
 */
export function delegatedParserNames(toolParser: string, reasoningParser: string): DelegatedParserNames {
  const tool = TOOL_PARSER_NAMES[toolParser];
  if (!tool) throw new UnmappedParserError("toolCallParser", toolParser, Object.keys(TOOL_PARSER_NAMES));
  if (!(reasoningParser in REASONING_PARSER_NAMES))
    throw new UnmappedParserError("reasoningParser", reasoningParser, Object.keys(REASONING_PARSER_NAMES));
  return { tool, reasoning: REASONING_PARSER_NAMES[reasoningParser] ?? null };
}

/**
 * The names to send for a format Polar-TS does not parse: the engine's own names, as given (a
 * reasoning name Polar knows is still mapped; `none` asks no one). Through the router the same
 * name is sent, so it must be one the router's parser factory has too.
 *
 * @example
 * ```ts
 * engineParserNames("mistral", "none"); // { tool: { engine: "mistral", router: "mistral" }, reasoning: null }
 * ```
 */
export function engineParserNames(toolParser: string, reasoningParser: string): DelegatedParserNames {
  const reasoning =
    reasoningParser === "none"
      ? null
      : (REASONING_PARSER_NAMES[reasoningParser] ?? { engine: reasoningParser, router: reasoningParser });
  return { tool: { engine: toolParser, router: toolParser }, reasoning };
}

/** The view one parse API gives; the caller assigns tool-call ids. */
async function postParse(deps: ParseDeps, base: string, path: string, body: JsonObject): Promise<JsonObject> {
  const r = await postJson(
    `${base}${path}`,
    body,
    { "content-type": "application/json" },
    { timeoutMs: deps.timeoutMs },
  );
  if (r.status < 200 || r.status >= 300) throw new EngineStatusError(r.status, r.body, r.contentType);
  const json = tryParseJson(r.body);
  if (!isObject(json)) throw new EngineContractError(`${path} (body)`, "is not a JSON object");
  return json as JsonObject;
}

/**
 * A call's arguments as the harness gets them: SGLang and the router both give a JSON string
 * (`ToolCallItem.parameters`, the router's `function.arguments`); it is re-dumped the way SGLang's
 * chat endpoint shows it, or passed on verbatim when it is not JSON.
 */
function argumentsText(raw: unknown): string {
  const parsed = typeof raw === "string" ? tryParseJson(raw) : raw;
  if (typeof raw === "string" && parsed === undefined) return raw;
  return pythonJsonDumps(parsed ?? {});
}

/** One delegated parse. */
export interface DelegatedParse {
  names: DelegatedParserNames;
  /** Which API `base` speaks. */
  target: ParseTarget;
  text: string;
  tools: readonly ToolDefinition[];
  /** The prompt opened a think block: the output starts inside it. */
  startsInReasoning: boolean;
}

/**
 * The assistant view from SGLang's own parsers: reasoning first (`/separate_reasoning`, router
 * `/parse/reasoning`), then tool calls on the rest (`/parse_function_call` with `{text,
 * tool_call_parser, tools}` → `{normal_text, calls: [{tool_index, name, parameters}]}`; router
 * `/parse/function_call` → `{remaining_text, tool_calls: [{function: {name, arguments}}]}`).
 * Failures throw the engine's status or a contract error naming the field.
 *
 * @example
 * ```ts
 * const view = await delegatedView(deps, url, { names, target: "engine", text, tools, startsInReasoning: false });
 * view.tool_calls[0]?.function.name; // "calc"
 * ```
 */
export async function delegatedView(
  deps: ParseDeps,
  base: string,
  parse: DelegatedParse,
): Promise<AssistantView> {
  const { names, target, text, tools } = parse;
  const router = target === "router";
  let reasoning: string | null = null;
  let rest = text;
  if (names.reasoning) {
    // SGLang's parser reads the output as starting inside the block only for its *-thinking
    // names; a prompt that opened the block is shown to it as the model's own `<think>`.
    const sep = await postParse(deps, base, router ? "/parse/reasoning" : "/separate_reasoning", {
      text: parse.startsInReasoning && !text.includes("<think>") ? `<think>${text}` : text,
      reasoning_parser: names.reasoning[target],
    });
    const normal = router ? sep.normal_text : sep.text;
    if (typeof normal !== "string")
      throw new EngineContractError(router ? "/parse/reasoning normal_text" : "/separate_reasoning text");
    rest = normal;
    reasoning =
      typeof sep.reasoning_text === "string" && sep.reasoning_text !== "" ? sep.reasoning_text : null;
  }
  const calls: AssistantView["tool_calls"] = [];
  if (tools.length > 0) {
    const path = router ? "/parse/function_call" : "/parse_function_call";
    const parsed = await postParse(deps, base, path, {
      text: rest,
      tool_call_parser: names.tool[target],
      tools: tools as unknown as JsonObject[],
    });
    const normal = router ? parsed.remaining_text : parsed.normal_text;
    if (typeof normal !== "string")
      throw new EngineContractError(`${path} ${router ? "remaining_text" : "normal_text"}`);
    rest = normal;
    for (const c of objects(router ? parsed.tool_calls : parsed.calls)) {
      const fn = router ? (isObject(c.function) ? c.function : {}) : c;
      const name = fn.name;
      if (typeof name !== "string") throw new EngineContractError(`${path} calls[].name`);
      calls.push({
        id: newToolCallId(),
        type: "function",
        function: { name, arguments: argumentsText(router ? fn.arguments : fn.parameters) },
      });
    }
  }
  const content = rest.trim();
  return {
    reasoning_content: reasoning,
    content: content === "" && calls.length > 0 ? null : content,
    tool_calls: calls,
  };
}
