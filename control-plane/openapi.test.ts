import { describe, expect, it } from "vitest";
import snapshot from "../clients/typescript/openapi.json";
import { call } from "./testing/fixtures";

type Operations = Record<string, Record<string, { operationId?: string }>>;

async function served(): Promise<{ paths: Operations; servers: Array<{ url: string }> }> {
  const res = await call("/openapi.json");
  expect(res.status).toBe(200);
  return (await res.json()) as { paths: Operations; servers: Array<{ url: string }> };
}

describe("GET /openapi.json as a contract", () => {
  it("names every operation with a unique operationId", async () => {
    const ops = Object.entries((await served()).paths).flatMap(([route, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ at: `${method} ${route}`, id: op.operationId })),
    );
    expect(ops.length).toBeGreaterThan(30);
    expect(ops.filter((o) => !o.id).map((o) => o.at)).toEqual([]);
    expect(new Set(ops.map((o) => o.id)).size).toBe(ops.length);
    expect(ops.find((o) => o.at === "get /v1/batches/{id}")?.id).toBe("getBatch");
  });

  it("lists the local and the deployed server", async () => {
    expect((await served()).servers.map((s) => s.url)).toEqual([
      "http://127.0.0.1:8787",
      "https://{worker}.{subdomain}.workers.dev",
    ]);
  });

  it("is the document checked in for generated clients (else: npm run gen:api)", async () => {
    // clients/typescript/openapi.json feeds the generated types and the linter; a route added or
    // changed without regenerating fails here.
    expect(await served()).toEqual(snapshot);
  });
});
