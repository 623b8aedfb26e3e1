import { afterEach, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "./server";

let sims: SimEngineHandle[] = [];
afterEach(async () => {
  await Promise.all(sims.map((s) => s.close()));
  sims = [];
});

async function start(opts: Parameters<typeof startSimEngine>[0]): Promise<SimEngineHandle> {
  const s = await startSimEngine(opts);
  sims.push(s);
  return s;
}

/** Starts a generation that takes the only running slot; resolves once it runs. */
async function saturate(url: string): Promise<{ done: Promise<unknown> }> {
  const done = fetch(`${url}/generate`, {
    method: "POST",
    body: JSON.stringify({ text: "hi", sampling_params: { max_new_tokens: 40 } }),
  }).then((r) => r.json());
  for (;;) {
    const stats = (await (await fetch(`${url}/sim/stats`)).json()) as { running: number };
    if (stats.running > 0) return { done };
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("/health like SGLang's (a one-token generation through the queue)", () => {
  it("answers only once the running request ahead of it lets its generation through", async () => {
    const sim = await start({ maxRunningRequests: 1, decodeTokensPerSecond: 40 });
    const { done: ahead } = await saturate(sim.url);
    const t0 = Date.now();
    const health = await fetch(`${sim.url}/health`);
    expect(health.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThan(500);
    await ahead;
    // Not counted as a request, as SGLang sends it with log_metrics=False.
    const stats = (await (await fetch(`${sim.url}/sim/stats`)).json()) as {
      requests_total: number;
      finished_total: number;
      generation_tokens_total: number;
    };
    expect(stats.requests_total).toBe(1);
    // Nor as a finished call: a client waiting for finished_total to move waits for its own call.
    expect(stats.finished_total).toBe(1);
    expect(stats.generation_tokens_total).toBe(40);
  });

  it("lists the rids of finished requests, not of health checks, so a client sharing the engine finds its own call", async () => {
    const sim = await start({});
    const generate = (rid: string) =>
      fetch(`${sim.url}/generate`, {
        method: "POST",
        body: JSON.stringify({ text: "hi", rid, sampling_params: { max_new_tokens: 4 } }),
      }).then((r) => r.json());
    await generate("sess-a-t1-0001");
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    await generate("sess-b-t1-0002");
    const stats = (await (await fetch(`${sim.url}/sim/stats`)).json()) as { recent_finished_rids: string[] };
    expect(stats.recent_finished_rids).toEqual(["sess-a-t1-0001", "sess-b-t1-0002"]);
  });

  it("answers 503 when its generation does not finish within the health-check timeout", async () => {
    const sim = await start({ maxRunningRequests: 1, decodeTokensPerSecond: 40, healthCheckTimeoutMs: 100 });
    const { done: ahead } = await saturate(sim.url);
    expect((await fetch(`${sim.url}/health_generate`)).status).toBe(503);
    await ahead;
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  });

  it("is not stalled by injected faults: an engine whose every request stalls still answers at once", async () => {
    const sim = await start({ faults: { stallRate: 1, stallMs: 30_000 } });
    const health = await fetch(`${sim.url}/health`, { signal: AbortSignal.timeout(5_000) });
    expect(health.status).toBe(200);
    const stats = (await (await fetch(`${sim.url}/sim/stats`)).json()) as { faults: { stalls: number } };
    expect(stats.faults.stalls).toBe(0);
  });
});
