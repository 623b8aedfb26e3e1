/**
 * `polar inspect FILE`: read a stored session result (or a bare trajectory) and show what the model
 * saw and sampled, decoded with the chat tokenizer. Sampled tokens (loss mask 1) and context tokens
 * bridged between turns (mask 0) are shown as separate runs, so a reader can check by eye what the
 * trainer will learn from.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { SessionResult, type Trace, Trajectory } from "../../protocol";
import { loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { UsageError } from "../usage-error";

export interface InspectOptions {
  full: boolean;
  tokenizerPath?: string;
}

/** Consecutive response tokens with the same loss mask. */
export interface MaskRun {
  mask: 0 | 1;
  ids: number[];
  logprobs: number[] | null;
}

/**
 * Splits a trace's response into runs of equal loss mask.
 *
 * @example
 * ```ts
 * maskRuns(trace).map((r) => [r.mask, r.ids.length]); // [[1, 40], [0, 12], [1, 33]]
 * ```
 */
export function maskRuns(trace: Trace): MaskRun[] {
  const runs: MaskRun[] = [];
  trace.response_ids.forEach((id, i) => {
    const mask = trace.loss_mask[i] ?? 1;
    const lp = trace.response_logprobs?.[i];
    const last = runs.at(-1);
    if (last && last.mask === mask) {
      last.ids.push(id);
      if (last.logprobs && lp !== undefined) last.logprobs.push(lp);
    } else {
      runs.push({ mask, ids: [id], logprobs: trace.response_logprobs ? [lp ?? 0] : null });
    }
  });
  return runs;
}

/** Reads FILE as a session result, `{result}` wrapper, or bare trajectory. */
export function readTrajectoryFile(file: string): { result: SessionResult | null; trajectory: Trajectory } {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new UsageError(`${file}: cannot read a JSON document (${(err as Error).message})`);
  }
  const inner =
    doc !== null && typeof doc === "object" && "result" in doc ? (doc as { result: unknown }).result : doc;
  const asResult = SessionResult.safeParse(inner);
  if (asResult.success) return { result: asResult.data, trajectory: asResult.data.trajectory };
  const asTrajectory = Trajectory.safeParse(inner);
  if (asTrajectory.success) return { result: null, trajectory: asTrajectory.data };
  throw new UsageError(`${file}: neither a session result nor a trajectory`);
}

const indent = (text: string) =>
  text
    .split("\n")
    .map((l) => `    ${l}`)
    .join("\n");

/** Prints a decoded view of every trace. */
export async function runInspect(file: string, opts: InspectOptions): Promise<void> {
  const { result, trajectory } = readTrajectoryFile(file);
  const tok = await loadChatTokenizer(opts.tokenizerPath);
  if (result) {
    console.log(
      `session ${result.session_id} (task ${result.task_id}): ${result.status}, reward ${result.reward ?? "-"}, attempt ${result.attempt}, node ${result.node_id ?? "-"}`,
    );
  }
  console.log(
    `trajectory: ${trajectory.status}, ${trajectory.traces.length} trace(s), builder ${String(trajectory.metadata.builder ?? "-")}`,
  );
  trajectory.traces.forEach((trace, t) => {
    const sampled = trace.loss_mask.filter((m) => m === 1).length;
    console.log(
      `\n== trace ${t}: ${trace.prompt_ids.length} prompt tokens, ${trace.response_ids.length} response tokens (${sampled} sampled, ${trace.response_ids.length - sampled} context), finish ${trace.finish_reason ?? "-"}, reward ${trace.reward ?? "-"}`,
    );
    const prompt = tok.decode(trace.prompt_ids);
    console.log(
      opts.full
        ? `  prompt:\n${indent(prompt)}`
        : `  prompt (last 300 chars):\n${indent(prompt.slice(-300))}`,
    );
    for (const run of maskRuns(trace)) {
      const text = tok.decode(run.ids);
      const mean = run.logprobs?.length
        ? run.logprobs.reduce((a, b) => a + b, 0) / run.logprobs.length
        : null;
      const label =
        run.mask === 1
          ? `  sampled (${run.ids.length} tokens, mask 1${mean === null ? "" : `, mean logprob ${mean.toFixed(3)}`}):`
          : `  context (${run.ids.length} tokens, mask 0):`;
      console.log(`${label}\n${indent(opts.full || text.length <= 600 ? text : `${text.slice(0, 600)} …`)}`);
    }
  });
}
