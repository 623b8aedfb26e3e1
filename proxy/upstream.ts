/**
 * One JSON POST to the engine over node:http(s). Not `fetch`: its default 300 s header timeout would
 * cut long generations before the proxy's own (longer, explicit) request timeout.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";
import { createParser } from "eventsource-parser";
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

/** A streamed engine answer: an error body, or the `data:` payloads of its SSE events. */
export type UpstreamStream =
  | { ok: false; status: number; contentType: string | null; body: string }
  | { ok: true; events: AsyncGenerator<string, void, undefined>; cancel(): void };

/**
 * POSTs `body` and, on 2xx, yields the `data:` payloads of the SSE answer as they arrive; a non-2xx
 * answer is read whole. Errors while reading become {@link EngineUnreachableError} /
 * {@link EngineTimeoutError} (after `timeoutMs` from the start) / `AbortError` (on `signal`).
 *
 * @example
 * ```ts
 * const s = await postStream(url, { ...body, stream: true }, headers, { timeoutMs: 900_000 });
 * if (s.ok) for await (const data of s.events) if (data !== "[DONE]") handle(JSON.parse(data));
 * ```
 */
export function postStream(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<UpstreamStream> {
  const target = new URL(url);
  const payload = Buffer.from(JSON.stringify(body));
  const client = target.protocol === "https:" ? https : http;
  return new Promise<UpstreamStream>((resolve, reject) => {
    let failure: Error | null = null;
    let settled = false;
    const fail = (err: Error) => {
      failure ??= err;
      req.destroy(err);
      if (!settled) {
        settled = true;
        cleanup();
        reject(failure);
      }
    };
    const timer = setTimeout(() => fail(new EngineTimeoutError(url, opts.timeoutMs)), opts.timeoutMs);
    const onAbort = () =>
      fail(Object.assign(new Error("request aborted by the client"), { name: "AbortError" }));
    const cleanup = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const req = client.request(
      target,
      {
        method: "POST",
        headers: { ...headers, accept: "text/event-stream", "content-length": String(payload.length) },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            settled = true;
            cleanup();
            resolve({
              ok: false,
              status,
              contentType: res.headers["content-type"] ?? null,
              body: Buffer.concat(chunks).toString("utf8"),
            });
          });
          return;
        }
        settled = true;
        const queue: string[] = [];
        let ended = false;
        let wake: (() => void) | null = null;
        const notify = () => {
          wake?.();
          wake = null;
        };
        const parser = createParser({ onEvent: (ev) => queue.push(ev.data) });
        res.setEncoding("utf8");
        res.on("data", (text: string) => {
          parser.feed(text);
          notify();
        });
        res.on("end", () => {
          ended = true;
          notify();
        });
        res.on("error", (err) => {
          failure ??= new EngineUnreachableError(url, err.message);
          notify();
        });
        res.on("close", () => {
          if (!res.complete) failure ??= new EngineUnreachableError(url, "stream closed before its end");
          ended = true;
          notify();
        });
        async function* events(): AsyncGenerator<string, void, undefined> {
          try {
            for (;;) {
              if (queue.length > 0) {
                yield queue.shift()!;
                continue;
              }
              if (failure) throw failure;
              if (ended) return;
              await new Promise<void>((r) => {
                wake = r;
              });
            }
          } finally {
            cleanup();
            req.destroy();
          }
        }
        resolve({ ok: true, events: events(), cancel: () => req.destroy() });
      },
    );
    req.on("error", (err) => {
      if (!failure) failure = new EngineUnreachableError(url, err.message);
      if (!settled) {
        settled = true;
        cleanup();
        reject(failure);
      }
    });
    req.end(payload);
  });
}
