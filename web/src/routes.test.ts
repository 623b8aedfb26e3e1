import { describe, expect, it } from "vitest";
import { takeTokenFromHash } from "./auth";
import { hrefOf, parseRoute, type Route } from "./routes";

describe("hash routes", () => {
  it("parses every view and round-trips through hrefOf", () => {
    const routes: Route[] = [
      { view: "fleet" },
      { view: "batches", filters: { status: "running", queue: "gpu a" } },
      { view: "batch", batchId: "b1" },
      { view: "task", batchId: "b1", taskId: "t/1" },
      { view: "session", sessionId: "b1.t1.0" },
      { view: "compare", a: "b1", b: "b2" },
    ];
    for (const r of routes) expect(parseRoute(hrefOf(r))).toEqual(r);
    expect(parseRoute("")).toEqual({ view: "fleet" });
    expect(parseRoute("#/nope/x")).toEqual({ view: "unknown", path: "/nope/x" });
  });
});

describe("#token= sign-in", () => {
  it.each([
    ["#token=abc", "abc", "#/"],
    ["#/batches/b1&token=a%2Fb", "a/b", "#/batches/b1"],
    ["#/batches?token=abc&status=running", "abc", "#/batches?status=running"],
    ["#/batches?status=running&token=abc", "abc", "#/batches?status=running"],
  ])("takes the token out of %s", (hash, token, rest) => {
    expect(takeTokenFromHash(hash)).toEqual({ token, rest });
  });

  it("leaves other fragments alone", () => {
    expect(takeTokenFromHash("#/sessions/x")).toEqual({ token: null, rest: "#/sessions/x" });
  });
});
