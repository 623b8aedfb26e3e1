/**
 * A trainer's plain forward pass over a reference-engine checkpoint (transformers, float32, on the
 * CPU): what the recorded logprobs of a token-mode trace must equal. Shared by the suites that
 * check the reference engine's logprobs end to end.
 *
 * @module
 */
import { execa } from "execa";
import { referenceEngineEnv, torchPython } from "../../cli/reference-engine";

const SCRIPT = [
  "import json, sys, torch",
  "from transformers import AutoModelForCausalLM",
  "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()",
  "ids, n, t = json.loads(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])",
  "x = torch.tensor([ids])",
  "with torch.no_grad(): lp = torch.log_softmax(m(input_ids=x).logits[0, n - 1:-1] / t, -1)",
  "print(json.dumps(lp.gather(1, x[0, n:, None])[:, 0].tolist()))",
].join("\n");

/**
 * The logprob of each id of `ids` after `promptLength` under the checkpoint at `model`, with the
 * logits divided by `temperature` (1: the raw distribution), as the engine samples them.
 *
 * @example
 * ```ts
 * const lps = await forwardPassLogprobs(modelDir, [...prompt, ...response], prompt.length, 0.7);
 * ```
 */
export async function forwardPassLogprobs(
  model: string,
  ids: number[],
  promptLength: number,
  temperature = 1,
): Promise<number[]> {
  const r = await execa(
    torchPython(),
    ["-c", SCRIPT, model, JSON.stringify(ids), String(promptLength), String(temperature)],
    { env: referenceEngineEnv() },
  );
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as number[];
}

const ROUTES_SCRIPT = [
  "import json, sys, torch",
  "from transformers import AutoModelForCausalLM",
  "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()",
  "ids, k = json.loads(sys.argv[2]), m.config.num_experts_per_tok",
  "with torch.no_grad(): out = m(input_ids=torch.tensor([ids]), output_router_logits=True)",
  "top = [torch.topk(torch.softmax(lg.float(), -1), k, -1).indices for lg in out.router_logits]",
  "print(json.dumps([[t[p].tolist() for t in top] for p in range(len(ids) - 1)]))",
].join("\n");

/**
 * The experts an MoE checkpoint's routers pick in one plain forward pass over `ids`: for each
 * position but the last, per layer, the top-k of the softmax of the router logits
 * (`output_router_logits`), shaped `[positions, layers, top_k]` as a trace's routed experts.
 *
 * @example
 * ```ts
 * const rows = await forwardPassRoutedExperts(moeDir, [...prompt, ...response]);
 * ```
 */
export async function forwardPassRoutedExperts(model: string, ids: number[]): Promise<number[][][]> {
  const r = await execa(torchPython(), ["-c", ROUTES_SCRIPT, model, JSON.stringify(ids)], {
    env: referenceEngineEnv(),
  });
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as number[][][];
}
