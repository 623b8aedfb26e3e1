import { describe, expect, it } from "vitest";
import { connectUrl } from "./connection";

describe("connectUrl", () => {
  it("maps http→ws and https→wss, keeps a path prefix, encodes the queue", () => {
    expect(connectUrl("http://127.0.0.1:8787", "default")).toBe(
      "ws://127.0.0.1:8787/v1/gateways/connect?queue=default",
    );
    expect(connectUrl("https://polar.example/api/", "q 1")).toBe(
      "wss://polar.example/api/v1/gateways/connect?queue=q%201",
    );
    expect(connectUrl("http://127.0.0.1:8787", "default", "gpu/0")).toBe(
      "ws://127.0.0.1:8787/v1/gateways/connect?queue=default&node_id=gpu%2F0",
    );
  });

  it("refuses non-http URLs naming the option", () => {
    expect(() => connectUrl("ftp://x", "q")).toThrow(/controlPlaneUrl/);
  });
});
