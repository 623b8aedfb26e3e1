/**
 * Plain JSON over HTTP for the GPU check, with a timeout on every call and the wall time measured:
 * the check talks to an engine it did not start and must never hang on it.
 *
 * @module
 */

/** An answer: status, parsed JSON (or null) and the raw text, with the wall time. */
export interface Answer {
  status: number;
  json: unknown;
  text: string;
  ms: number;
}

/** Default timeout of one engine call (ms): a real engine under no load answers a short call in well under that. */
export const CALL_TIMEOUT_MS = 60_000;

/**
 * Calls `url` and reads the whole answer. A transport error or timeout throws with the URL in its message.
 *
 * @example
 * ```ts
 * const a = await call("http://127.0.0.1:30000/model_info");
 * a.status; // 200
 * ```
 */
export async function call(
  url: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Answer> {
  const started = performance.now();
  const method = init.method ?? (init.body === undefined ? "GET" : "POST");
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: {
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers,
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(init.timeoutMs ?? CALL_TIMEOUT_MS),
    });
  } catch (err) {
    const why = err instanceof Error && err.name === "TimeoutError" ? "timed out" : String(err);
    throw new Error(`${method} ${url}: ${why}`);
  }
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text === "" ? null : JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, json, text, ms: performance.now() - started };
}

/** `v` as a JSON object, or an empty one. */
export function obj(v: unknown): Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

/** The median of `xs` (0 for none). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Waits `ms` milliseconds.
 *
 * @example
 * ```ts
 * await sleep(100);
 * ```
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
