/**
 * A batch as its views see it: its status (`GET /v1/batches/:id`) and its results, followed live
 * from the results stream (`GET /v1/batches/:id/results`, SSE, resumed by sequence number). The
 * status is read again whenever the state-event stream or the results stream says something
 * changed, never on a timer.
 *
 * @module
 */
import { useRef, useState } from "preact/hooks";
import { type Api, seg } from "./api";
import { type Resource, useResource, useStream } from "./hooks";
import type { LiveState } from "./live";
import type { ResultLike } from "./stats";
import type { BatchStatus } from "./views/batches";

/** A result as the results stream carries it (the fields the views read, plus the trajectory's size). */
export interface StreamedResult extends ResultLike {
  trajectory?: { traces?: Array<{ response_ids?: unknown[] }> };
}

/** What {@link useBatch} returns. */
export interface BatchData {
  status: Resource<BatchStatus>;
  results: StreamedResult[];
  resultsLive: LiveState;
  eventsLive: LiveState;
  /** Live session states from the event stream (status, stage, node), by session id. */
  sessions: Record<string, { status: string; stage: string | null; node_id: string | null; task_id: string }>;
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
  const status = useResource(() => api.get<BatchStatus>(`/v1/batches/${seg(batchId)}`), [batchId]);
  const [results, setResults] = useState<StreamedResult[]>([]);
  const [sessions, setSessions] = useState<BatchData["sessions"]>({});
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  const refresh = () => {
    if (pending.current) return;
    pending.current = setTimeout(() => {
      pending.current = null;
      status.reload();
    }, 250);
  };
  const resultsLive = useStream(
    {
      path: `/v1/batches/${seg(batchId)}/results`,
      token: api.token,
      endEvent: "done",
      onEvent: (e) => {
        if (e.event !== "result") return;
        const { result: r } = JSON.parse(e.data) as { seq: number; result: StreamedResult };
        setResults((rs) => (rs.some((x) => x.session_id === r.session_id) ? rs : [...rs, r]));
        refresh();
      },
    },
    [batchId, api.token],
  );
  const eventsLive = useStream(
    {
      path: `/v1/events?batch_id=${seg(batchId)}&kinds=batch,session`,
      token: api.token,
      onEvent: (e) => {
        if (e.event === "session") {
          const s = JSON.parse(e.data) as { session_id: string } & BatchData["sessions"][string];
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
