/**
 * A session's trajectory section: the colour legend, then every trace at token level with its
 * token text, or its ids when the session has no token text.
 *
 * @module
 */
import type { TokenText, Trace } from "../api-types";
import type { Resource } from "../hooks";
import { ErrorNote } from "../ui";
import { TraceTokens } from "./tokens";

/**
 * The trajectory section's content; `finished` tells a session without token text from one
 * whose result has not arrived.
 *
 * @example
 * ```tsx
 * <Trajectory traces={s.result?.trajectory.traces ?? []} tokens={tokens} finished />
 * ```
 */
export function Trajectory({
  traces,
  tokens,
  finished,
}: {
  traces: Trace[];
  tokens: Resource<TokenText | null>;
  finished: boolean;
}) {
  return (
    <>
      {tokens.error ? <ErrorNote error={tokens.error} what="token text" /> : null}
      {finished && tokens.data === null ? (
        <p class="muted">No token text for this session: token ids are shown.</p>
      ) : null}
      <p class="legend">
        <span class="tok tok-train">trained (mask 1)</span> <span class="tok tok-ctx">context (mask 0)</span>{" "}
        <span class="tok tok-train" style={{ backgroundColor: "rgba(220, 50, 47, 0.85)" }}>
          low logprob
        </span>
      </p>
      {traces.map((t, i) => (
        <TraceTokens key={i} index={i} trace={t} text={tokens.data?.traces[i] ?? null} />
      ))}
    </>
  );
}
