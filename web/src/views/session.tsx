/**
 * A session: its state and stage timeline, its logs, each model call from its completion records
 * (what the harness sent, what the engine was given, what it answered), and its trajectory at
 * token level. Each part says so when this control plane does not serve it.
 *
 * @module
 */
import { type Api, ApiError, seg } from "../api";
import { BarChart } from "../chart";
import { useResource } from "../hooks";
import { hrefOf } from "../routes";
import { fmtReward, stageDatasets } from "../stats";
import { ErrorNote, Section, Status } from "../ui";
import { type TraceLike, TraceTokens } from "./tokens";

interface SessionBody {
  session_id: string;
  batch_id: string;
  task_id: string;
  status: string;
  attempt: number;
  node_id: string | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  has_completions: boolean;
  result: {
    reward: number | null;
    error: { kind: string; message: string } | null;
    timing: Record<string, number>;
    trajectory: { traces: TraceLike[]; error: string | null };
  } | null;
}
interface LogStream {
  name: string;
  bytes_total: number;
  bytes_kept: number;
  truncated: boolean;
  text: string;
}
interface CompletionRecord {
  completion_id: string;
  api_type: string;
  engine: string;
  model_used: string;
  original_request: unknown;
  request: unknown;
  response: unknown;
  prompt_ids: number[];
  response_ids: number[];
  finish_reason: string | null;
  latency_ms: number;
  metadata: { bridge?: { verdict?: string } };
}

const json = (v: unknown) => JSON.stringify(v, null, 2);

/** `null` for a 404 (the session has none of this), the error otherwise. */
async function optional<T>(p: Promise<T>): Promise<T | null> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof ApiError && e.name !== "ApiMissing" && e.status === 404) return null;
    throw e;
  }
}

/**
 * The session view.
 *
 * @example
 * ```tsx
 * <Session api={api} sessionId="b1.t1.0" />
 * ```
 */
export function Session({ api, sessionId }: { api: Api; sessionId: string }) {
  const base = `/v1/sessions/${seg(sessionId)}`;
  const session = useResource(() => api.get<SessionBody>(base), [sessionId]);
  const finished = session.data?.result !== null && session.data?.result !== undefined;
  const logs = useResource(
    () => optional(api.get<{ streams: LogStream[] }>(`${base}/logs`)),
    [sessionId, finished],
  );
  const tokens = useResource(
    () => optional(api.get<{ traces: Array<{ prompt: string[]; response: string[] }> }>(`${base}/tokens`)),
    [sessionId, finished],
  );
  const completions = useResource(
    async () =>
      session.data?.has_completions
        ? await api.get<CompletionRecord[] | { records: CompletionRecord[] }>(`${base}/completions`)
        : null,
    [sessionId, session.data?.has_completions],
  );
  const s = session.data;
  const records = completions.data
    ? Array.isArray(completions.data)
      ? completions.data
      : completions.data.records
    : null;
  return (
    <div class="view" data-view="session">
      <h1>Session {sessionId}</h1>
      {session.error ? <ErrorNote error={session.error} what="session" /> : null}
      {s ? (
        <>
          <Section title="State">
            <p>
              <Status status={s.status} /> task{" "}
              <a href={hrefOf({ view: "task", batchId: s.batch_id, taskId: s.task_id })}>{s.task_id}</a> of
              batch <a href={hrefOf({ view: "batch", batchId: s.batch_id })}>{s.batch_id}</a>, node{" "}
              {s.node_id ?? "–"}, attempt {s.attempt}, reward <b data-reward>{fmtReward(s.result?.reward)}</b>
            </p>
            {s.result?.error ? (
              <p class="error">
                {s.result.error.kind}: {s.result.error.message}
              </p>
            ) : null}
            {s.result ? (
              <BarChart
                label="stage timeline"
                labels={[sessionId]}
                datasets={stageDatasets([{ timing: s.result.timing }])}
                horizontal
                stacked
                unit="seconds"
                height={110}
              />
            ) : (
              <p class="muted">Running: the timeline is shown when the result arrives.</p>
            )}
          </Section>
          <Section title="Logs" id="logs">
            {logs.error ? <ErrorNote error={logs.error} what="logs" /> : null}
            {logs.data === null ? <p class="muted">This session has no logs.</p> : null}
            {logs.data?.streams.map((st) => (
              <details key={st.name} open={st.name.startsWith("harness")} data-log={st.name}>
                <summary>
                  {st.name}: {st.bytes_kept} of {st.bytes_total} bytes{st.truncated ? " (tail kept)" : ""}
                </summary>
                <pre class="log">{st.text}</pre>
              </details>
            ))}
          </Section>
          <Section title="Model calls" id="calls">
            {completions.error ? <ErrorNote error={completions.error} what="completion records" /> : null}
            {!s.has_completions ? <p class="muted">No completion records (yet).</p> : null}
            {records?.map((r, i) => (
              <details key={r.completion_id} class="call" data-call={i}>
                <summary>
                  call {i + 1}: {r.api_type} → {r.engine} {r.model_used}, {r.prompt_ids.length}+
                  {r.response_ids.length} tokens, {Math.round(r.latency_ms)} ms, {r.finish_reason ?? "–"}
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
            ))}
          </Section>
          <Section title="Trajectory" id="trajectory">
            {tokens.error ? <ErrorNote error={tokens.error} what="token text" /> : null}
            {finished && tokens.data === null ? (
              <p class="muted">No token text for this session: token ids are shown.</p>
            ) : null}
            <p class="legend">
              <span class="tok tok-train">trained (mask 1)</span>{" "}
              <span class="tok tok-ctx">context (mask 0)</span>{" "}
              <span class="tok tok-train" style={{ backgroundColor: "rgba(220, 50, 47, 0.85)" }}>
                low logprob
              </span>
            </p>
            {s.result?.trajectory.traces.map((t, i) => (
              <TraceTokens key={i} index={i} trace={t} text={tokens.data?.traces[i] ?? null} />
            ))}
          </Section>
        </>
      ) : null}
    </div>
  );
}
