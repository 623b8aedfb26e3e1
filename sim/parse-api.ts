/**
 * SGLang's native parse endpoints on the simulated engine, over the project's own TS parsers
 * (`tokenizer/parsers/`), in SGLang's wire shapes (SGLang 0.5.13 / main as of 2026-11,
 * `http_server.py` `parse_function_call_request` / `separate_reasoning_request`, request classes
 * `ParseFunctionCallReq` / `SeparateReasoningReqInput` in `io_struct.py`):
 *
 * - `POST /parse_function_call` `{text, tools: [], tool_call_parser}` →
 *   `{normal_text, calls: [{tool_index, name, parameters, tool_call_id}]}`, `parameters` a JSON
 *   string (`json.dumps(..., ensure_ascii=False)`), `tool_index` -1 as SGLang's JSON detectors
 *   leave it. Without tools the text comes back whole and no call is parsed.
 * - `POST /separate_reasoning` `{text, reasoning_parser}` → `{reasoning_text, text}`.
 *
 * A parser name SGLang's registries (`FunctionCallParser.ToolCallParserEnum`,
 * `ReasoningParser.DetectorMap`) do not hold makes SGLang raise `ValueError` outside any handler,
 * a 500; the simulator answers the same status with SGLang's message. Names SGLang knows but the
 * simulator has no parser for are refused the same way (the simulator cannot fake their format).
 * The router's `/parse/*` variants live in `router.ts`.
 *
 * @module
 */
import type { ToolDefinition } from "../tokenizer/chat-tokenizer";
import {
  deepseekV3ToolCallParser,
  jsonToolCallParser,
  qwen3CoderToolCallParser,
  separateThinking,
  type ToolCallParser,
} from "../tokenizer/parsers";
import type { Handler } from "./control-api";
import { SIM_LIMITS } from "./engine";
import { HttpError, readJsonBody, sendJson } from "./http";

/**
 * SGLang tool-call parser names the simulator parses: the `<tool_call>{json}</tool_call>` family
 * (`qwen`/`qwen25` → `Qwen25Detector`, `hermes` → `HermesDetector`) and `qwen3_coder`.
 *
 * @example
 * ```ts
 * SIM_TOOL_PARSERS.qwen25!.parse(text, { tools });
 * ```
 */
export const SIM_TOOL_PARSERS: Readonly<Record<string, ToolCallParser>> = {
  qwen: jsonToolCallParser("qwen"),
  qwen25: jsonToolCallParser("qwen25"),
  hermes: jsonToolCallParser("hermes"),
  qwen3_coder: qwen3CoderToolCallParser,
  deepseekv3: deepseekV3ToolCallParser,
};

/**
 * SGLang reasoning parser names the simulator separates, with whether the detector starts inside
 * the think block (`force_reasoning`: `qwen3-thinking`, `deepseek-r1`).
 *
 * @example
 * ```ts
 * SIM_REASONING_PARSERS["deepseek-r1"]; // true
 * ```
 */
export const SIM_REASONING_PARSERS: Readonly<Record<string, boolean>> = {
  qwen3: false,
  "qwen3-thinking": true,
  "deepseek-r1": true,
};

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The request's tools that name a function (the only ones a parser can match). */
function toolsOf(raw: unknown): ToolDefinition[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new HttpError(400, "tools: must be a list of tools");
  return raw.filter(
    (t): t is ToolDefinition => isObject(t) && isObject(t.function) && typeof t.function.name === "string",
  );
}

function textOf(body: Record<string, unknown>): string {
  if (typeof body.text !== "string") throw new HttpError(400, "text: field required (a string)");
  return body.text;
}

/**
 * Splits tool calls out of `text` with a parser: what is left, and the calls with their
 * arguments as JSON strings. Shared with the simulated router.
 *
 * @example
 * ```ts
 * splitToolCalls(SIM_TOOL_PARSERS.qwen25!, text, tools); // { text: "", calls: [{ name, arguments }] }
 * ```
 */
export function splitToolCalls(parser: ToolCallParser, text: string, tools: readonly ToolDefinition[]) {
  // SGLang's FunctionCallParser.parse_non_stream: no tools, no tool calls.
  if (tools.length === 0) return { text, calls: [] };
  return parser.parse(text, { tools });
}

/**
 * The `POST /parse_function_call` answer for a request body; throws {@link HttpError}.
 *
 * @example
 * ```ts
 * parseFunctionCall({ text, tool_call_parser: "qwen25", tools }); // { normal_text, calls }
 * ```
 */
export function parseFunctionCall(body: unknown): Record<string, unknown> {
  if (!isObject(body)) throw new HttpError(400, "body: expected a JSON object");
  const text = textOf(body);
  const tools = toolsOf(body.tools);
  const name = body.tool_call_parser;
  const parser = typeof name === "string" ? SIM_TOOL_PARSERS[name] : undefined;
  // SGLang: `raise ValueError(f"Unsupported tool_call_parser: {tool_call_parser}")`, uncaught.
  if (!parser)
    throw new HttpError(500, `Unsupported tool_call_parser: ${name === undefined ? "None" : String(name)}`);
  const split = splitToolCalls(parser, text, tools);
  return {
    normal_text: split.text,
    calls: split.calls.map((c) => ({
      tool_index: -1,
      name: c.name,
      parameters: c.arguments,
      tool_call_id: null,
    })),
  };
}

/**
 * Separates reasoning with SGLang's `qwen3`-style detector; `forced` when the output starts in it.
 *
 * @example
 * ```ts
 * splitReasoning("<think>hm</think>42", false); // { reasoning: "hm", text: "42" }
 * ```
 */
export function splitReasoning(text: string, forced: boolean): { reasoning: string; text: string } {
  const split = separateThinking(text, { startsInReasoning: forced });
  return { reasoning: split.reasoning ?? "", text: split.text };
}

/**
 * The `POST /separate_reasoning` answer for a request body; throws {@link HttpError}.
 *
 * @example
 * ```ts
 * separateReasoning({ text: "<think>hm</think>42", reasoning_parser: "qwen3" }); // { reasoning_text: "hm", text: "42" }
 * ```
 */
export function separateReasoning(body: unknown): Record<string, unknown> {
  if (!isObject(body)) throw new HttpError(400, "body: expected a JSON object");
  const text = textOf(body);
  const name = body.reasoning_parser;
  if (typeof name !== "string" || name === "")
    throw new HttpError(400, "reasoning_parser: field required (a parser name, e.g. qwen3)");
  const forced = SIM_REASONING_PARSERS[name.toLowerCase()];
  // SGLang: `raise ValueError(f"Unsupported model type: {model_type}")`, uncaught.
  if (forced === undefined) throw new HttpError(500, `Unsupported model type: ${name}`);
  const split = splitReasoning(text, forced);
  return { reasoning_text: split.reasoning, text: split.text };
}

/**
 * The route table entries of the parse endpoints.
 *
 * @example
 * ```ts
 * const routes = { ...parseRoutes(), ...otherRoutes };
 * ```
 */
export function parseRoutes(): Record<string, Record<string, Handler>> {
  return {
    "/parse_function_call": {
      POST: async (req, res) =>
        sendJson(res, 200, parseFunctionCall(await readJsonBody(req, SIM_LIMITS.maxBodyBytes))),
    },
    "/separate_reasoning": {
      POST: async (req, res) =>
        sendJson(res, 200, separateReasoning(await readJsonBody(req, SIM_LIMITS.maxBodyBytes))),
    },
  };
}
