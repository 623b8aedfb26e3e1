/**
 * The GPU check's contract checks against a running SGLang server, called directly (no proxy):
 * the routes and fields Polar-TS's token mode relies on (docs/engines.md), each one a row of the
 * report. The checks are short and leave the engine as they found it: the weight-version label is
 * put back, a pause is always continued, the one long generation is aborted.
 *
 * @module
 */
import type { ChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { call, obj, sleep } from "./http";
import { CheckFailure, CheckOutcome, type Report } from "./report";

/** What the checks learn about the engine and pass on to the proxy checks. */
export interface SglangFacts {
  url: string;
  /** `served_model_name` (or the model path) from `/model_info`. */
  model: string | null;
  contextLength: number | null;
  weightVersion: string | null;
  images: boolean;
  version: string | null;
}

const ENGINE = "sglang";

/** A `/generate` body in token mode, as the proxy sends it (docs/token-mode.md). */
function generateBody(ids: readonly number[], rid: string, sampling: Record<string, unknown> = {}) {
  return {
    input_ids: [...ids],
    rid,
    return_logprob: true,
    logprob_start_len: -1,
    stream: false,
    sampling_params: {
      temperature: 0,
      top_p: 1,
      top_k: -1,
      min_p: 0,
      max_new_tokens: 16,
      skip_special_tokens: false,
      spaces_between_special_tokens: false,
      no_stop_trim: true,
      ...sampling,
    },
  };
}

let ridCounter = 0;
const newRid = (what: string) => `gpu-check-${what}-${process.pid}-${++ridCounter}`;

/** The ids of a short chat prompt rendered with the model's template. */
export function promptIds(tok: ChatTokenizer, text: string): number[] {
  return tok.encode(tok.render([{ role: "user", content: text }], { addGenerationPrompt: true }));
}

/** Reads `[logprob, id, text]` triples (or the `_val`/`_idx` arrays) of a `/generate` answer. */
function logprobIds(meta: Record<string, unknown>): number[] {
  const entries = meta.output_token_logprobs;
  if (Array.isArray(entries)) return entries.map((e) => (Array.isArray(e) ? Number(e[1]) : Number.NaN));
  if (Array.isArray(meta.output_token_logprobs_idx)) return meta.output_token_logprobs_idx.map(Number);
  throw new CheckFailure("meta_info.output_token_logprobs is missing although return_logprob was sent");
}

/**
 * Runs the direct SGLang checks and returns what they learned.
 *
 * @example
 * ```ts
 * const facts = await checkSglang(report, "http://127.0.0.1:30000", tok, { contextLength: null });
 * ```
 */
export async function checkSglang(
  report: Report,
  url: string,
  tok: ChatTokenizer,
  opts: { contextLength: number | null },
): Promise<SglangFacts> {
  const facts: SglangFacts = {
    url,
    model: null,
    contextLength: opts.contextLength,
    weightVersion: null,
    images: false,
    version: null,
  };
  const alive = await report.run(ENGINE, "health", async () => {
    // SGLang's /health_generate runs a one-token generation; a busy engine may take seconds.
    const a = await call(`${url}/health_generate`, { timeoutMs: 60_000 });
    if (a.status !== 200) {
      const h = await call(`${url}/health`, { timeoutMs: 60_000 });
      if (h.status !== 200) throw new CheckFailure(`/health_generate ${a.status}, /health ${h.status}`);
      return `/health 200 in ${Math.round(h.ms)} ms (/health_generate answered ${a.status})`;
    }
    return `/health_generate 200 in ${Math.round(a.ms)} ms`;
  });
  if (alive.status === "FAIL") return facts;

  await report.run(ENGINE, "model and server info", async () => {
    const mi = await call(`${url}/model_info`);
    if (mi.status !== 200) throw new CheckFailure(`/model_info answered ${mi.status}`);
    const m = obj(mi.json);
    facts.model =
      typeof m.served_model_name === "string"
        ? m.served_model_name
        : typeof m.model_path === "string"
          ? m.model_path
          : null;
    facts.weightVersion =
      typeof m.weight_version === "string" || typeof m.weight_version === "number"
        ? String(m.weight_version)
        : null;
    facts.images = m.has_image_understanding === true;
    let si = await call(`${url}/server_info`);
    if (si.status === 404) si = await call(`${url}/get_server_info`);
    const s = obj(si.json);
    facts.version = typeof s.version === "string" ? s.version : null;
    const ctx = typeof s.context_length === "number" ? s.context_length : null;
    if (ctx !== null && opts.contextLength !== null && ctx !== opts.contextLength)
      throw new CheckFailure(`--context-length ${opts.contextLength} but the engine serves ${ctx}`);
    facts.contextLength = ctx ?? opts.contextLength;
    return [
      `model ${facts.model ?? "?"}`,
      `version ${facts.version ?? "?"}`,
      `context ${facts.contextLength ?? "unknown"}${ctx === null ? " (the engine does not say)" : ""}`,
      `weight_version ${facts.weightVersion ?? "none"}`,
      `images ${facts.images ? "yes" : "no"}`,
    ].join(", ");
  });

  await report.run(ENGINE, "generate: ids and logprobs", async () => {
    const ids = promptIds(tok, "Count from one to five in words.");
    const rid = newRid("shape");
    const a = await call(`${url}/generate`, { body: generateBody(ids, rid) });
    if (a.status !== 200) throw new CheckFailure(`/generate answered ${a.status}: ${a.text.slice(0, 200)}`);
    const body = obj(a.json);
    const meta = obj(body.meta_info);
    const lp = logprobIds(meta);
    if (lp.length === 0) throw new CheckFailure("no output tokens came back");
    if (lp.some((id) => !Number.isInteger(id)))
      throw new CheckFailure("a logprob entry has no integer token id");
    const fin = obj(meta.finish_reason);
    if (typeof fin.type !== "string")
      throw new CheckFailure("meta_info.finish_reason is not an object with a type");
    if (meta.id !== rid)
      throw new CheckFailure(`meta_info.id is ${JSON.stringify(meta.id)}, the rid sent was ${rid}`);
    if (meta.completion_tokens !== undefined && meta.completion_tokens !== lp.length)
      throw new CheckFailure(`completion_tokens ${meta.completion_tokens} for ${lp.length} logprob entries`);
    if (meta.prompt_tokens !== undefined && meta.prompt_tokens !== ids.length)
      throw new CheckFailure(`prompt_tokens ${meta.prompt_tokens} for ${ids.length} ids sent`);
    const out = Array.isArray(body.output_ids) ? body.output_ids.map(Number) : null;
    let note = "output_ids equal the logprob ids";
    if (out && out.join() !== lp.join()) {
      const k = out.length - lp.length;
      const prefixed = k > 0 && k <= 5 && out.slice(k).join() === lp.join();
      if (!prefixed)
        throw new CheckFailure(`output_ids (${out.length}) differ from the logprob ids (${lp.length})`);
      note = `output_ids carry ${k} prompt tokens before the sampled ids (an SGLang build with the decode_ids prefix); the proxy reads the logprob ids`;
    }
    // The tokenizer folder must be the served model's: the engine's text is its own decode.
    if (typeof body.text === "string") {
      const mine = tok.decode(lp);
      if (mine !== body.text)
        throw new CheckFailure(
          `the engine's text ${JSON.stringify(body.text.slice(0, 60))} is not the local tokenizer's decode ${JSON.stringify(mine.slice(0, 60))}: is --tokenizer-path the served model's folder?`,
        );
    }
    if (note.startsWith("output_ids carry")) throw new CheckOutcome("WARN", note);
    return `${lp.length} tokens, finish ${fin.type}, ${note}, text matches the local tokenizer, ${Math.round(a.ms)} ms`;
  });

  await report.run(ENGINE, "return_prompt_token_ids", async () => {
    const ids = promptIds(tok, "Say hi.");
    const a = await call(`${url}/generate`, {
      body: { ...generateBody(ids, newRid("prompt"), { max_new_tokens: 1 }), return_prompt_token_ids: true },
    });
    if (a.status !== 200) throw new CheckFailure(`/generate answered ${a.status}: ${a.text.slice(0, 200)}`);
    const got = obj(a.json).prompt_token_ids;
    if (!Array.isArray(got))
      throw new CheckOutcome(
        "WARN",
        "this build ignores return_prompt_token_ids: image turns cannot be confirmed and are flagged not token-exact",
      );
    if (got.join() !== ids.join())
      throw new CheckFailure(`prompt_token_ids differ from the text-only ids sent`);
    return `the engine returns the ${got.length} ids it ran`;
  });

  await report.run(ENGINE, "sampling validation", async () => {
    const ids = promptIds(tok, "Hi.");
    const bad: Array<[string, Record<string, unknown>]> = [
      ["repetition_penalty 2.5", { repetition_penalty: 2.5 }],
      ["top_p 0", { top_p: 0 }],
      ["temperature -1", { temperature: -1 }],
    ];
    const accepted: string[] = [];
    for (const [name, sampling] of bad) {
      const a = await call(`${url}/generate`, {
        body: generateBody(ids, newRid("verify"), { ...sampling, max_new_tokens: 1 }),
      });
      if (a.status < 400 || a.status >= 500) accepted.push(`${name} → ${a.status}`);
    }
    if (accepted.length > 0)
      throw new CheckFailure(
        `values SamplingParams.verify() refuses were not refused with a 4xx: ${accepted.join(", ")}`,
      );
    return `refused with 4xx: ${bad.map(([n]) => n).join(", ")}`;
  });

  await report.run(ENGINE, "context limit", async () => {
    const ctx = facts.contextLength;
    if (ctx === null) throw new CheckOutcome("SKIP", "context length unknown: pass --context-length");
    if (ctx > 131_072)
      throw new CheckOutcome("SKIP", `context ${ctx}: a full-context prefill is too long for a short check`);
    const filler = tok.encode(" a");
    const ids = Array.from({ length: ctx - 8 }, () => filler[0]!);
    const over = await call(`${url}/generate`, {
      body: generateBody(ids, newRid("ctx-over"), { max_new_tokens: 8 }),
      timeoutMs: 120_000,
    });
    const under = await call(`${url}/generate`, {
      body: generateBody(ids, newRid("ctx-under"), { max_new_tokens: 7, ignore_eos: true }),
      timeoutMs: 120_000,
    });
    if (under.status !== 200)
      throw new CheckFailure(
        `prompt ${ids.length} + max_new_tokens 7 (< ${ctx}) answered ${under.status}: ${under.text.slice(0, 160)}`,
      );
    if (over.status === 200)
      throw new CheckFailure(
        `prompt ${ids.length} + max_new_tokens 8 = the context ${ctx} was accepted: the engine's rule differs from the one the proxy clamps by`,
      );
    return `prompt + max_new_tokens = ${ctx} refused (${over.status}), ${ctx - 1} accepted: the proxy's clamp matches`;
  });

  await report.run(ENGINE, "abort by rid", async () => {
    const ids = promptIds(tok, "Write a very long story about the sea.");
    const room = (facts.contextLength ?? 4096) - ids.length - 1;
    const rid = newRid("abort");
    const pending = call(`${url}/generate`, {
      body: generateBody(ids, rid, {
        max_new_tokens: Math.min(room, 8192),
        ignore_eos: true,
        temperature: 1,
      }),
      timeoutMs: 120_000,
    });
    await sleep(150);
    const ab = await call(`${url}/abort_request`, { body: { rid } });
    const a = await pending;
    if (ab.status !== 200)
      throw new CheckFailure(`/abort_request answered ${ab.status}: ${ab.text.slice(0, 160)}`);
    const fin = obj(obj(obj(a.json).meta_info).finish_reason);
    if (fin.type === "abort") return `aborted after ${Math.round(a.ms)} ms (finish_reason abort)`;
    if (a.status === 200 && fin.type === "length")
      throw new CheckOutcome(
        "WARN",
        `the generation finished (${fin.type}) before the abort reached it: inconclusive`,
      );
    throw new CheckFailure(`the aborted request ended ${a.status} with finish ${JSON.stringify(fin)}`);
  });

  await report.run(ENGINE, "pause and continue", async () => {
    const p = await call(`${url}/pause_generation`, { body: { mode: "abort" } });
    if (p.status === 404)
      throw new CheckOutcome("WARN", "no /pause_generation: the proxy can only hold calls itself");
    try {
      if (p.status !== 200) throw new CheckFailure(`/pause_generation answered ${p.status}`);
      const ids = promptIds(tok, "Hi.");
      let done = false;
      const pending = call(`${url}/generate`, {
        body: generateBody(ids, newRid("paused"), { max_new_tokens: 1 }),
        timeoutMs: 60_000,
      }).finally(() => {
        done = true;
      });
      await sleep(800);
      if (done) throw new CheckFailure("a /generate sent while paused finished before /continue_generation");
      const c = await call(`${url}/continue_generation`, { body: {} });
      if (c.status !== 200) throw new CheckFailure(`/continue_generation answered ${c.status}`);
      const a = await pending;
      if (a.status !== 200) throw new CheckFailure(`the held /generate answered ${a.status} after continue`);
      return "a call sent while paused waited and finished after /continue_generation";
    } finally {
      await call(`${url}/continue_generation`, { body: {} }).catch(() => undefined);
    }
  });

  await report.run(ENGINE, "weight version", async () => {
    const before = facts.weightVersion;
    if (before === null)
      throw new CheckOutcome(
        "WARN",
        "/model_info reports no weight_version: records cannot say which weights sampled them",
      );
    const probe = `gpu-check-${process.pid}`;
    const u = await call(`${url}/update_weight_version`, { body: { new_version: probe } });
    if (u.status === 404)
      throw new CheckOutcome("WARN", `weight_version ${before}; no /update_weight_version to relabel it`);
    try {
      if (u.status !== 200) throw new CheckFailure(`/update_weight_version answered ${u.status}`);
      const mi = obj((await call(`${url}/model_info`)).json);
      const g = await call(`${url}/generate`, {
        body: generateBody(promptIds(tok, "Hi."), newRid("wv"), { max_new_tokens: 1 }),
      });
      const seen = obj(obj(g.json).meta_info).weight_version;
      if (String(mi.weight_version) !== probe || String(seen) !== probe)
        throw new CheckFailure(
          `after relabelling to ${probe}: /model_info ${mi.weight_version}, meta_info ${seen}`,
        );
      return `relabelled ${before} → ${probe}: /model_info and meta_info.weight_version follow; put back`;
    } finally {
      await call(`${url}/update_weight_version`, { body: { new_version: before } }).catch(() => undefined);
    }
  });
  return facts;
}
