/**
 * Shapes of the two diagnostic artifacts a gateway uploads for every session that ran: its logs
 * (`logs`) and, in token mode, the text of every token id of its trajectory (`tokens`).
 *
 * Logs: one entry per stream (`prepare`, `harness.stdout`, `harness.stderr`, `evaluator`,
 * `other`), each the tail of what the session's commands wrote to it, at most
 * {@link LOG_STREAM_LIMIT_BYTES}, with the bytes seen and kept.
 *
 * Token text: the API serves `{session_id, traces:[{prompt, response}]}`, one string per id of
 * each trace's `prompt_ids` / `response_ids`. A multi-turn session's prompts repeat the whole
 * conversation so far, so the gateway uploads a compact form ({@link TokenTextUpload}): each
 * trace's prompt strings after the prefix it shares with the previous trace's prompt + response
 * (`prompt_shared` ids), and the control plane expands it when it serves it
 * ({@link expandTokenText}).
 *
 * @module
 */
import { z } from "zod";

/**
 * Bytes of each log stream kept (its tail): 256 KiB.
 *
 * @example
 * ```ts
 * if (stream.bytes_total > LOG_STREAM_LIMIT_BYTES) console.log("truncated");
 * ```
 */
export const LOG_STREAM_LIMIT_BYTES = 256 * 1024;

/** Names of the log streams, in the order they are listed. */
export const LOG_STREAM_NAMES = [
  "prepare",
  "harness.stdout",
  "harness.stderr",
  "evaluator",
  "other",
] as const;

/** One log stream: the tail of its text, and how much of it was seen and kept (UTF-8 bytes). */
export const LogStream = z.strictObject({
  name: z.string().min(1),
  bytes_total: z.number().int().min(0),
  bytes_kept: z.number().int().min(0),
  truncated: z.boolean(),
  text: z.string(),
});
export type LogStream = z.infer<typeof LogStream>;

/** The `logs` artifact as uploaded by the gateway. */
export const LogsUpload = z.strictObject({
  /** The per-stream limit the gateway applied. */
  limit_bytes: z.number().int().min(0),
  streams: z.array(LogStream),
});
export type LogsUpload = z.infer<typeof LogsUpload>;

/** `GET /v1/sessions/:id/logs`. */
export const SessionLogs = LogsUpload.extend({ session_id: z.string().min(1) });
export type SessionLogs = z.infer<typeof SessionLogs>;

/** One trace of the compact token text: prompt strings past the shared prefix. */
export const TokenTextTrace = z.strictObject({
  /** Leading prompt ids equal to the previous trace's `prompt_ids ++ response_ids` (0 for the first). */
  prompt_shared: z.number().int().min(0),
  /** Text of `prompt_ids[prompt_shared..]`, one string per id. */
  prompt: z.array(z.string()),
  /** Text of `response_ids`, one string per id. */
  response: z.array(z.string()),
});
export type TokenTextTrace = z.infer<typeof TokenTextTrace>;

/** The `tokens` artifact as uploaded by the gateway. */
export const TokenTextUpload = z.strictObject({ v: z.literal(1), traces: z.array(TokenTextTrace) });
export type TokenTextUpload = z.infer<typeof TokenTextUpload>;

/** `GET /v1/sessions/:id/tokens`: whole prompts, in the order of the trajectory's traces. */
export const SessionTokens = z.strictObject({
  session_id: z.string().min(1),
  traces: z.array(z.strictObject({ prompt: z.array(z.string()), response: z.array(z.string()) })),
});
export type SessionTokens = z.infer<typeof SessionTokens>;

/**
 * Thrown when a compact token text does not fit together (a shared prefix longer than the
 * previous trace).
 *
 * @example
 * ```ts
 * try { expandTokenText(upload); } catch (e) { if (e instanceof TokenTextShapeError) console.error(e.message); }
 * ```
 */
export class TokenTextShapeError extends Error {
  override name = "TokenTextShapeError";
}

/**
 * The compact token text of a trajectory: `decode` gives the text of one id (never a run of ids
 * decoded together and split again, so the strings align with the ids one to one).
 *
 * @example
 * ```ts
 * const upload = compactTokenText(trajectory.traces, (id) => tokenizer.decode([id]));
 * ```
 */
export function compactTokenText(
  traces: ReadonlyArray<{ prompt_ids: readonly number[]; response_ids: readonly number[] }>,
  decode: (id: number) => string,
): TokenTextUpload {
  const cache = new Map<number, string>();
  const text = (id: number) => {
    let s = cache.get(id);
    if (s === undefined) {
      s = decode(id);
      cache.set(id, s);
    }
    return s;
  };
  let previous: readonly number[] = [];
  return {
    v: 1,
    traces: traces.map((t) => {
      let shared = 0;
      while (
        shared < t.prompt_ids.length &&
        shared < previous.length &&
        t.prompt_ids[shared] === previous[shared]
      )
        shared++;
      previous = [...t.prompt_ids, ...t.response_ids];
      return {
        prompt_shared: shared,
        prompt: t.prompt_ids.slice(shared).map(text),
        response: t.response_ids.map(text),
      };
    }),
  };
}

/**
 * The served shape of a compact token text: each prompt whole again. Throws
 * {@link TokenTextShapeError}.
 *
 * @example
 * ```ts
 * const { traces } = expandTokenText(upload, "b.0.0");
 * ```
 */
export function expandTokenText(upload: TokenTextUpload, sessionId: string): SessionTokens {
  let previous: string[] = [];
  const traces = upload.traces.map((t, i) => {
    if (t.prompt_shared > previous.length)
      throw new TokenTextShapeError(
        `traces[${i}].prompt_shared: ${t.prompt_shared} exceeds the ${previous.length} tokens of the trace before`,
      );
    const prompt = [...previous.slice(0, t.prompt_shared), ...t.prompt];
    previous = [...prompt, ...t.response];
    return { prompt, response: t.response };
  });
  return { session_id: sessionId, traces };
}
