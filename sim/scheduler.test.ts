/**
 * The simulated GPU's waiting queue by priority and its preemption, on the scheduler itself: the
 * order requests are admitted in (by completion order behind one slot), when a running request is
 * preempted and what it keeps, aborts of waiting and preempted requests, and the counters. Event
 * order and counters only: no assertion on elapsed time.
 */
import { afterEach, describe, expect, it } from "vitest";
import { GpuScheduler, type PrioritySchedulingOptions, type ScheduleJob } from "./scheduler";

const gpus: GpuScheduler[] = [];
afterEach(() => {
  for (const g of gpus.splice(0)) g.abort();
});

function gpu(priority?: PrioritySchedulingOptions, slots = 1): GpuScheduler {
  const g = new GpuScheduler({
    maxRunningRequests: slots,
    decodeTokensPerSecond: 1000,
    ...(priority ? { priority } : {}),
  });
  gpus.push(g);
  return g;
}

/** A job of one token, or `outputTokens` of them. */
function job(
  rid: string,
  priority?: number,
  outputTokens = 1,
  extra: Partial<ScheduleJob> = {},
): ScheduleJob {
  return {
    rid,
    uncachedPromptTokens: 10,
    outputTokens,
    ...(priority !== undefined ? { priority } : {}),
    ...extra,
  };
}

/** A job that runs until aborted; resolves `started` once it has decoded a first token. */
function blocker(rid: string, priority?: number) {
  let onFirst: () => void = () => {};
  const started = new Promise<void>((r) => {
    onFirst = r;
  });
  let produced = 0;
  const spec = job(rid, priority, 1_000_000, {
    onProgress: (n) => {
      produced = n;
      onFirst();
    },
  });
  return { spec, started, produced: () => produced };
}

/** Runs jobs in order of submission and gives the order they finished in. */
async function finishOrder(g: GpuScheduler, jobs: ScheduleJob[]): Promise<string[]> {
  const order: string[] = [];
  const runs = jobs.map((j) => g.run(j).then(() => order.push(j.rid)));
  expect(g.stats().waiting).toBe(jobs.length);
  g.abort("blocker");
  await Promise.all(runs);
  return order;
}

/** Waits until `check` holds, checking after each timer turn (no fixed sleep). */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe("GpuScheduler: the waiting queue by priority", () => {
  it("admits higher values first by default, lower first with lowValuesFirst, FIFO when off", async () => {
    for (const [priority, expected] of [
      [{ enabled: true }, ["p5", "p3", "p1"]],
      [{ enabled: true, lowValuesFirst: true }, ["p1", "p3", "p5"]],
      [undefined, ["p1", "p5", "p3"]],
    ] as const) {
      const g = gpu(priority);
      const b = blocker("blocker", 0);
      const running = g.run(b.spec);
      const order = await finishOrder(g, [job("p1", 1), job("p5", 5), job("p3", 3)]);
      expect(order, JSON.stringify(priority)).toEqual(expected);
      expect((await running).abortMessage).toMatch(/abort/i);
    }
  });

  it("keeps arrival order among equal priorities, and puts requests without one last", async () => {
    const g = gpu({ enabled: true });
    const b = blocker("blocker", 0);
    const running = g.run(b.spec);
    const order = await finishOrder(g, [job("none"), job("a", 2), job("b", 2), job("c", 2), job("top", 9)]);
    expect(order).toEqual(["top", "a", "b", "c", "none"]);
    await running;
  });

  it("gives requests without a priority the default priority when one is set", async () => {
    const g = gpu({ enabled: true, defaultPriority: 4 });
    const b = blocker("blocker", 100);
    const running = g.run(b.spec);
    const order = await finishOrder(g, [job("p3", 3), job("none"), job("p5", 5)]);
    expect(order).toEqual(["p5", "none", "p3"]);
    await running;
  });

  it("an aborted waiting request leaves the queue and the others keep their order", async () => {
    const g = gpu({ enabled: true });
    const b = blocker("blocker", 0);
    const running = g.run(b.spec);
    const order: string[] = [];
    const runs = [job("p1", 1), job("p2", 2), job("p3", 3)].map((j) =>
      g.run(j).then((o) => order.push(o.abortMessage ? `${j.rid} aborted` : j.rid)),
    );
    expect(g.abort("p2")).toBe(1);
    await until(() => order.length === 1);
    expect(g.stats().waiting).toBe(2);
    g.abort("blocker");
    await Promise.all(runs);
    expect(order).toEqual(["p2 aborted", "p3", "p1"]);
    await running;
  });
});

describe("GpuScheduler: preemption", () => {
  it("preempts only past the threshold; the preempted request keeps its tokens and prefills again", async () => {
    const g = gpu({ enabled: true, preemption: true, preemptionThreshold: 10 });
    const events: string[] = [];
    const victimRun = g.run(
      job("victim", 0, 200, { onProgress: (n) => events.push(`victim ${n}`), uncachedPromptTokens: 30 }),
    );
    await until(() => events.length > 0);
    // Better by exactly the threshold: it waits; so does a peer of the victim's priority.
    const equal = g.run(job("by10", 10, 1, { onProgress: () => events.push("by10") }));
    const peer = g.run(job("peer", 0, 1, { onProgress: () => events.push("peer") }));
    expect(g.stats()).toMatchObject({ running: 1, waiting: 2, preempted_total: 0 });
    // Better by more: it takes the victim's slot at once.
    const high = g.run(job("by11", 11, 40, { onProgress: (n) => events.push(`by11 ${n}`) }));
    expect(g.stats()).toMatchObject({ running: 1, preempted_total: 1 });
    await until(() => g.stats().waiting === 3); // the victim is back in the queue, holding no slot
    expect(g.stats().running).toBe(1);
    const [victim, , , top] = await Promise.all([victimRun, equal, peer, high]);
    expect(victim).toEqual({ produced: 200 });
    expect(top).toEqual({ produced: 40 });
    // by11 ran to its end before the victim decoded again, then by10, then the peer (the victim
    // re-entered the queue after it, as a preempted SGLang request does), then the victim resumed
    // where it had stopped.
    const firstHigh = events.indexOf("by11 20");
    const atPreemption = Number(events[firstHigh - 1]!.split(" ")[1]);
    expect(events.slice(firstHigh, firstHigh + 4)).toEqual(["by11 20", "by11 40", "by10", "peer"]);
    const resumed = events.slice(firstHigh + 4).map((e) => Number(e.split(" ")[1]));
    expect(resumed[0]).toBeGreaterThan(atPreemption);
    expect(resumed.at(-1)).toBe(200);
    const stats = g.stats();
    expect(stats).toMatchObject({
      running: 0,
      waiting: 0,
      finished_total: 4,
      preempted_total: 1,
      // The victim's uncached prompt and the tokens it had decoded, prefilled again.
      reprefill_tokens_total: 30 + atPreemption,
      generation_tokens_total: 242,
    });
    // One slot: never two running, not even while the slot changed hands.
    expect(stats.running_request_seconds).toBeLessThanOrEqual(stats.busy_seconds + 1e-9);
  });

  it("preempts the worst running request, the latest to enter the queue among equals", async () => {
    const g = gpu({ enabled: true, preemption: true, preemptionThreshold: 0 }, 3);
    const runs = [blocker("a", 1), blocker("b", 1), blocker("c", 5)];
    const outcomes = runs.map((r) => g.run(r.spec));
    await Promise.all(runs.map((r) => r.started));
    const high = blocker("high", 9);
    const highRun = g.run(high.spec);
    await until(() => g.stats().waiting === 1);
    const frozen = runs.map((r) => r.produced());
    await until(() => high.produced() >= 100);
    // b (priority 1, entered after a) stopped; a and c went on.
    const moved = runs.map((r, i) => r.produced() > frozen[i]!);
    expect(moved).toEqual([true, false, true]);
    g.abort();
    await Promise.all([...outcomes, highRun]);
  });

  it("never preempts with preemption off, and requests of the worst priority never preempt each other", async () => {
    for (const priority of [
      { enabled: true, preemption: false },
      { enabled: true, preemption: true, preemptionThreshold: 10 },
    ]) {
      const g = gpu(priority);
      const b = blocker("blocker", priority.preemption ? undefined : -1000);
      const running = g.run(b.spec);
      await b.started;
      const waiting = g.run(job("w", priority.preemption ? undefined : 1000));
      expect(g.stats()).toMatchObject({ running: 1, waiting: 1, preempted_total: 0 });
      g.abort("blocker");
      await Promise.all([running, waiting]);
      expect(g.stats().preempted_total).toBe(0);
    }
  });

  it("with low values first, a lower value preempts", async () => {
    const g = gpu({ enabled: true, lowValuesFirst: true, preemption: true, preemptionThreshold: 10 });
    const b = blocker("blocker", 20);
    const running = g.run(b.spec);
    await b.started;
    const near = g.run(job("p10", 10));
    expect(g.stats().preempted_total).toBe(0);
    const far = g.run(job("p9", 9));
    expect(g.stats().preempted_total).toBe(1);
    await Promise.all([near, far]);
    g.abort("blocker");
    await running;
  });

  it("a request without a priority is preempted by any request with one (the worst priority there is)", async () => {
    const g = gpu({ enabled: true, preemption: true, preemptionThreshold: 10 });
    const b = blocker("blocker");
    const running = g.run(b.spec);
    await b.started;
    await g.run(job("low", -1_000_000));
    expect(g.stats().preempted_total).toBe(1);
    g.abort("blocker");
    await running;
  });

  it("an aborted preempted request returns the tokens it decoded and leaves the queue", async () => {
    const g = gpu({ enabled: true, preemption: true, preemptionThreshold: 0 });
    const victim = blocker("victim", 0);
    const victimRun = g.run(victim.spec);
    await until(() => victim.produced() >= 20);
    const high = blocker("high", 5);
    const highRun = g.run(high.spec);
    await until(() => g.stats().waiting === 1);
    const decoded = victim.produced();
    expect(g.abort("victim")).toBe(1);
    const outcome = await victimRun;
    expect(outcome.produced).toBe(decoded);
    expect(outcome.abortMessage).toMatch(/abort/i);
    expect(g.stats()).toMatchObject({ running: 1, waiting: 0, aborted_total: 1, preempted_total: 1 });
    g.abort("high");
    await highRun;
    expect(g.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("a preempted health probe finishes and stays out of the counters", async () => {
    const g = gpu({ enabled: true, preemption: true, preemptionThreshold: 10 });
    const probe = g.run(job("HEALTH_CHECK_1", undefined, 50, { probe: true }));
    const client = await g.run(job("client", 0, 50));
    expect(client).toEqual({ produced: 50 });
    expect(await probe).toEqual({ produced: 50 });
    expect(g.stats()).toMatchObject({ preempted_total: 0, reprefill_tokens_total: 0, finished_total: 1 });
  });
});
