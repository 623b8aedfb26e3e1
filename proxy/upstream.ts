/**
 * One JSON POST to the engine over node:http(s). Not `fetch`: its default 300 s header timeout would
 * cut long generations before the proxy's own (longer, explicit) request timeout.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";
import { EngineTimeoutError, EngineUnreachableError } from "./errors";

/** Largest engine response body the proxy reads (bytes); a bigger one is treated as a broken engine. */
export const MAX_ENGINE_RESPONSE_BYTES = 256 * 1024 * 1024;

/** A raw engine answer. */
export interface UpstreamResponse {
  status: number;
  contentType: string | null;
  body: string;
}

/**
 * POSTs `body` as JSON and reads the whole answer. Throws {@link EngineUnreachableError} when the
 * engine cannot be reached and {@link EngineTimeoutError} after `timeoutMs`; `signal` aborts quietly
 * (the harness went away) with an `AbortError`.
 *
 * @example
 * ```ts
 * const r = await postJson("http://127.0.0.1:30000/v1/chat/completions", body, {}, { timeoutMs: 900_000 });
 * ```
 */
export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<UpstreamResponse> {
  const target = new URL(url);
  const payload = Buffer.from(JSON.stringify(body));
  const client = target.protocol === "https:" ? https : http;
  return new Promise<UpstreamResponse>((resolve, reject) => {
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      fn();
    };
    const req = client.request(
      target,
      { method: "POST", headers: { ...headers, "content-length": String(payload.length) } },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ENGINE_RESPONSE_BYTES) {
            req.destroy();
            finish(() =>
              reject(
                new EngineUnreachableError(url, `response larger than ${MAX_ENGINE_RESPONSE_BYTES} bytes`),
              ),
            );
            return;
          }
          chunks.push(chunk);
        });
        res.on("end", () =>
          finish(() =>
            resolve({
              status: res.statusCode ?? 0,
              contentType: res.headers["content-type"] ?? null,
              body: Buffer.concat(chunks).toString("utf8"),
            }),
          ),
        );
        res.on("error", (err) => finish(() => reject(new EngineUnreachableError(url, err.message))));
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      finish(() => reject(new EngineTimeoutError(url, opts.timeoutMs)));
    }, opts.timeoutMs);
    const onAbort = () => {
      req.destroy();
      finish(() => reject(Object.assign(new Error("request aborted by the client"), { name: "AbortError" })));
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", (err) => finish(() => reject(new EngineUnreachableError(url, err.message))));
    req.end(payload);
  });
}
