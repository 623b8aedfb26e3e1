/**
 * The engine's SSE answer, read once for every streamed call: the `data:` payloads of a 2xx
 * response as they arrive ({@link sseData}, behind `postStream`), and the chat chunks they carry
 * ({@link engineChunks}, what `streamReal` relays), ending at `[DONE]`.
 *
 * @module
 */
import type http from "node:http";
import { createParser } from "eventsource-parser";
import type { JsonObject } from "../protocol";
import { EngineContractError, EngineStatusError } from "./errors";
import { isObject } from "./json";

/** The exchange an SSE body belongs to: its first failure, and how to end it. */
export interface SseSource {
  /** The exchange's first failure (a timeout, an abort, a broken connection), or null. */
  readonly failure: Error | null;
  /** Notes that the response broke (`reason`); the first failure noted wins. */
  broken(reason: string): void;
  /** Ends the exchange: its deadline, its abort watch and its connection. */
  close(): void;
}

/**
 * The `data:` payloads of an SSE response, in order, as they arrive. The listeners are attached
 * at once (before the caller first asks), so nothing the engine sends meanwhile is lost. The
 * exchange's failure is thrown once the payloads before it were taken; finishing or leaving the
 * iteration closes the exchange.
 *
 * @example
 * ```ts
 * for await (const data of sseData(res, exchange)) if (data !== "[DONE]") handle(JSON.parse(data));
 * ```
 */
export function sseData(
  res: http.IncomingMessage,
  source: SseSource,
): AsyncGenerator<string, void, undefined> {
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
    source.broken(err.message);
    notify();
  });
  res.on("close", () => {
    if (!res.complete) source.broken("stream closed before its end");
    ended = true;
    notify();
  });
  async function* payloads(): AsyncGenerator<string, void, undefined> {
    try {
      for (;;) {
        if (queue.length > 0) {
          yield queue.shift() as string;
          continue;
        }
        if (source.failure) throw source.failure;
        if (ended) return;
        await new Promise<void>((r) => {
          wake = r;
        });
      }
    } finally {
      source.close();
    }
  }
  return payloads();
}

/**
 * The chat completion chunks of an engine stream, up to `[DONE]`. A payload that is not a JSON
 * object breaks the engine's contract; an `{error}` chunk is the engine failing mid-answer (500).
 *
 * @example
 * ```ts
 * for await (const chunk of engineChunks(upstream.events)) for (const ev of acc.push(chunk)) frames += writer.delta(ev);
 * ```
 */
export async function* engineChunks(
  payloads: AsyncIterable<string>,
): AsyncGenerator<JsonObject, void, undefined> {
  for await (const data of payloads) {
    if (data === "[DONE]") return;
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw new EngineContractError("(stream chunk)", "is not valid JSON");
    }
    if (!isObject(chunk)) throw new EngineContractError("(stream chunk)", "is not a JSON object");
    if (chunk.error !== undefined) {
      throw new EngineStatusError(500, JSON.stringify({ error: chunk.error }), "application/json");
    }
    yield chunk;
  }
}
