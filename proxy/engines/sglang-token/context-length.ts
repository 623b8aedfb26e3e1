/**
 * The model's context length, read from the engine at start. Token mode clamps `max_new_tokens`
 * to what the context leaves, so a value that differs from the server's either wastes the window
 * or turns near-full-context turns into engine 400s.
 *
 * Where SGLang says it: `GET /v1/models` → `data[0].max_model_len` is
 * `tokenizer_manager.model_config.context_len`, the limit `_validate_one_request` enforces (every
 * 0.5 release and main as of 2026-11; `http_server.py`). `GET /server_info` (`/get_server_info`,
 * its older name) carries the server arguments, whose `context_length` is only set when the server
 * was launched with `--context-length`; `/model_info` carries no length at all. The simulator and
 * the reference engine answer all three with their real limit.
 *
 * @module
 */
import type { Logger } from "../../../protocol";

/** What one engine said about its context length, and where. */
export interface EngineContextLength {
  url: string;
  contextLength: number;
  /** The endpoint and key it came from, e.g. `GET /v1/models data[0].max_model_len`. */
  source: string;
}

/**
 * The configured context length disagrees with the engine's, or replicas disagree (the proxy
 * refuses to start; the message names both values).
 *
 * @example
 * ```ts
 * try { await resolveContextLength({ configured: 4096, urls }); } catch (e) { (e as ContextLengthError).message; }
 * ```
 */
export class ContextLengthError extends Error {
  override readonly name = "ContextLengthError";
}

const isLength = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 2;

async function getJson(url: string, timeoutMs: number): Promise<unknown> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!r.ok) return undefined;
    return (await r.json()) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Asks one engine for its context length: `GET /v1/models`, then `/server_info`, then
 * `/get_server_info`; null when none of them says (unreachable, older build, a test double).
 *
 * @example
 * ```ts
 * await engineContextLength("http://127.0.0.1:30000");
 * // { url: "http://127.0.0.1:30000", contextLength: 40960, source: "GET /v1/models data[0].max_model_len" }
 * ```
 */
export async function engineContextLength(
  url: string,
  opts: { timeoutMs?: number } = {},
): Promise<EngineContextLength | null> {
  const timeoutMs = opts.timeoutMs ?? 3_000;
  const base = url.replace(/\/+$/, "");
  const models = (await getJson(`${base}/v1/models`, timeoutMs)) as {
    data?: Array<{ max_model_len?: unknown }>;
  };
  const first = Array.isArray(models?.data) ? models.data[0] : undefined;
  if (isLength(first?.max_model_len)) {
    return { url, contextLength: first.max_model_len, source: "GET /v1/models data[0].max_model_len" };
  }
  for (const path of ["/server_info", "/get_server_info"]) {
    const info = (await getJson(`${base}${path}`, timeoutMs)) as { context_length?: unknown } | undefined;
    if (isLength(info?.context_length)) {
      return { url, contextLength: info.context_length, source: `GET ${path} context_length` };
    }
  }
  return null;
}

/** Input of {@link resolveContextLength}. */
export interface ResolveContextLengthInput {
  /** `--context-length` as the user gave it, if they did. */
  configured?: number;
  /** Used when neither the user nor the engine says. */
  fallback: number;
  /** The engine replicas (each is asked; they must agree). */
  urls: readonly string[];
  logger?: Logger;
  timeoutMs?: number;
}

/**
 * The context length token mode should use: the engine's when it reports one (refusing a
 * configured value that differs, naming both), else the configured or fallback value, said in one
 * start-up log line either way.
 *
 * @example
 * ```ts
 * await resolveContextLength({ urls: ["http://127.0.0.1:30000"], fallback: 40960, logger });
 * // 32768 — "token mode: context length 32768 from the engine (…)"
 * ```
 */
export async function resolveContextLength(input: ResolveContextLengthInput): Promise<number> {
  const opts = input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {};
  const reports = (await Promise.all(input.urls.map((u) => engineContextLength(u, opts)))).filter(
    (r): r is EngineContextLength => r !== null,
  );
  const first = reports[0];
  if (!first) {
    const value = input.configured ?? input.fallback;
    input.logger?.info(
      `token mode: the engine does not report its context length; using the ${input.configured !== undefined ? "configured" : "default"} ${value}`,
      { context_length: value, engines: input.urls },
    );
    return value;
  }
  const other = reports.find((r) => r.contextLength !== first.contextLength);
  if (other) {
    throw new ContextLengthError(
      `the engines disagree on the context length: ${first.url} reports ${first.contextLength}, ${other.url} reports ${other.contextLength}`,
    );
  }
  if (input.configured !== undefined && input.configured !== first.contextLength) {
    throw new ContextLengthError(
      `--context-length is ${input.configured} but the engine at ${first.url} reports ${first.contextLength} (${first.source}); give the engine's value or leave the option out`,
    );
  }
  input.logger?.info(`token mode: context length ${first.contextLength} from the engine (${first.source})`, {
    context_length: first.contextLength,
    engines: reports.map((r) => r.url),
  });
  return first.contextLength;
}
