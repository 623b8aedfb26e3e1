import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PolarProcess, spawnPolar } from "../cli/processes";
import { type GatewayMessage, type HelloMessage, type ResultMessage, WIRE_VERSION } from "../protocol";
import { type FixtureEngine, startFixtureEngine } from "../proxy/testing/fixture-engine";
import { type JournalEntry, ResultJournal } from "./journal";
import { startFakeControlPlane } from "./testing/fake-control-plane";
import { ASK, makeAssign } from "./testing/session-fixtures";

const TOKEN = "journal-test-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

let engine: FixtureEngine;
let scratch: string;
beforeAll(async () => {
  engine = await startFixtureEngine({ model: MODEL });
  scratch = await mkdtemp(path.join(tmpdir(), "polar-journal-test-"));
});
afterAll(async () => {
  await engine.close();
  await rm(scratch, { recursive: true, force: true });
});

describe("ResultJournal", () => {
  it("keeps entries (records pending upload included) across instances until removed, loads the earlier format, moves unreadable entries aside, counts bytes", async () => {
    const dir = path.join(scratch, "unit");
    const a = makeAssign({ command: "true" });
    const message: ResultMessage = {
      v: WIRE_VERSION,
      type: "result",
      lease_id: "lease/with:odd chars",
      result: {
        session_id: a.session.session_id,
        task_id: "t1",
        batch_id: "b",
        status: "COMPLETED",
        reward: 1,
        trajectory: { status: "COMPLETED", traces: [], metadata: {}, error: null },
        timing: { queued_ms: 0, init_ms: 0, ready_ms: 0, run_ms: 0, postrun_ms: 0, total_ms: 0 },
        node_id: "n",
        attempt: 1,
        error: null,
        metadata: {},
      },
    };
    const records = [{ opaque: "record" }];
    const entry: JournalEntry = { v: 2, message, pending: { completions: records }, finished_at: 1 };
    const journal = new ResultJournal(dir, quiet);
    const bytes = await journal.put(entry);
    expect(journal.bytes).toBe(bytes);
    const { writeFile } = await import("node:fs/promises");
    await writeFile(path.join(dir, "garbage.result.json"), "{not json");
    // The earlier format (a bare result message, uploads done) still loads, with nothing pending.
    const legacy: ResultMessage = { ...message, lease_id: "legacy-lease" };
    await writeFile(path.join(dir, "bGVnYWN5LWxlYXNl.result.json"), JSON.stringify(legacy));
    const reopened = new ResultJournal(dir, quiet);
    const loaded = await reopened.load();
    expect(loaded).toContainEqual(entry);
    expect(loaded.find((e) => e.message.lease_id === "legacy-lease")).toMatchObject({
      message: legacy,
      pending: {},
    });
    expect((await readdir(dir)).filter((n) => n.endsWith(".corrupt"))).toHaveLength(1);
    expect(reopened.bytes).toBeGreaterThan(bytes);
    await reopened.remove(message.lease_id);
    await reopened.remove("legacy-lease");
    expect(reopened.bytes).toBe(0);
    expect(await new ResultJournal(dir, quiet).load()).toEqual([]);
  });
});

describe("journal across a SIGKILL (real gateway processes)", { timeout: 120_000 }, () => {
  it("re-sends a finished, unacknowledged result after kill -9 and restart; once acked it is gone", async () => {
    const cp = await startFakeControlPlane({ token: TOKEN, autoAck: false });
    const workRoot = path.join(scratch, "work");
    const launch = (): PolarProcess =>
      spawnPolar(
        "gateway",
        [
          "serve_gateway",
          "--control-plane",
          cp.url,
          "--node-id",
          "kill-node",
          "--engine-url",
          engine.url,
          "--model",
          MODEL,
          "--work-root",
          workRoot,
        ],
        { POLAR_GATEWAY_TOKEN: TOKEN, PATH: process.env.PATH ?? "/usr/bin:/bin" },
      );
    const hellos = () => cp.received.filter((r) => r.message.type === "hello");
    let gw = launch();
    try {
      await cp.waitFor((m) => m.type === "hello", 60_000);
      const a = makeAssign({ command: ASK, prefix: "kill" });
      cp.send(a);
      const first = (await cp.waitFor(
        (m) => m.type === "result" && m.lease_id === a.lease_id,
        60_000,
      )) as ResultMessage;
      expect(first.result.status).toBe("COMPLETED");

      // kill -9 between result and ack.
      await gw.kill();
      gw = launch();
      const second = (await cp.waitFor(
        (m: GatewayMessage, r) => m.type === "hello" && r.connection === 1,
        60_000,
      )) as HelloMessage;
      expect(second.leases).toEqual([{ lease_id: a.lease_id, session_id: a.session.session_id }]);
      const resent = (await cp.waitFor(
        (m, r) => m.type === "result" && m.lease_id === a.lease_id && r.connection === 1,
        30_000,
      )) as ResultMessage;
      expect(resent.result).toEqual(first.result);

      // The control plane accepts it (once); the journal entry goes away.
      cp.send({
        v: WIRE_VERSION,
        type: "ack",
        lease_id: a.lease_id,
        session_id: a.session.session_id,
        status: "accepted",
      });
      await expect
        .poll(async () => (await readdir(path.join(workRoot, "journal"))).length, { timeout: 10_000 })
        .toBe(0);
      await gw.kill();
      gw = launch();
      const third = (await cp.waitFor(
        (m, r) => m.type === "hello" && r.connection === 2,
        60_000,
      )) as HelloMessage;
      expect(third.leases).toEqual([]);
      await new Promise((r) => setTimeout(r, 500));
      const results = cp.received.filter((r) => r.message.type === "result");
      expect(results.map((r) => r.connection)).toEqual([0, 1]);
      expect(hellos()).toHaveLength(3);
    } finally {
      await gw.kill();
      await cp.close();
    }
  });
});
