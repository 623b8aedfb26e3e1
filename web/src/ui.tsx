/**
 * Small presentational pieces shared by the views.
 *
 * @module
 */
import type { ComponentChildren } from "preact";
import { ApiMissing } from "./api";
import type { LiveState } from "./live";

/**
 * An error box; an {@link ApiMissing} says which API this control plane lacks.
 *
 * @example
 * ```tsx
 * <ErrorNote error={err} what="session logs" />
 * ```
 */
export function ErrorNote({ error, what }: { error: Error; what: string }) {
  if (error instanceof ApiMissing)
    return (
      <p class="missing" data-missing={error.path}>
        {what}: not available from this control plane ({error.message}).
      </p>
    );
  return (
    <p class="error" role="alert">
      {what}: {error.message}
    </p>
  );
}

/**
 * The "live" badge of a view: whether its event stream is open.
 *
 * @example
 * ```tsx
 * <LiveBadge state={{ kind: "open" }} />
 * ```
 */
export function LiveBadge({ state, what }: { state: LiveState; what: string }) {
  const text: Record<LiveState["kind"], string> = {
    connecting: "connecting…",
    open: "live",
    retrying: "reconnecting…",
    missing: "no live updates (this control plane has no event stream)",
    expired: "reloading…",
    ended: "finished",
    failed: "live updates refused",
  };
  const detail = state.kind === "retrying" || state.kind === "failed" ? `: ${state.error}` : "";
  return (
    <span class={`live live-${state.kind}`} data-live={state.kind} title={`${what}${detail}`}>
      {text[state.kind]}
    </span>
  );
}

/**
 * A progress bar of `done` out of `total`.
 *
 * @example
 * ```tsx
 * <Progress done={3} total={4} />
 * ```
 */
export function Progress({ done, total }: { done: number; total: number }) {
  const pct = total > 0 ? Math.round((100 * done) / total) : 0;
  return (
    <span class="progress" title={`${done} / ${total}`}>
      <span class="progress-bar" style={{ width: `${pct}%` }} />
      <span class="progress-text">
        {done}/{total}
      </span>
    </span>
  );
}

/**
 * A session or batch status as a coloured tag.
 *
 * @example
 * ```tsx
 * <Status status="COMPLETED" />
 * ```
 */
export function Status({ status }: { status: string }) {
  return <span class={`status status-${status.toLowerCase()}`}>{status}</span>;
}

/**
 * Counts as `key: n` tags (statuses, errors by kind).
 *
 * @example
 * ```tsx
 * <Counts counts={{ COMPLETED: 3 }} />
 * ```
 */
export function Counts({
  counts,
  empty = "none",
}: {
  /** A status or kind the API leaves out counts as none. */
  counts: Record<string, number | undefined>;
  empty?: string;
}) {
  const entries = Object.entries(counts).filter((e): e is [string, number] => (e[1] ?? 0) > 0);
  if (entries.length === 0) return <span class="muted">{empty}</span>;
  return (
    <span class="counts">
      {entries.map(([k, n]) => (
        <span key={k} class="count">
          {k}: {n}
        </span>
      ))}
    </span>
  );
}

/** A titled section of a view. */
export function Section({
  title,
  children,
  id,
}: {
  title: string;
  children: ComponentChildren;
  id?: string;
}) {
  return (
    <section class="card" {...(id ? { id } : {})}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}

/**
 * A table's header row; an empty name is a column without a heading (a checkbox, a button).
 *
 * @example
 * ```tsx
 * <TableHead columns={["", "task", "progress"]} />
 * ```
 */
export function TableHead({ columns }: { columns: string[] }) {
  return (
    <thead>
      <tr>
        {columns.map((c, i) => (
          // Columns never move, and two may be unnamed: the position is the key.
          <th key={i}>{c || null}</th>
        ))}
      </tr>
    </thead>
  );
}

/**
 * The checkbox that picks a row to compare (see `usePickTwo`).
 *
 * @example
 * ```tsx
 * <PickBox id="b1" picked={picked} toggle={toggle} />
 * ```
 */
export function PickBox({
  id,
  picked,
  toggle,
}: {
  id: string;
  picked: string[];
  toggle: (id: string, on: boolean) => void;
}) {
  return (
    <input
      type="checkbox"
      aria-label={`compare ${id}`}
      checked={picked.includes(id)}
      onChange={(e) => toggle(id, e.currentTarget.checked)}
    />
  );
}

/**
 * The outcome of the view's last action, when there is one.
 *
 * @example
 * ```tsx
 * <Note text="Drain node-0: done" />
 * ```
 */
export function Note({ text }: { text: string | null }) {
  return text ? (
    <p class="note" data-note>
      {text}
    </p>
  ) : null;
}
