/**
 * A session's model calls from its completion records: for each, what the harness sent, what the
 * engine was given and what it answered, with its tokens, latency and the bridge's verdict.
 *
 * @module
 */
import type { CompletionRecord } from "../api-types";
import type { Resource } from "../hooks";
import { ErrorNote } from "../ui";

const json = (v: unknown) => JSON.stringify(v, null, 2);

/** One call, folded to its one-line summary. */
function ModelCall({ record: r, index: i }: { record: CompletionRecord; index: number }) {
  return (
    <details class="call" data-call={i}>
      <summary>
        call {i + 1}: {r.api_type} → {r.engine} {r.model_used}, {r.prompt_ids.length}+{r.response_ids.length}{" "}
        tokens, {Math.round(r.latency_ms)} ms, {r.finish_reason ?? "–"}
        {r.metadata.bridge?.verdict ? `, bridge ${r.metadata.bridge.verdict}` : ""}
      </summary>
      <div class="side-by-side">
        <div>
          <h4>harness sent</h4>
          <pre>{json(r.original_request)}</pre>
        </div>
        <div>
          <h4>engine was given</h4>
          <pre>{json(r.request)}</pre>
        </div>
        <div>
          <h4>engine answered</h4>
          <pre>{json(r.response)}</pre>
        </div>
      </div>
    </details>
  );
}

/**
 * The model calls section's content; `hasRecords` is what the session says.
 *
 * @example
 * ```tsx
 * <ModelCalls completions={completions} hasRecords={s.has_completions} />
 * ```
 */
export function ModelCalls({
  completions,
  hasRecords,
}: {
  completions: Resource<CompletionRecord[] | null>;
  hasRecords: boolean;
}) {
  return (
    <>
      {completions.error ? <ErrorNote error={completions.error} what="completion records" /> : null}
      {!hasRecords ? <p class="muted">No completion records (yet).</p> : null}
      {completions.data?.map((r, i) => (
        <ModelCall key={r.completion_id} record={r} index={i} />
      ))}
    </>
  );
}
