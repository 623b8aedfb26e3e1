/**
 * A batch as its views see it: its status (`GET /v1/batches/:id`) and its results, followed live
 * from the results stream (`GET /v1/batches/:id/results`, SSE, resumed by sequence number). The
 * status is read again whenever the state-event stream or the results stream says something
 * changed, never on a timer.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { Api } from "./api";
import type { BatchStatus, SessionEventData, SessionResult } from "./api-types";
import { type Resource, useCoalesced, useResource, useStream } from "./hooks";
import type { LiveState } from "./live";
import { getBatch } from "./requests";
import { eventsPath, resultOf, resultsPath, sessionEventOf } from "./streams";

/** A session's live state from the event stream. */
export type LiveSession = Omit<SessionEventData, "session_id">;

/** What {@link useBatch} returns. */
export interface BatchData {
  status: Resource<BatchStatus>;
  results: SessionResult[];
  resultsLive: LiveState;
  eventsLive: LiveState;
  /** Live session states from the event stream (status, stage, node), by session id. */
  sessions: Record<string, LiveSession>;
}

/**
 * Loads a batch and follows it.
 *
 * @example
 * ```ts
 * const { status, results } = useBatch(api, "b1");
 * ```
 */
export function useBatch(api: Api, batchId: string): BatchData {
  const status = useResource(() => getBatch(api, batchId), [batchId]);
  const [results, setResults] = useState<SessionResult[]>([]);
  const [sessions, setSessions] = useState<BatchData["sessions"]>({});
  const refresh = useCoalesced(status.reload, 250);
  const resultsLive = useStream(
    {
      path: resultsPath(batchId),
      token: api.token,
      endEvent: "done",
      onEvent: (e) => {
        if (e.event !== "result") return;
        const r = resultOf(e);
        setResults((rs) => (rs.some((x) => x.session_id === r.session_id) ? rs : [...rs, r]));
        refresh();
      },
    },
    [batchId, api.token],
  );
  const eventsLive = useStream(
    {
      path: eventsPath({ batch_id: batchId, kinds: "batch,session" }),
      token: api.token,
      onEvent: (e) => {
        if (e.event === "session") {
          const s = sessionEventOf(e);
          setSessions((m) => ({
            ...m,
            [s.session_id]: { status: s.status, stage: s.stage, node_id: s.node_id, task_id: s.task_id },
          }));
        }
        refresh();
      },
    },
    [batchId, api.token],
  );
  return { status, results, resultsLive, eventsLive, sessions };
}
