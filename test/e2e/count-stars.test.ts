/**
 * count_stars (VLM) end to end, every part a real process: a PNG with N stars is drawn in each
 * session's workspace, the shell harness sends it through the gateway's proxy as an OpenAI
 * `image_url` data URL (ask-openai.mjs) or as an Anthropic base64 `image` block (ask-anthropic.mjs),
 * and the simulated engine decodes the PNG it receives, counts the bright blobs and answers. The
 * sim's image counters prove the images arrived (as chat `image_url` parts with the chat engine,
 * as `/generate` `image_data` in token mode); the custom evaluator module scores the answer.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { CompletionRecord, SessionResult } from "../../protocol";
import { STAR_MISCOUNT_PROBABILITY } from "../../sim/policy";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";

interface ImageCounters {
  received_total: number;
  refused_total: number;
  png_total: number;
  jpeg_total: number;
  chat_total: number;
  generate_total: number;
  stars_total: number;
}

const FILES = ["task.openai.yaml", "task.anthropic.yaml"] as const;

describe.each([
  ["sglang-openai", "chat_total"],
  ["sglang", "generate_total"],
] as const)("count_stars with the gateway engine %s", (engine, endpointCounter) => {
  let stack: LocalStack;
  let tokenizer: ChatTokenizer;
  let before: ImageCounters;
  let after: ImageCounters;
  const results = new Map<string, SessionResult[]>();
  const records = new Map<string, CompletionRecord[]>();
  const expectedStars = new Map<string, number>();

  const simImages = async () =>
    ((await (await fetch(`${stack.engineUrl}/sim/stats`)).json()) as { images: ImageCounters }).images;

  beforeAll(async () => {
    [stack, tokenizer] = await Promise.all([
      startLocalStack({
        gateways: 1,
        engine,
        // A group of 4 samples of both tasks at once: each session is a single model call.
        gatewayArgs: ["--max-init", "8", "--max-run", "8", "--max-postrun", "8"],
      }),
      loadChatTokenizer(),
    ]);
    before = await simImages();
    for (const file of FILES) {
      const batch = loadTaskFile(join(REPO_ROOT, "examples/count_stars", file));
      for (const t of batch.tasks)
        expectedStars.set(t.task_id, (t.evaluator!.config as { expected_stars: number }).expected_stars);
      const created = await stack.client.submit(batch);
      expect(created.sessions).toBe(8);
      const got: SessionResult[] = [];
      for await (const { result } of stack.client.streamResults(created.batch_id, { timeoutMs: 120_000 }))
        got.push(result);
      results.set(file, got);
      for (const r of got) {
        const res = await fetch(`${stack.controlPlane.url}/v1/sessions/${r.session_id}/completions`, {
          headers: { authorization: `Bearer ${stack.tokens.trainer}` },
        });
        expect(res.status).toBe(200);
        records.set(r.session_id, (await res.json()) as CompletionRecord[]);
      }
    }
    after = await simImages();
  });

  afterAll(async () => {
    await stack?.stop();
  });

  it("the engine received every image, decoded as PNG, on the endpoint of the mode", () => {
    const sessions = [...results.values()].flat().length;
    expect(sessions).toBe(16);
    const delta = (k: keyof ImageCounters) => after[k] - before[k];
    expect(delta("received_total")).toBe(sessions); // one picture per session, one call each
    expect(delta("png_total")).toBe(sessions);
    expect(delta(endpointCounter)).toBe(sessions);
    expect(delta("refused_total")).toBe(0);
    // The sim counted exactly the stars drawn: 4 samples of each task's picture.
    const drawn = [...expectedStars.values()].reduce((n, s) => n + 4 * s, 0);
    expect(delta("stars_total")).toBe(drawn);
  });

  it.each(FILES)("%s: every session is scored by the evaluator module from the model's answer", (file) => {
    const got = results.get(file)!;
    expect(got.map((r) => r.status)).toEqual(got.map(() => "COMPLETED"));
    for (const r of got) {
      const ev = (r.trajectory.metadata as { evaluation: { expected_stars: number; answer: number } })
        .evaluation;
      const expected = expectedStars.get(r.task_id)!;
      expect(ev.expected_stars).toBe(expected);
      // The sim counts right or is off by one (its seeded miscount): it really looked at the pixels.
      expect(Math.abs(ev.answer - expected)).toBeLessThanOrEqual(1);
      expect(r.reward).toBe(ev.answer === expected ? 1 : 0);
    }
  });

  it("the miscount is the exception: at least 6 of the 16 answers are right", () => {
    const rewards = [...results.values()].flat().map((r) => r.reward);
    expect(rewards).toHaveLength(16);
    // The policy miscounts with probability STAR_MISCOUNT_PROBABILITY (a quarter), independently
    // per session: fewer than 6 right of 16 happens about 3 times in 10,000 runs, a policy that
    // does not read the pixels (always off by one, or guessing) fails it.
    expect(STAR_MISCOUNT_PROBABILITY).toBe(0.25);
    expect(rewards.filter((x) => x === 1).length).toBeGreaterThanOrEqual(6);
  });

  it("the traces are token-exact for the text part; the request kept the image", () => {
    for (const r of [...results.values()].flat()) {
      expect(r.trajectory.traces).toHaveLength(1);
      const trace = r.trajectory.traces[0]!;
      const recs = records.get(r.session_id)!;
      expect(recs).toHaveLength(1);
      const rec = recs[0]!;
      expect(rec.engine).toBe(engine);
      expect(trace.prompt_ids).toEqual(rec.prompt_ids);
      expect(trace.response_ids).toEqual(rec.response_ids);
      // Qwen3's text template renders no image placeholder (string content drops image parts, as
      // SGLang does), so the prompt ids are exactly the template's render of the text.
      const rendered = tokenizer.render(trace.prompt_messages, { addGenerationPrompt: true });
      expect(tokenizer.decode(trace.prompt_ids)).toBe(rendered);
      expect(rendered).toContain("How many stars are in this image?");
      expect(trace.response_logprobs).toHaveLength(trace.response_ids.length);
      expect(tokenizer.decode(trace.response_ids)).toMatch(/<\|im_end\|>$/);
      const parts = (
        trace.prompt_messages[0] as { content: Array<{ type: string; image_url?: { url: string } }> }
      ).content;
      const image = parts.find((p) => p.type === "image_url");
      expect(image?.image_url?.url).toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
    }
  });
});
