/**
 * The GPU check's token-mode checks: an in-process recording proxy (engine `sglang`, the same code
 * the gateway runs) in front of the engine under test, driven the way a harness drives it (OpenAI
 * Chat Completions with a session key), and the records it keeps read back: a multi-turn session
 * whose every prompt extends the last one token for token, a tool turn, an image turn, the
 * conversation builder's one trace; then the proxy's added latency per call, measured.
 *
 * @module
 */
import { starImage } from "../../examples/count_stars/stars.mjs";
import type { CompletionRecord, JsonObject } from "../../protocol";
import { buildConversationTraces, conversationTurnFromRecord } from "../../proxy/builders/conversation";
import { type RecordingProxy, startProxy } from "../../proxy/server";
import type { ChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { call, median, obj } from "./http";
import { CheckFailure, CheckOutcome, type Report } from "./report";
import { promptIds, type SglangFacts } from "./sglang";

const ENGINE = "sglang";
const quiet = { info() {}, warn() {}, error() {} };

type Message = Record<string, unknown>;

/** One chat call through the proxy under `key`; returns the assistant message. */
async function chat(
  proxy: RecordingProxy,
  key: string,
  body: Record<string, unknown>,
): Promise<{ message: Message; finish: string }> {
  const a = await call(`${proxy.url}/v1/chat/completions`, {
    body: { model: "gpu-check", temperature: 0, max_tokens: 256, ...body },
    headers: { authorization: `Bearer ${key}` },
    timeoutMs: 300_000,
  });
  if (a.status !== 200) throw new CheckFailure(`the proxy answered ${a.status}: ${a.text.slice(0, 240)}`);
  const choice = obj((obj(a.json).choices as unknown[] | undefined)?.[0]);
  return { message: obj(choice.message), finish: String(choice.finish_reason) };
}

const startsWith = (xs: readonly number[], p: readonly number[]) =>
  p.length <= xs.length && p.every((x, i) => xs[i] === x);

/** Checks that each record extends its bridge parent and that the conversation builder agrees. */
function checkChain(records: readonly CompletionRecord[]): { traces: number; verdicts: string[] } {
  const byTurn = new Map(records.map((r) => [String(obj(r.metadata.bridge).turn_id), r]));
  const verdicts: string[] = [];
  for (const r of records) {
    const b = obj(r.metadata.bridge);
    verdicts.push(String(b.verdict));
    const parent = typeof b.parent_turn_id === "string" ? byTurn.get(b.parent_turn_id) : undefined;
    if (parent && !startsWith(r.prompt_ids, [...parent.prompt_ids, ...parent.response_ids]))
      throw new CheckFailure(
        `turn ${b.turn_id}: its prompt does not extend ${b.parent_turn_id}'s prompt + sampled ids`,
      );
    if (r.response_logprobs && r.response_logprobs.length !== r.response_ids.length)
      throw new CheckFailure(
        `turn ${b.turn_id}: ${r.response_logprobs.length} logprobs for ${r.response_ids.length} ids`,
      );
  }
  const traces = buildConversationTraces(records.map(conversationTurnFromRecord));
  const last = records.at(-1)!;
  const leaf = traces.at(-1)!;
  if ([...leaf.prompt_ids, ...leaf.response_ids].join() !== [...last.prompt_ids, ...last.response_ids].join())
    throw new CheckFailure("the conversation trace is not the last prompt + the last sampled ids");
  return { traces: traces.length, verdicts };
}

/** Turns whose sampled ids are not what encoding their own text gives (a non-canonical split). */
function nonCanonical(tok: ChatTokenizer, records: readonly CompletionRecord[]): number {
  return records.filter((r) => tok.encode(tok.decode(r.response_ids)).join() !== r.response_ids.join())
    .length;
}

/**
 * Runs the token-mode checks against `facts.url` through an in-process proxy.
 *
 * @example
 * ```ts
 * await checkTokenMode(report, facts, tok, { tokenizerPath: undefined, latencyCalls: 10 });
 * ```
 */
export async function checkTokenMode(
  report: Report,
  facts: SglangFacts,
  tok: ChatTokenizer,
  opts: { tokenizerPath?: string; latencyCalls: number; images: boolean | null },
): Promise<void> {
  let proxy: RecordingProxy;
  try {
    proxy = await startProxy({
      engine: "sglang",
      engineUrl: facts.url,
      modelServed: facts.model ?? "default",
      healthIntervalMs: 0,
      logger: quiet,
      ...(opts.tokenizerPath ? { tokenizerPath: opts.tokenizerPath } : {}),
      ...(facts.contextLength !== null ? { contextLength: facts.contextLength } : {}),
    });
  } catch (err) {
    await report.run(ENGINE, "proxy start", async () => {
      throw err;
    });
    return;
  }
  let sessions = 0;
  const open = () => {
    const id = `gpu-check-${process.pid}-${++sessions}`;
    return { id, key: proxy.openSession(id, { harness: "gpu-check" }).key };
  };
  const records = (id: string) => proxy.completions(id);
  try {
    await report.run(ENGINE, "token mode: multi-turn", async () => {
      const { id, key } = open();
      const messages: Message[] = [{ role: "user", content: "Name three colours, one per line." }];
      for (const next of ["Now name three animals.", "And three cities?"]) {
        const { message } = await chat(proxy, key, { messages, max_tokens: 96 });
        messages.push({ role: "assistant", content: message.content ?? "" }, { role: "user", content: next });
      }
      await chat(proxy, key, { messages, max_tokens: 96 });
      const recs = records(id);
      if (recs.length !== 3) throw new CheckFailure(`${recs.length} records for 3 calls`);
      const { traces, verdicts } = checkChain(recs);
      const split = nonCanonical(tok, recs);
      const note =
        split > 0
          ? `the model sampled a non-canonical split in ${split} of 3 turns; the bridge kept its ids`
          : "no non-canonical split was sampled (the bridge's exactness was not put to that test)";
      if (traces !== 1)
        throw new CheckOutcome("WARN", `${traces} traces (verdicts ${verdicts.join(", ")}); ${note}`);
      return `3 turns, one trace, verdicts ${verdicts.join(", ")}; ${note}`;
    });

    await report.run(ENGINE, "token mode: tool turn", async () => {
      const { id, key } = open();
      const tools = [
        {
          type: "function",
          function: {
            name: "calculator",
            description: "Evaluates an arithmetic expression.",
            parameters: {
              type: "object",
              properties: { expression: { type: "string" } },
              required: ["expression"],
            },
          },
        },
      ];
      const messages: Message[] = [
        { role: "user", content: "What is 17 * 23? Use the calculator tool, then answer." },
      ];
      const first = await chat(proxy, key, { messages, tools });
      const calls = Array.isArray(first.message.tool_calls) ? (first.message.tool_calls as Message[]) : [];
      if (calls.length === 0)
        throw new CheckOutcome(
          "WARN",
          `the model answered without calling the tool (finish ${first.finish})`,
        );
      const fn = obj(calls[0]!.function);
      if (first.finish !== "tool_calls")
        throw new CheckFailure(`finish_reason ${first.finish} with a tool call`);
      if (typeof fn.arguments !== "string" || typeof JSON.parse(fn.arguments) !== "object")
        throw new CheckFailure(`tool arguments ${JSON.stringify(fn.arguments)} are not a JSON object string`);
      messages.push(first.message, { role: "tool", tool_call_id: calls[0]!.id, content: "391" });
      await chat(proxy, key, { messages, tools });
      const recs = records(id);
      const { verdicts } = checkChain(recs);
      if (verdicts[1] !== "extended")
        throw new CheckFailure(`the turn after the tool result was ${verdicts[1]}, not extended`);
      return `called ${fn.name}(${fn.arguments}); the follow-up extended the chain token for token`;
    });

    await report.run(ENGINE, "token mode: image turn", async () => {
      if (opts.images === false || (opts.images === null && !facts.images))
        throw new CheckOutcome(
          "SKIP",
          "the model takes no images (/model_info has_image_understanding is not true)",
        );
      const { id, key } = open();
      const { png } = starImage({ stars: 3, seed: 5 });
      const { message } = await chat(proxy, key, {
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "How many stars are in this picture? Answer with a number." },
              {
                type: "image_url",
                image_url: { url: `data:image/png;base64,${Buffer.from(png).toString("base64")}` },
              },
            ],
          },
        ],
      });
      const [rec] = records(id);
      if (!rec) throw new CheckFailure("no record");
      const flags = (obj(rec.metadata.bridge).flags as unknown[] | undefined) ?? [];
      const sent = (rec.metadata as JsonObject).sent_prompt_ids;
      if (flags.length > 0)
        throw new CheckFailure(
          `the image turn was flagged ${flags.join(", ")}: the engine did not confirm the ids it ran`,
        );
      const expanded = Array.isArray(sent) && sent.length < rec.prompt_ids.length;
      return `recorded ${rec.prompt_ids.length} prompt ids${expanded ? ` (the engine expanded the ${(sent as unknown[]).length} sent)` : ""}; the model said ${JSON.stringify(String(message.content ?? "").slice(0, 40))} (3 stars drawn)`;
    });

    await report.run(ENGINE, "proxy latency", async () => {
      const n = Math.max(1, opts.latencyCalls);
      const direct: number[] = [];
      const proxied: number[] = [];
      const text = "Reply with one word.";
      const ids = promptIds(tok, text);
      const { key } = open();
      for (let i = 0; i < n; i++) {
        const d = await call(`${facts.url}/generate`, {
          body: {
            input_ids: ids,
            rid: `gpu-check-latency-${process.pid}-${i}`,
            return_logprob: true,
            logprob_start_len: -1,
            sampling_params: {
              temperature: 0,
              max_new_tokens: 1,
              skip_special_tokens: false,
              no_stop_trim: true,
            },
          },
        });
        if (d.status !== 200) throw new CheckFailure(`/generate answered ${d.status}`);
        direct.push(d.ms);
        const started = performance.now();
        await chat(proxy, key, { messages: [{ role: "user", content: text }], max_tokens: 1 });
        proxied.push(performance.now() - started);
      }
      const added = median(proxied) - median(direct);
      report.figure({
        engine: ENGINE,
        name: "proxy added latency per call (median)",
        value: added,
        unit: "ms",
        note: `${n} one-token calls: through the proxy ${median(proxied).toFixed(1)} ms, direct ${median(direct).toFixed(1)} ms`,
      });
      return `median ${median(proxied).toFixed(1)} ms through the proxy vs ${median(direct).toFixed(1)} ms direct (${n} calls)`;
    });
  } finally {
    await proxy.close();
  }
}
