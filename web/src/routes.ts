/**
 * Hash routes of the dashboard (`#/batches/ID`): the server only ever serves `/`, so no SPA
 * fallback is needed, and a route survives a reload.
 *
 * @module
 */

/** A parsed dashboard location. */
export type Route =
  | { view: "fleet" }
  | { view: "batches"; filters: Record<string, string> }
  | { view: "batch"; batchId: string }
  | { view: "task"; batchId: string; taskId: string }
  | { view: "session"; sessionId: string }
  | { view: "compare"; a: string; b: string }
  | { view: "unknown"; path: string };

/**
 * Parses a location hash (`#/batches/b1/tasks/t1`, `#/batches?status=running`).
 *
 * @example
 * ```ts
 * parseRoute("#/batches/b1"); // { view: "batch", batchId: "b1" }
 * ```
 */
export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, "");
  const [pathPart = "", queryPart = ""] = raw.split("?", 2);
  const parts = pathPart
    .split("/")
    .filter((p) => p !== "")
    .map((p) => decodeURIComponent(p));
  const query = Object.fromEntries(new URLSearchParams(queryPart));
  const [head, id, sub, subId] = parts;
  if (parts.length === 0 || (head === "fleet" && parts.length === 1)) return { view: "fleet" };
  if (head === "batches" && parts.length === 1) return { view: "batches", filters: query };
  if (head === "batches" && id && parts.length === 2) return { view: "batch", batchId: id };
  if (head === "batches" && id && sub === "tasks" && subId && parts.length === 4)
    return { view: "task", batchId: id, taskId: subId };
  if (head === "sessions" && id && parts.length === 2) return { view: "session", sessionId: id };
  if (head === "compare" && parts.length === 1)
    return { view: "compare", a: query.a ?? "", b: query.b ?? "" };
  return { view: "unknown", path: pathPart };
}

/**
 * The hash of a route, inverse of {@link parseRoute}.
 *
 * @example
 * ```ts
 * hrefOf({ view: "task", batchId: "b1", taskId: "t 1" }); // "#/batches/b1/tasks/t%201"
 * ```
 */
export function hrefOf(route: Route): string {
  const e = encodeURIComponent;
  switch (route.view) {
    case "fleet":
      return "#/";
    case "batches": {
      const q = new URLSearchParams(route.filters).toString();
      return q ? `#/batches?${q}` : "#/batches";
    }
    case "batch":
      return `#/batches/${e(route.batchId)}`;
    case "task":
      return `#/batches/${e(route.batchId)}/tasks/${e(route.taskId)}`;
    case "session":
      return `#/sessions/${e(route.sessionId)}`;
    case "compare":
      return `#/compare?${new URLSearchParams({ a: route.a, b: route.b }).toString()}`;
    case "unknown":
      return `#${route.path}`;
  }
}
