/**
 * The batch list's filters (status, queue, harness, how recent), kept in the route so a filtered
 * list survives a reload, and the link that compares the two picked batches.
 *
 * @module
 */
import { hrefOf } from "../routes";

function go(filters: Record<string, string>, name: string, value: string) {
  const next = { ...filters, [name]: value };
  if (!value) delete next[name];
  location.hash = hrefOf({ view: "batches", filters: next });
}

/**
 * The filter form above the batch list.
 *
 * @example
 * ```tsx
 * <BatchFilters filters={{ status: "running" }} picked={["b1", "b2"]} />
 * ```
 */
export function BatchFilters({ filters, picked }: { filters: Record<string, string>; picked: string[] }) {
  const set = (name: string) => (e: { currentTarget: { value: string } }) =>
    go(filters, name, e.currentTarget.value);
  return (
    <form class="filters" onSubmit={(e) => e.preventDefault()}>
      <label>
        status{" "}
        <select value={filters.status ?? ""} onChange={set("status")}>
          <option value="">any</option>
          <option value="running">running</option>
          <option value="completed">completed</option>
        </select>
      </label>
      <label>
        queue <input value={filters.queue ?? ""} onChange={set("queue")} />
      </label>
      <label>
        harness <input value={filters.harness ?? ""} onChange={set("harness")} />
      </label>
      <label>
        last{" "}
        <select value={filters.since ?? ""} onChange={set("since")}>
          <option value="">any time</option>
          <option value="1">1 h</option>
          <option value="24">24 h</option>
          <option value="168">7 days</option>
        </select>
      </label>
      {picked.length === 2 ? (
        <a class="button" href={hrefOf({ view: "compare", a: picked[0]!, b: picked[1]! })}>
          Compare the two
        </a>
      ) : (
        <span class="muted">tick two batches to compare them</span>
      )}
    </form>
  );
}
