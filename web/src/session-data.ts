/**
 * A session as its view sees it: its state (`GET /v1/sessions/:id`), and once it has finished its
 * logs and token text (each `null` when the session has none), and its completion records when it
 * says it has some.
 *
 * @module
 */
import type { Api } from "./api";
import type { CompletionRecord, LogStream, SessionBody, TokenText } from "./api-types";
import { type Resource, useResource } from "./hooks";
import { getSession, getSessionCompletions, getSessionLogs, getSessionTokens } from "./requests";

/** What {@link useSessionParts} returns. */
export interface SessionParts {
  session: Resource<SessionBody>;
  /** Whether the session has its result (its logs and token text are read again then). */
  finished: boolean;
  logs: Resource<{ streams: LogStream[] } | null>;
  tokens: Resource<TokenText | null>;
  /** `null` while the session has no completion records. */
  completions: Resource<CompletionRecord[] | null>;
}

/**
 * Loads every part of a session's page.
 *
 * @example
 * ```ts
 * const { session, logs, tokens, completions } = useSessionParts(api, "b1.t1.0");
 * ```
 */
export function useSessionParts(api: Api, sessionId: string): SessionParts {
  const session = useResource(() => getSession(api, sessionId), [sessionId]);
  const finished = session.data?.result !== null && session.data?.result !== undefined;
  const logs = useResource(() => getSessionLogs(api, sessionId), [sessionId, finished]);
  const tokens = useResource(() => getSessionTokens(api, sessionId), [sessionId, finished]);
  const hasCompletions = session.data?.has_completions;
  const completions = useResource(
    async () => (hasCompletions ? await getSessionCompletions(api, sessionId) : null),
    [sessionId, hasCompletions],
  );
  return { session, finished, logs, tokens, completions };
}
