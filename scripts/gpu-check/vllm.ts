/**
 * The GPU check against a running vLLM server: the OpenAI chat route with `return_token_ids`
 * (what Polar-TS's `vllm` engine relies on, docs/engines.md), called directly and then through an
 * in-process recording proxy for a two-turn session.
 *
 * @module
 */
import { type RecordingProxy, startProxy } from "../../proxy/server";
import { call, obj } from "./http";
import { CheckFailure, CheckOutcome, type Report } from "./report";

const ENGINE = "vllm";
const quiet = { info() {}, warn() {}, error() {} };

/**
 * Runs the vLLM checks against `url`.
 *
 * @example
 * ```ts
 * await checkVllm(report, "http://127.0.0.1:8000", { model: null });
 * ```
 */
export async function checkVllm(report: Report, url: string, opts: { model: string | null }): Promise<void> {
  let model = opts.model;
  let contextLength: number | null = null;
  const up = await report.run(ENGINE, "models", async () => {
    const a = await call(`${url}/v1/models`);
    if (a.status !== 200) throw new CheckFailure(`/v1/models answered ${a.status}`);
    const first = obj((obj(a.json).data as unknown[] | undefined)?.[0]);
    if (typeof first.id !== "string") throw new CheckFailure("/v1/models lists no model");
    model ??= first.id;
    contextLength = typeof first.max_model_len === "number" ? first.max_model_len : null;
    return `model ${model}, max_model_len ${contextLength ?? "not reported"}`;
  });
  if (up.status === "FAIL") return;

  await report.run(ENGINE, "chat: return_token_ids", async () => {
    const a = await call(`${url}/v1/chat/completions`, {
      body: {
        model,
        messages: [{ role: "user", content: "Count from one to five in words." }],
        max_tokens: 32,
        temperature: 0,
        logprobs: true,
        top_logprobs: 0,
        return_token_ids: true,
      },
    });
    if (a.status !== 200) throw new CheckFailure(`chat answered ${a.status}: ${a.text.slice(0, 200)}`);
    const body = obj(a.json);
    const choice = obj((body.choices as unknown[] | undefined)?.[0]);
    const prompt = body.prompt_token_ids;
    const sampled = choice.token_ids;
    if (!Array.isArray(prompt) || !Array.isArray(sampled))
      throw new CheckFailure(
        "no prompt_token_ids / choices[0].token_ids: vLLM ≥ 0.10.2 returns them with return_token_ids",
      );
    const content = obj(choice.logprobs).content;
    if (!Array.isArray(content) || content.length !== sampled.length)
      throw new CheckFailure(
        `logprobs.content has ${Array.isArray(content) ? content.length : "no"} entries for ${sampled.length} token ids`,
      );
    return `${prompt.length} prompt ids, ${sampled.length} sampled ids with aligned logprobs`;
  });

  await report.run(ENGINE, "proxy: two turns recorded", async () => {
    let proxy: RecordingProxy | undefined;
    try {
      proxy = await startProxy({
        engine: "vllm",
        engineUrl: url,
        modelServed: model ?? "default",
        healthIntervalMs: 0,
        logger: quiet,
      });
      const { key } = proxy.openSession("gpu-check-vllm", { harness: "gpu-check" });
      const messages: Array<Record<string, unknown>> = [{ role: "user", content: "Name a colour." }];
      for (let i = 0; i < 2; i++) {
        const a = await call(`${proxy.url}/v1/chat/completions`, {
          body: { model: "gpu-check", messages, temperature: 0, max_tokens: 64 },
          headers: { authorization: `Bearer ${key}` },
          timeoutMs: 300_000,
        });
        if (a.status !== 200)
          throw new CheckFailure(`the proxy answered ${a.status}: ${a.text.slice(0, 200)}`);
        const msg = obj(obj((obj(a.json).choices as unknown[] | undefined)?.[0]).message);
        messages.push(
          { role: "assistant", content: msg.content ?? "" },
          { role: "user", content: "Another one?" },
        );
      }
      const recs = proxy.completions("gpu-check-vllm");
      if (recs.length !== 2) throw new CheckFailure(`${recs.length} records for 2 calls`);
      for (const r of recs) {
        if (r.prompt_ids.length === 0 || r.response_ids.length === 0)
          throw new CheckFailure("a record has no prompt or response ids");
        if (!r.response_logprobs || r.response_logprobs.length !== r.response_ids.length)
          throw new CheckFailure("a record's logprobs are missing or misaligned");
      }
      const wv = recs.map((r) => r.weight_version);
      if (wv.every((v) => v === null || v === undefined))
        throw new CheckOutcome(
          "WARN",
          "two turns recorded with ids and logprobs; vLLM reports no weight version",
        );
      return `two turns recorded with ids and logprobs, weight versions ${wv.join(", ")}`;
    } finally {
      await proxy?.close();
    }
  });
}
