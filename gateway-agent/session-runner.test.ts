/**
 * The session runner's bookkeeping on a real gateway against the fake control plane: an assign
 * repeated for a lease already held is ignored (no second run, no second result), one session
 * sent under a second lease while it runs is refused under that lease alone, and a gateway that
 * stops interrupts what runs, journaling it as an infra failure (retried elsewhere), instead of
 * waiting for it.
 */
import { readFileSync } from "node:fs";
import { chmod, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type GatewayMessage, type ProgressMessage, WIRE_VERSION } from "../protocol";
import { ResultJournal } from "./journal";
import {
  type GatewayRig,
  type LoggedLine,
  QUIET_LOGGER,
  recordingLogger,
  startGatewayRig,
} from "./testing/gateway-rig";
import { isResultOf, makeAssign } from "./testing/session-fixtures";

let rig: GatewayRig | null = null;
afterEach(async () => {
  await rig?.stop();
  rig = null;
});

async function start(): Promise<{ rig: GatewayRig; lines: LoggedLine[] }> {
  const { lines, logger } = recordingLogger();
  rig = await startGatewayRig({
    nodeId: "gpu-runner",
    token: "runner-token",
    gateway: { logger, runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } } },
  });
  return { rig, lines };
}

const isRunning =
  (leaseId: string) =>
  (m: GatewayMessage): m is ProgressMessage =>
    m.type === "progress" && m.lease_id === leaseId && m.status === "RUNNING";

/** Resolves once the gateway answered a `status` request sent now (it handled everything before it). */
async function roundTrip(r: GatewayRig, requestId: string): Promise<void> {
  r.cp.send({ v: WIRE_VERSION, type: "admin", request_id: requestId, action: "status" });
  await r.cp.waitFor((m) => m.type === "admin_ack" && m.request_id === requestId);
}

const cancel = (leaseId: string, sessionId: string) =>
  ({ v: WIRE_VERSION, type: "cancel", lease_id: leaseId, session_id: sessionId, reason: "test" }) as const;

function isAlive(pid: number): boolean {
  try {
    // A zombie (killed, not yet reaped) counts as dead.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("session runner", { timeout: 60_000 }, () => {
  it("ignores a repeated assign of a lease it holds, running or finished: one run, one result", async () => {
    const { rig, lines } = await start();
    rig.cp.autoAck = false; // the finished result stays held, unacknowledged
    const a = makeAssign({ command: "sleep 300", prefix: "dup" });
    const ignored = () => lines.filter((l) => l.msg === "duplicate assign ignored");
    rig.cp.send(a);
    await rig.cp.waitFor(isRunning(a.lease_id));
    rig.cp.send(a); // while it runs
    await roundTrip(rig, "dup-1");
    expect(ignored()).toHaveLength(1);
    expect(rig.gateway.stats().active).toBe(1);
    rig.cp.send(cancel(a.lease_id, a.session.session_id));
    await rig.cp.waitFor(isResultOf(a.lease_id));
    rig.cp.send(a); // finished, its result held until acknowledged
    await roundTrip(rig, "dup-2");
    expect(ignored()).toHaveLength(2);
    expect(ignored().map((l) => l.fields)).toEqual([
      { lease_id: a.lease_id, session_id: a.session.session_id },
      { lease_id: a.lease_id, session_id: a.session.session_id },
    ]);
    const mine = rig.cp.received
      .map((r) => r.message)
      .filter((m) => "lease_id" in m && m.lease_id === a.lease_id);
    expect(mine.filter((m) => m.type === "result")).toHaveLength(1);
    expect(mine.filter((m) => m.type === "progress" && m.status === "INITIALIZING")).toHaveLength(1);
    expect(rig.gateway.stats()).toMatchObject({ active: 0, unackedResults: 1 });
  });

  it("refuses a session already running under another lease, as infra under the new lease; the first runs on", async () => {
    const { rig } = await start();
    const first = makeAssign({ command: "sleep 300", prefix: "twice" });
    rig.cp.send(first);
    await rig.cp.waitFor(isRunning(first.lease_id));
    const second = structuredClone(first);
    second.lease_id = `${first.lease_id}-again`;
    rig.cp.send(second);
    const { result } = await rig.cp.waitFor(isResultOf(second.lease_id));
    expect(result).toMatchObject({
      session_id: first.session.session_id,
      status: "ERROR",
      reward: null,
      error: {
        kind: "infra",
        message: `session already runs on this gateway under lease ${first.lease_id}`,
      },
    });
    // The first lease is untouched: still running, no result of its own, still held.
    await roundTrip(rig, "twice-1");
    expect(rig.gateway.stats().active).toBe(1);
    expect(
      rig.cp.received.some((r) => r.message.type === "result" && r.message.lease_id === first.lease_id),
    ).toBe(false);
    rig.cp.send(cancel(first.lease_id, first.session.session_id));
    expect((await rig.cp.waitFor(isResultOf(first.lease_id))).result.status).toBe("CANCELLED");
  });

  it("stop interrupts a running session (and its child) and journals it as an infra failure", async () => {
    const { rig } = await start();
    // Written by the session's own user when the gateway runs as root.
    const pidFile = path.join(rig.scratch, "child.pid");
    await writeFile(pidFile, "");
    await chmod(pidFile, 0o666);
    const a = makeAssign({
      command: `sleep 300 & echo $! > "$PID_FILE"; wait`,
      env: { PID_FILE: pidFile },
      prefix: "stop",
    });
    rig.cp.send(a);
    await rig.cp.waitFor(isRunning(a.lease_id));
    const readPid = async () => Number((await readFile(pidFile, "utf8")).trim());
    await expect.poll(readPid, { timeout: 15_000 }).toBeGreaterThan(0);
    const childPid = await readPid();
    await rig.gateway.stop(); // returns once the session ended: not after the 300 s sleep
    await expect.poll(() => isAlive(childPid), { timeout: 10_000 }).toBe(false);
    // Journaled for the next start to deliver (its uploads did not get to run before the stop).
    const journaled = await new ResultJournal(
      path.join(rig.gateway.workRoot, "journal"),
      QUIET_LOGGER,
    ).load();
    expect(journaled.map((e) => e.message.lease_id)).toEqual([a.lease_id]);
    expect(journaled[0]!.message.result).toMatchObject({
      session_id: a.session.session_id,
      status: "ERROR",
      reward: null,
      error: { kind: "infra", message: "gateway is shutting down" },
    });
    expect(rig.gateway.stats()).toMatchObject({ active: 0, draining: true });
  });
});
