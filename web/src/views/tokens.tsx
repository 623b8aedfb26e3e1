/**
 * A trajectory at token level: each token's text (from the gateway's tokenizer, via
 * `GET /v1/sessions/:id/tokens`; never re-encoded here) coloured by loss mask, its logprob as heat,
 * and the token bridge's verdict where each turn starts. Without token text (a control plane or
 * engine that has none) the ids are shown instead, with the same colours.
 *
 * @module
 */
import type { Trace, TraceText } from "../api-types";

/**
 * A turn of a trace's `metadata.turns`: the token bridge's verdict on it and where it starts (the
 * document types a trace's metadata as any object).
 */
interface Turn {
  verdict?: string;
  reason?: string;
  sampled_start?: number;
  bridged_start?: number;
}

/** A turn's badge, at the response token where it starts. */
interface TurnMark {
  n: number;
  verdict: string;
  reason?: string;
}

/**
 * The heat of a logprob: 0 for a certain token, towards 1 as its probability falls.
 *
 * @example
 * ```ts
 * heat(0); // 0
 * heat(Math.log(0.25)); // 0.75
 * ```
 */
export function heat(logprob: number | undefined): number {
  if (logprob === undefined || !Number.isFinite(logprob)) return 0;
  return Math.min(1, Math.max(0, 1 - Math.exp(logprob)));
}

/** Makes whitespace in a token's text visible without changing its length much. */
function show(text: string): string {
  return text.replace(/\n/g, "↵\n").replace(/\t/g, "→");
}

/** A token's text when the page has it, else its id. */
const label = (i: number, ids: number[], texts: string[] | undefined) =>
  texts?.[i] !== undefined ? show(texts[i]!) : `[${ids[i]}]`;

/** Each turn's badge by the response index where the turn starts. */
function turnMarks(trace: Trace): Map<number, TurnMark> {
  const turns = trace.metadata?.turns;
  const marks = new Map<number, TurnMark>();
  (Array.isArray(turns) ? (turns as Turn[]) : []).forEach((t, n) => {
    const at = t.bridged_start ?? t.sampled_start;
    if (typeof at === "number")
      marks.set(at, { n: n + 1, verdict: t.verdict ?? "?", ...(t.reason ? { reason: t.reason } : {}) });
  });
  return marks;
}

/** One response token, preceded by its turn's badge where a turn starts. */
function ResponseToken({
  trace,
  i,
  text,
  turn,
}: {
  trace: Trace;
  i: number;
  text: string[] | undefined;
  turn: TurnMark | undefined;
}) {
  const id = trace.response_ids[i];
  const lp = trace.response_logprobs?.[i];
  const mask = trace.loss_mask[i] ?? 0;
  const h = mask === 1 ? heat(lp) : 0;
  return (
    <>
      {turn ? (
        <span class={`verdict verdict-${turn.verdict}`} title={turn.reason ?? ""} data-verdict={turn.verdict}>
          turn {turn.n}: {turn.verdict}
        </span>
      ) : null}
      <span
        class={`tok ${mask === 1 ? "tok-train" : "tok-ctx"}`}
        data-mask={mask}
        style={h > 0 ? { backgroundColor: `rgba(220, 50, 47, ${(0.15 + 0.7 * h).toFixed(2)})` } : undefined}
        title={`response #${i} id ${id} mask ${mask}${lp === undefined ? "" : ` logprob ${lp.toFixed(3)}`}`}
      >
        {label(i, trace.response_ids, text)}
      </span>
    </>
  );
}

/**
 * One trace: the prompt (collapsed), then the response tokens with masks, heat and turn verdicts.
 *
 * @example
 * ```tsx
 * <TraceTokens index={0} trace={trace} text={{ prompt: ["<|im_start|>"], response: ["Hi"] }} />
 * ```
 */
export function TraceTokens({ index, trace, text }: { index: number; trace: Trace; text: TraceText | null }) {
  const turns = turnMarks(trace);
  const masked = trace.loss_mask.filter((m) => m === 1).length;
  return (
    <div class="trace" data-trace={index}>
      <h3>
        trace {index}: {trace.prompt_ids.length} prompt + {trace.response_ids.length} response tokens (
        {masked} trained)
      </h3>
      <details>
        <summary>prompt ({trace.prompt_ids.length} tokens)</summary>
        <pre class="tokens">
          {trace.prompt_ids.map((id, i) => (
            <span key={i} class="tok tok-prompt" title={`prompt #${i} id ${id}`}>
              {label(i, trace.prompt_ids, text?.prompt)}
            </span>
          ))}
        </pre>
      </details>
      <pre class="tokens" data-response>
        {trace.response_ids.map((_, i) => (
          <ResponseToken key={i} trace={trace} i={i} text={text?.response} turn={turns.get(i)} />
        ))}
      </pre>
    </div>
  );
}
