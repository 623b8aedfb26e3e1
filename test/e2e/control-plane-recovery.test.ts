/**
 * The control plane's durability against a real `wrangler dev --persist-to` (Worker + Durable
 * Objects in workerd), driven by in-process wire gateways: a SIGKILL of the control plane in the
 * middle of a batch, a gateway whose socket drops, a result delivered twice.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlPlaneClient } from "../../cli/client";
import type { RoleTokens } from "../../cli/dev-tokens";
import { type ControlPlaneDev, startControlPlaneDev } from "../../cli/wrangler-dev";
import type { ResultsPage } from "../../protocol";
import { WireGateway } from "../support/wire-gateway";

const tokens: RoleTokens = { trainer: "e2e-trainer", gateway: "e2e-gateway", admin: "e2e-admin" };
/** Short grace periods so the lost-gateway path runs in seconds. */
const vars = { POLAR_LEASE_GRACE_SECONDS: "2" };

let dir: string;
let cp: ControlPlaneDev;
const gateways: WireGateway[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "polar-cp-e2e-"));
  cp = await startControlPlaneDev({ persistTo: dir, tokens, vars });
});

afterAll(async () => {
  for (const gw of gateways) await gw.close();
  await cp?.kill();
  rmSync(dir, { recursive: true, force: true });
});

function client() {
  return new ControlPlaneClient(cp.url, tokens.trainer);
}

async function gateway(
  nodeId: string,
  slots: number,
  extra: Partial<Parameters<typeof WireGateway.start>[0]> = {},
) {
  const gw = await WireGateway.start({ url: cp.url, token: tokens.gateway, nodeId, slots, ...extra });
  gateways.push(gw);
  return gw;
}

async function allResults(batchId: string): Promise<ResultsPage["results"]> {
  const out: ResultsPage["results"] = [];
  let after = 0;
  for (;;) {
    const page = await client().results(batchId, after);
    out.push(...page.results);
    after = page.next;
    if (page.results.length === 0) return out;
  }
}

async function waitDone(batchId: string, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await client().status(batchId);
    if (status.status === "completed") return status;
    if (Date.now() > deadline) throw new Error(`batch ${batchId} not done: ${JSON.stringify(status.counts)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const shell = { harness: "shell" as const, custom_shell: { command: "true" } };

describe("control plane durability (wrangler dev --persist-to)", () => {
  it("SIGKILL mid-batch of 40 sessions, restart on the same state: every session ends exactly once, no accepted result lost", async () => {
    const queue = "crash";
    const gw = await gateway("crash-node", 4, { queue, runMs: 150 });
    const tasks = Array.from({ length: 10 }, (_, i) => ({
      task_id: `t${i}`,
      instruction: `task ${i}`,
      num_samples: 4,
      agent: shell,
    }));
    const { batch_id } = await client().submit({ batch_id: "crash-batch", queue, tasks });
    await gw.waitFor(
      () => gw.acks.filter((a) => a.status === "accepted").length >= 12,
      60_000,
      "12 accepted results",
    );
    await cp.kill();
    const acceptedBeforeCrash = gw.acks.filter((a) => a.status === "accepted").map((a) => a.session_id);
    expect(acceptedBeforeCrash.length).toBeLessThan(40); // the kill really lands mid-batch
    cp = await startControlPlaneDev({ port: cp.port, persistTo: dir, tokens, vars });
    await waitDone(batch_id);
    const results = await allResults(batch_id);
    const ids = results.map((r) => r.result.session_id);
    expect(ids).toHaveLength(40);
    expect(new Set(ids).size).toBe(40);
    expect(new Set(results.map((r) => r.seq)).size).toBe(40);
    expect(results.every((r) => r.result.status === "COMPLETED")).toBe(true);
    for (const id of acceptedBeforeCrash) expect(ids).toContain(id);
    const status = await client().status(batch_id);
    expect(status).toMatchObject({ status: "completed", completed_sessions: 40 });
    expect(status.counts.COMPLETED).toBe(40);
    await gw.close();
  });

  it("a gateway whose socket drops gets its sessions requeued after the grace; a second gateway finishes them", async () => {
    const queue = "drop";
    const lost = await gateway("lost-node", 2, { queue, autoRun: false });
    const { batch_id } = await client().submit({
      batch_id: "drop-batch",
      queue,
      tasks: [{ task_id: "t", instruction: "x", num_samples: 2, agent: shell, max_attempts: 3 }],
    });
    await lost.waitFor(() => lost.assigns.length === 2, 30_000, "2 assigns");
    lost.kill();
    const rescuer = await gateway("rescue-node", 2, { queue, runMs: 10 });
    await waitDone(batch_id, 60_000);
    const results = await allResults(batch_id);
    expect(results).toHaveLength(2);
    // The lost gateway never reported INITIALIZING: nothing ran, so no attempt was used up.
    for (const r of results)
      expect(r.result).toMatchObject({ status: "COMPLETED", node_id: "rescue-node", attempt: 1 });
    expect(rescuer.assigns.map((a) => a.message.session.attempt)).toEqual([1, 1]);
    await rescuer.close();
  });

  it("a result sent twice is accepted once", async () => {
    const queue = "dup";
    const gw = await gateway("dup-node", 1, { queue, duplicateResults: true });
    const { batch_id } = await client().submit({
      batch_id: "dup-batch",
      queue,
      tasks: [{ task_id: "t", instruction: "x", num_samples: 1, agent: shell }],
    });
    await waitDone(batch_id, 30_000);
    await gw.waitFor(() => gw.acks.length === 2, 10_000, "2 acks");
    expect(gw.acks.map((a) => a.status).sort()).toEqual(["accepted", "duplicate"]);
    expect(await allResults(batch_id)).toHaveLength(1);
    await gw.close();
  });
});
