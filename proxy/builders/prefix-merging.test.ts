import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import { type CompletionRecord, Trajectory } from "../../protocol";
import { startSimEngine } from "../../sim/server";
import { UnknownBuilderError } from "../errors";
import { startProxy } from "../server";
import { getBuilder, loadBuilder } from "./index";

const EOT = 99;
let seq = 0;
function rec(
  prompt: number[],
  response: number[],
  opts: { finish?: string; logprobs?: boolean } = {},
): CompletionRecord {
  seq++;
  return {
    completion_id: `cmp_${String(seq).padStart(12, "0")}`,
    session_id: "s",
    timestamp: new Date(1_777_000_000_000 + seq).toISOString(),
    api_type: "openai_chat",
    engine: "sglang-openai",
    model_requested: null,
    model_used: "m",
    original_request: {},
    request: { messages: [{ role: "user", content: `q${seq}` }] },
    response: { choices: [{ message: { role: "assistant", content: `a${seq}` } }] },
    prompt_ids: prompt,
    response_ids: response,
    response_logprobs: opts.logprobs === false ? null : response.map((_, i) => -0.5 - i),
    finish_reason: opts.finish ?? "stop",
    weight_version: null,
    cached_tokens: null,
    latency_ms: 1,
    replica: "r",
    metadata: { policy_version: "p1" },
  };
}
const ctx = { session_id: "s", task_id: "t", config: {} };
const build = getBuilder("prefix_merging");

describe("prefix_merging", () => {
  it("merges upstream's two-turn example: [r1…EOT, interstitial…, r2…EOT]", () => {
    const r1 = rec([1, 2, 3], [10, 11, EOT]);
    const r2 = rec([1, 2, 3, 10, 11, EOT, 50, 51], [20, 21, EOT]);
    const t = Trajectory.parse(build([r1, r2], ctx));
    expect(t.traces).toHaveLength(1);
    const [trace] = t.traces;
    expect(trace!.prompt_ids).toEqual([1, 2, 3]);
    expect(trace!.response_ids).toEqual([10, 11, EOT, 50, 51, 20, 21, EOT]);
    expect(trace!.loss_mask).toEqual([1, 1, 1, 0, 0, 1, 1, 1]);
    expect(trace!.response_logprobs).toEqual([-0.5, -1.5, -2.5, 0, 0, -0.5, -1.5, -2.5]);
    expect(t.metadata).toMatchObject({
      chain_count: 1,
      full_chains: 1,
      truncated_chains: 0,
      end_of_turn_token_id: EOT,
    });
  });

  it("keeps the canonical EOT after a cut-off turn", () => {
    const r1 = rec([1], [10, 11], { finish: "length" });
    const r2 = rec([1, 10, 11, EOT, 50], [20, EOT]);
    const t = build([r1, r2], { ...ctx, config: { end_of_turn_token_id: EOT } });
    expect(t.traces[0]!.response_ids).toEqual([10, 11, EOT, 50, 20, EOT]);
    expect(t.traces[0]!.loss_mask).toEqual([1, 1, 0, 0, 1, 1]);
  });

  it("starts a new chain on compaction and truncates a chain whose history is not an extension", () => {
    const r1 = rec([1, 2], [10, EOT]);
    const compacted = rec([7, 8], [30, EOT]);
    const noEot = rec([1, 2, 10, 60], [40, EOT]);
    const after = rec([1, 2, 10, 60, 40, EOT, 61], [41, EOT]);
    const t = build([r1, compacted, noEot, after], ctx);
    expect(t.traces).toHaveLength(2);
    expect(t.traces[0]!.response_ids).toEqual([10, EOT]);
    expect(t.traces[0]!.metadata).toMatchObject({
      truncated: true,
      dropped_completions: 2,
      completion_count: 1,
    });
    expect(t.metadata).toMatchObject({
      chain_count: 2,
      full_chains: 1,
      truncated_chains: 1,
      dropped_completions: 2,
      merged_completions: 2,
    });
  });

  it("follows interleaved sub-agents by longest prefix, and nulls logprobs when one turn has none", () => {
    const main1 = rec([1, 2], [10, EOT]);
    const sub1 = rec([1, 2, 10, EOT, 5, 6], [70, EOT], { logprobs: false });
    const main2 = rec([1, 2, 10, EOT, 8], [11, EOT]);
    const sub2 = rec([1, 2, 10, EOT, 5, 6, 70, EOT, 9], [71, EOT]);
    const t = build([main1, sub1, main2, sub2], ctx);
    expect(t.traces).toHaveLength(2);
    expect(t.traces[0]!.response_ids).toEqual([10, EOT, 5, 6, 70, EOT, 9, 71, EOT]);
    expect(t.traces[0]!.response_logprobs).toBeNull();
    expect(t.traces[1]!.prompt_ids).toEqual([1, 2, 10, EOT, 8]);
  });

  it("is an ERROR trajectory without completions", () => {
    expect(build([], ctx)).toMatchObject({ status: "ERROR", error: "no completions" });
  });

  it("merges a real two-turn tool session recorded through the proxy", async () => {
    const sim = await startSimEngine();
    const proxy = await startProxy({
      engine: "sglang-openai",
      engineUrl: sim.url,
      modelServed: "Qwen/Qwen3-0.6B",
      logger: { info() {}, warn() {}, error() {} },
    });
    try {
      const c = new OpenAI({
        apiKey: proxy.openSession("real").key,
        baseURL: `${proxy.url}/v1`,
        maxRetries: 0,
      });
      const tools = [
        {
          type: "function" as const,
          function: {
            name: "calculator",
            parameters: { type: "object", properties: { expression: { type: "string" } } },
          },
        },
      ];
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 6 * 7?" }];
      const first = await c.chat.completions.create({ model: "m", messages, tools });
      messages.push(first.choices[0]!.message, {
        role: "tool",
        tool_call_id: first.choices[0]!.message.tool_calls![0]!.id,
        content: "42",
      });
      await c.chat.completions.create({ model: "m", messages, tools });
      const [r1, r2] = proxy.completions("real");
      const t = Trajectory.parse(build([r1!, r2!], ctx));
      expect(t.traces).toHaveLength(1);
      const trace = t.traces[0]!;
      expect(trace.response_ids.slice(0, r1!.response_ids.length)).toEqual(r1!.response_ids);
      expect(trace.response_ids.slice(-r2!.response_ids.length)).toEqual(r2!.response_ids);
      const zeros = trace.loss_mask.filter((m) => m === 0).length;
      expect(zeros).toBe(trace.response_ids.length - r1!.response_ids.length - r2!.response_ids.length);
      expect(zeros).toBeGreaterThan(3);
      expect(t.metadata.end_of_turn_token_id).toBe(151645);
    } finally {
      await proxy.close();
      await sim.close();
    }
  });
});

describe("builder registry", () => {
  const dir = mkdtemp(path.join(tmpdir(), "polar-builder-"));
  afterAll(async () => rm(await dir, { recursive: true, force: true }));

  it("loads custom builders by module path: functions and upstream-style classes", async () => {
    const file = path.join(await dir, "custom.mjs");
    await writeFile(
      file,
      `export function lastOnly(records, ctx) {
         return { status: "COMPLETED", traces: [], metadata: { n: records.length, task: ctx.task_id }, error: null };
       }
       export class Counting {
         constructor(config) { this.config = config; }
         build(records) { return { status: "COMPLETED", traces: [], metadata: { n: records.length, k: this.config.k }, error: null }; }
       }`,
    );
    const fn = await loadBuilder(`${file}:lastOnly`);
    expect(fn([rec([1], [2])], ctx).metadata).toEqual({ n: 1, task: "t" });
    const cls = await loadBuilder(`${file}:Counting`);
    expect(cls([], { ...ctx, config: { k: 3 } }).metadata).toEqual({ n: 0, k: 3 });
    expect(getBuilder(`${file}:Counting`)).toBe(cls);
    await expect(loadBuilder(`${file}:missing`)).rejects.toBeInstanceOf(UnknownBuilderError);
    await expect(loadBuilder("tree")).rejects.toBeInstanceOf(UnknownBuilderError);
  });
});
