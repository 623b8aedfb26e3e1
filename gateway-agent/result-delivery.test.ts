/**
 * Result delivery of a real in-process gateway against the fake control plane: a finished
 * session is held (listed in `hello`) while its upload hangs, uploads are retried past any count,
 * the journal's bound stops intake until acknowledgements free it, and the silent-socket check
 * closes the socket at the liveness limit after the last frame.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type HelloMessage, ResultMessage, WIRE_VERSION } from "../protocol";
import { type FixtureEngine, startFixtureEngine } from "../proxy/testing/fixture-engine";
import { type Gateway, type GatewayOptions, startGateway } from "./gateway";
import {
  type FakeControlPlane,
  type FakeControlPlaneOptions,
  startFakeControlPlane,
} from "./testing/fake-control-plane";
import { ASK, isResultOf, makeAssign } from "./testing/session-fixtures";

const TOKEN = "delivery-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

let engine: FixtureEngine;
let cp: FakeControlPlane | null = null;
let gateway: Gateway | null = null;
let scratch: string | null = null;

beforeAll(async () => {
  engine = await startFixtureEngine({ model: MODEL });
});
afterAll(async () => {
  await engine.close();
});
afterEach(async () => {
  await gateway?.stop();
  gateway = null;
  await cp?.close();
  cp = null;
  if (scratch) await rm(scratch, { recursive: true, force: true });
  scratch = null;
});

async function start(extra: Partial<GatewayOptions> = {}, cpOpts: Partial<FakeControlPlaneOptions> = {}) {
  cp = await startFakeControlPlane({ token: TOKEN, ...cpOpts });
  scratch = await mkdtemp(path.join(tmpdir(), "polar-delivery-test-"));
  gateway = await startGateway({
    controlPlaneUrl: cp.url,
    nodeId: "gpu-d",
    token: TOKEN,
    engine: "sglang-openai",
    engineUrl: engine.url,
    model: MODEL,
    workRoot: path.join(scratch, "work"),
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
    uploadPolicy: { initialDelayMs: 10, maxDelayMs: 20, concurrency: 4 },
    logger: quiet,
    runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
    ...extra,
  });
  await cp.waitFor((m) => m.type === "hello");
  return { cp, gateway };
}

describe("result delivery", { timeout: 60_000 }, () => {
  it("a finished session whose upload hangs is held: the hello after a reconnect lists it, and it is delivered with its records", async () => {
    const { cp, gateway } = await start({}, { artifacts: "hang" });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    await expect.poll(() => gateway.stats().uploadingResults, { timeout: 20_000 }).toBe(1);
    expect(gateway.stats().active).toBe(0); // finished: only the upload is left
    cp.artifactMode = "store";
    cp.drop(); // the link goes; the hung upload's connection goes with it
    const hello = (await cp.waitFor(
      (m, r) => m.type === "hello" && r.connection === 1,
      10_000,
    )) as HelloMessage;
    expect(hello.leases).toEqual([{ lease_id: a.lease_id, session_id: a.session.session_id }]);
    const m = ResultMessage.parse(await cp.waitFor(isResultOf(a.lease_id)));
    expect(m.completions_ref).toMatchObject({ key: `${a.session.session_id}/completions` });
    expect(m.result.trajectory.metadata.completions_upload_error).toBeUndefined();
    expect(cp.artifacts.find((x) => x.key === m.completions_ref?.key)?.body).toHaveLength(1);
    // The session's logs went the same journaled way: held through the outage, then uploaded.
    expect(m.logs_ref).toMatchObject({ key: `${a.session.session_id}/logs` });
    expect(m.result.trajectory.metadata.logs_upload_error).toBeUndefined();
    await expect.poll(() => gateway.stats().unackedResults, { timeout: 10_000 }).toBe(0);
  });

  it("keeps retrying an upload past any number of failures (here 12) instead of dropping the records", async () => {
    const { cp } = await start({}, { artifacts: 12 });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    const m = ResultMessage.parse(await cp.waitFor(isResultOf(a.lease_id), 30_000));
    expect(m.completions_ref).toBeDefined();
    expect(m.logs_ref).toBeDefined();
    expect(cp.uploadAttempts).toBe(14); // 12 failures, then the records and the logs
  });

  it("takes no new sessions while the journal is over its bound, and grants credit again once an ack frees it", async () => {
    const { cp, gateway } = await start({ journalMaxBytes: 1 }, { autoAck: false });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    await cp.waitFor(isResultOf(a.lease_id));
    const creditsSince = (n: number) =>
      cp.received.slice(n).filter((r) => r.message.type === "credit" && r.message.grant > 0);
    const mark = cp.received.length;
    // A credit would follow the result as soon as it is journaled; a status request answered
    // after the result proves the gateway got past that point.
    cp.send({ v: WIRE_VERSION, type: "admin", request_id: "after-result", action: "status" });
    await cp.waitFor((m) => m.type === "admin_ack" && m.request_id === "after-result");
    expect(creditsSince(mark)).toEqual([]);
    expect(gateway.stats().journalBytes).toBeGreaterThan(1);
    // A reconnect's hello offers nothing either.
    cp.drop();
    const hello = (await cp.waitFor((m, r) => m.type === "hello" && r.connection === 1)) as HelloMessage;
    expect(hello.credit).toBe(0);
    expect(hello.leases.map((l) => l.lease_id)).toEqual([a.lease_id]);
    cp.send({
      v: WIRE_VERSION,
      type: "ack",
      lease_id: a.lease_id,
      session_id: a.session.session_id,
      status: "accepted",
    });
    await cp.waitFor((m, r) => m.type === "credit" && m.grant > 0 && r.connection === 1);
    expect(gateway.stats().journalBytes).toBe(0);
  });

  it("closes a silent socket at the liveness limit after the last frame (3 pings of 1 s), not on a later ping tick", async () => {
    const { cp } = await start({}, { pingIntervalSeconds: 1 });
    await expect.poll(() => cp.pings[0] ?? 0, { timeout: 15_000 }).toBeGreaterThanOrEqual(2); // pings answered
    cp.mute = true;
    await expect.poll(() => cp.closedAt[0] ?? null, { timeout: 10_000 }).not.toBeNull();
    const silentFor = cp.closedAt[0]! - cp.lastSentAt;
    expect(silentFor).toBeGreaterThanOrEqual(2950);
    expect(silentFor).toBeLessThan(3400);
    cp.mute = false;
    await cp.waitFor((m, r) => m.type === "hello" && r.connection === 1);
  });
});
