/**
 * A test double of SGLang's native API for token-mode tests: a real HTTP server with `/generate`
 * (ids in, the ids the test chooses out, with SGLang's `meta_info`), `/abort_request`,
 * `/separate_reasoning`, `/parse_function_call` and `/health`. It exists because a test must be
 * able to force what a real model may sample and the simulated engine never does (non-canonical
 * splits such as " fish" + "ing" = 7640, 287). Test-only; the simulated engine is `sim/`.
 *
 * @module
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { JsonObject } from "../../protocol";

/** Qwen3's `<|im_end|>`. */
export const IM_END = 151645;

/** What `/generate` answers for one request. */
export interface DoubleReply {
  /** Sampled ids; the finish is `stop` on `<|im_end|>` when they end with it, else `length`. */
  output: number[];
  /** Answer `finish_reason: {type: "abort"}` instead (a weight update aborted the request). */
  abort?: boolean;
  /** Wait this long before answering; `/abort_request` for its rid answers it at once as aborted. */
  delayMs?: number;
  /**
   * The ids an aborted answer carries (what the request had sampled when it was aborted: SGLang
   * returns them with `finish_reason.type "abort"`); default none.
   */
  abortedOutput?: number[];
}

/** One request the double received. */
export interface DoubleRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: JsonObject;
}

/** A running double. */
export interface GenerateDouble {
  url: string;
  received: DoubleRequest[];
  /** `/generate` bodies only, in arrival order. */
  generates(): JsonObject[];
  /** Rids named by `/abort_request` calls. */
  aborted(): string[];
  /** Next replies, consumed in order; when empty, `fallback` answers. */
  queue: DoubleReply[];
  /** Answers when the queue is empty; default: `Done.` + `<|im_end|>` as the encoder would split it. */
  fallback: (body: JsonObject) => DoubleReply;
  /** Answers of `/separate_reasoning` and `/parse_function_call` (status 404 when unset). */
  parsers: { separate?: (body: JsonObject) => JsonObject; functionCall?: (body: JsonObject) => JsonObject };
  /** More server arguments for `/server_info` (e.g. `tool_call_parser`, as SGLang reports its launch flags). */
  serverArgs: JsonObject;
  close(): Promise<void>;
}

/** Deterministic, strictly negative logprob of a sampled id at a position. */
export function doubleLogprob(id: number, position: number): number {
  return -(((id * 17 + position * 5) % 499) + 1) / 500;
}

/** Engine calls waiting on a `delayMs` reply, by rid: calling one answers it as aborted. */
type Pending = Map<string, () => void>;

function answer(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

/** SGLang's `/generate` body for `reply`: its output, or what it carries when aborted. */
function generateBody(
  reply: DoubleReply,
  rid: string,
  inputIds: readonly number[],
  aborted: boolean,
): JsonObject {
  const out = aborted ? (reply.abortedOutput ?? []) : reply.output;
  const finish = aborted
    ? { type: "abort", message: "Abort request" }
    : out.at(-1) === IM_END
      ? { type: "stop", matched: IM_END }
      : { type: "length", length: out.length };
  return {
    text: "",
    output_ids: out,
    meta_info: {
      id: rid,
      finish_reason: finish,
      prompt_tokens: inputIds.length,
      completion_tokens: out.length,
      cached_tokens: 0,
      weight_version: "w-double",
      output_token_logprobs: out.map((id, i) => [doubleLogprob(id, i), id, null]),
    },
  };
}

/** Answers one `/generate` with the next queued reply, now or after its delay (abortable by rid). */
function serveGenerate(state: GenerateDouble, pending: Pending, body: JsonObject, res: http.ServerResponse) {
  const reply = state.queue.shift() ?? state.fallback(body);
  const rid = typeof body.rid === "string" ? body.rid : "double";
  const inputIds = Array.isArray(body.input_ids) ? (body.input_ids as number[]) : [];
  const respond = (aborted: boolean) => {
    pending.delete(rid);
    answer(res, 200, generateBody(reply, rid, inputIds, aborted));
  };
  if (reply.abort) return respond(true);
  if (!reply.delayMs) return respond(false);
  const timer = setTimeout(() => respond(false), reply.delayMs);
  pending.set(rid, () => {
    clearTimeout(timer);
    respond(true);
  });
}

/** Routes one request whose body has arrived. */
function route(
  state: GenerateDouble,
  pending: Pending,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  raw: Buffer,
) {
  const path = req.url ?? "";
  if (req.method === "GET" && path === "/health") return answer(res, 200, {});
  // The proxy reads the weight version here; not a call, so not recorded.
  if (req.method === "GET" && path === "/model_info") return answer(res, 200, { weight_version: "w-double" });
  // Server arguments, read once at start (priority scheduling): off, as SGLang's default.
  if (req.method === "GET" && (path === "/server_info" || path === "/get_server_info"))
    return answer(res, 200, {
      enable_priority_scheduling: false,
      schedule_low_priority_values_first: false,
      ...state.serverArgs,
    });
  let body: JsonObject;
  try {
    body = JSON.parse(raw.toString("utf8") || "{}") as JsonObject;
  } catch {
    return answer(res, 400, { error: { message: "(body): not JSON" } });
  }
  state.received.push({ path, headers: req.headers, body });
  if (path === "/generate") return serveGenerate(state, pending, body, res);
  if (path === "/abort_request") {
    pending.get(String(body.rid))?.();
    return answer(res, 200, {});
  }
  if (path === "/separate_reasoning" && state.parsers.separate)
    return answer(res, 200, state.parsers.separate(body));
  if (path === "/parse_function_call" && state.parsers.functionCall)
    return answer(res, 200, state.parsers.functionCall(body));
  answer(res, 404, { error: { message: `no route ${path}` } });
}

/**
 * Starts the double on `127.0.0.1:0`.
 *
 * @example
 * ```ts
 * const engine = await startGenerateDouble();
 * engine.queue.push({ output: [40, 728, 7640, 287, IM_END] });
 * // proxy with engine "sglang" and engineUrl engine.url …
 * await engine.close();
 * ```
 */
export async function startGenerateDouble(): Promise<GenerateDouble> {
  const received: DoubleRequest[] = [];
  const pending: Pending = new Map();
  const state: GenerateDouble = {
    url: "",
    received,
    generates: () => received.filter((r) => r.path === "/generate").map((r) => r.body),
    aborted: () => received.filter((r) => r.path === "/abort_request").map((r) => String(r.body.rid ?? "")),
    queue: [],
    fallback: () => ({ output: [17453, 13, IM_END] }),
    parsers: {},
    serverArgs: {},
    close: async () => {},
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => route(state, pending, req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      for (const abort of pending.values()) abort();
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return state;
}
