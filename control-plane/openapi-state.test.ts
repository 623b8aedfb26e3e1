import { describe, expect, it } from "vitest";
import { call } from "./testing/fixtures";

interface Operation {
  operationId?: string;
  parameters?: { name: string; in: string }[];
}

describe("OpenAPI entries of the state queries and events", () => {
  it("documents /v1/events, sessions and summary with operation ids, and the list filters", async () => {
    const doc = (await (await call("/openapi.json")).json()) as {
      paths: Record<string, Record<string, Operation>>;
    };
    const ids = {
      "/v1/events": "listEvents",
      "/v1/batches/{id}/sessions": "listBatchSessions",
      "/v1/batches/{id}/summary": "getBatchSummary",
    };
    for (const [route, id] of Object.entries(ids)) expect(doc.paths[route]?.get?.operationId, route).toBe(id);
    const names = (op: Operation | undefined) => (op?.parameters ?? []).map((p) => p.name);
    expect(names(doc.paths["/v1/events"]!.get)).toEqual(
      expect.arrayContaining(["after", "limit", "batch_id", "kinds", "stream"]),
    );
    expect(names(doc.paths["/v1/batches/{id}/sessions"]!.get)).toEqual(
      expect.arrayContaining(["id", "task_id", "status", "node_id", "limit", "after"]),
    );
    expect(names(doc.paths["/v1/batches"]!.get)).toEqual(
      expect.arrayContaining(["limit", "before", "status", "queue", "harness", "since"]),
    );
  });
});
