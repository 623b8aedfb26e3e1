/**
 * A session's logs: each stream (`prepare`, `harness.stdout`, `harness.stderr`, `evaluator`) with
 * the bytes kept of the bytes written; the harness's streams open.
 *
 * @module
 */
import type { LogStream } from "../api-types";
import type { Resource } from "../hooks";
import { ErrorNote } from "../ui";

/**
 * The logs section's content.
 *
 * @example
 * ```tsx
 * <SessionLogs logs={logs} />
 * ```
 */
export function SessionLogs({ logs }: { logs: Resource<{ streams: LogStream[] } | null> }) {
  return (
    <>
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
    </>
  );
}
