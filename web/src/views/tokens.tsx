/**
 * A trajectory at token level: each token's text (from the gateway's tokenizer, via
 * `GET /v1/sessions/:id/tokens`; never re-encoded here) coloured by loss mask, its logprob as heat,
 * and the token bridge's verdict where each turn starts. Without token text (a control plane or
 * engine that has none) the ids are shown instead, with the same colours.
 *
 * @module
 */

/** The trace fields this view reads. */
export interface TraceLike {
  prompt_ids: number[];
  response_ids: number[];
  loss_mask: number[];
  response_logprobs: number[] | null;
  metadata?: {
    turns?: Array<{ verdict?: string; reason?: string; sampled_start?: number; bridged_start?: number }>;
  };
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

/**
 * One trace: the prompt (collapsed), then the response tokens with masks, heat and turn verdicts.
 *
 * @example
 * ```tsx
 * <TraceTokens index={0} trace={trace} text={{ prompt: ["<|im_start|>"], response: ["Hi"] }} />
 * ```
 */
export function TraceTokens({
  index,
  trace,
  text,
}: {
  index: number;
  trace: TraceLike;
  text: { prompt: string[]; response: string[] } | null;
}) {
  const turnAt = new Map<number, { n: number; verdict: string; reason?: string }>();
  (trace.metadata?.turns ?? []).forEach((t, n) => {
    const at = t.bridged_start ?? t.sampled_start;
    if (typeof at === "number")
      turnAt.set(at, { n: n + 1, verdict: t.verdict ?? "?", ...(t.reason ? { reason: t.reason } : {}) });
  });
  const label = (i: number, ids: number[], texts: string[] | undefined) =>
    texts?.[i] !== undefined ? show(texts[i]!) : `[${ids[i]}]`;
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
        {trace.response_ids.map((id, i) => {
          const lp = trace.response_logprobs?.[i];
          const mask = trace.loss_mask[i] ?? 0;
          const turn = turnAt.get(i);
          const h = mask === 1 ? heat(lp) : 0;
          return (
            <>
              {turn ? (
                <span
                  class={`verdict verdict-${turn.verdict}`}
                  title={turn.reason ?? ""}
                  data-verdict={turn.verdict}
                >
                  turn {turn.n}: {turn.verdict}
                </span>
              ) : null}
              <span
                key={i}
                class={`tok ${mask === 1 ? "tok-train" : "tok-ctx"}`}
                data-mask={mask}
                style={
                  h > 0 ? { backgroundColor: `rgba(220, 50, 47, ${(0.15 + 0.7 * h).toFixed(2)})` } : undefined
                }
                title={`response #${i} id ${id} mask ${mask}${lp === undefined ? "" : ` logprob ${lp.toFixed(3)}`}`}
              >
                {label(i, trace.response_ids, text?.response)}
              </span>
            </>
          );
        })}
      </pre>
    </div>
  );
}
