import { describe, expect, it } from "vitest";
import { parseWorkerList, routerAffinity, splitDpRank } from "./router";

describe("router worker listing", () => {
  it("reads a DP-aware `url@rank` entry as its base URL and rank, not as a user name", () => {
    expect(splitDpRank("http://10.0.0.5:30000@3")).toEqual({ url: "http://10.0.0.5:30000", dpRank: 3 });
    expect(splitDpRank("http://[::1]:8000/@0")).toEqual({ url: "http://[::1]:8000", dpRank: 0 });
    expect(splitDpRank("http://w1:8000/")).toEqual({ url: "http://w1:8000", dpRank: null });
    // A real user name is left alone (only a trailing `@digits` is a rank).
    expect(splitDpRank("http://user@w1:8000")).toEqual({ url: "http://user@w1:8000", dpRank: null });
  });

  it("keeps HTTP workers, drops gRPC/zmq ones, and gives up on a prefill/decode split", () => {
    const body = {
      workers: [
        { url: "http://w1:8000@0", worker_type: "regular", connection_mode: "HTTP" },
        { url: "http://w1:8000@1", worker_type: "regular", connection_mode: "http" },
        { url: "grpc://w2:9000", worker_type: "regular", connection_mode: "gRPC(port:9000)" },
        { url: "http://w3:9000", worker_type: "regular", connection_mode: "grpc" },
        { url: "http://w4:8000", worker_type: "regular" },
      ],
      total: 5,
    };
    expect(parseWorkerList(body)).toEqual([
      { url: "http://w1:8000", dpRank: 0 },
      { url: "http://w1:8000", dpRank: 1 },
      { url: "http://w4:8000", dpRank: null },
    ]);
    expect(parseWorkerList({ workers: [{ url: "grpc://w2:9000", connection_mode: "gRPC" }] })).toBeNull();
    expect(
      parseWorkerList({ workers: [{ url: "http://p:1", worker_type: "prefill" }, { url: "http://d:1" }] }),
    ).toBeNull();
    expect(parseWorkerList({ urls: ["http://old:1/"] })).toEqual([{ url: "http://old:1", dpRank: null }]);
  });

  it("says which policies keep a session on one worker through X-SMG-Routing-Key", () => {
    expect(routerAffinity("consistent_hashing").honoured).toBe(true);
    expect(routerAffinity("manual").honoured).toBe(true);
    const unknown = routerAffinity("unknown");
    expect(unknown.honoured).toBe(false);
    expect(unknown.message).toMatch(/cache_aware.*ignored.*--policy consistent_hashing/);
    expect(routerAffinity("round_robin").honoured).toBe(false);
  });
});
