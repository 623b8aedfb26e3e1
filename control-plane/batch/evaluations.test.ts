import { afterEach, describe, expect, it } from "vitest";
import { BatchStatusBody, type SessionAssignment } from "../../protocol";
import { Gateway, getAsTrainer, postBatch, resultFor, task, uniqueId } from "../testing/fixtures";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

async function startBatch(queue: string, tasks: ReturnType<typeof task>[], assigns: number) {
  const batchId = uniqueId("ev");
  expect((await postBatch({ batch_id: batchId, queue, tasks })).status).toBe(201);
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello("node-ev", assigns);
  await gw.expect("welcome");
  const got: Array<{ lease_id: string; session: SessionAssignment }> = [];
  for (let i = 0; i < assigns; i++) got.push(await gw.expect("assign"));
  got.sort((a, b) => a.session.session_id.localeCompare(b.session.session_id));
  return { batchId, gw, assigns: got };
}

async function status(batchId: string) {
  const res = await getAsTrainer(`/v1/batches/${batchId}`);
  expect(res.status).toBe(200);
  return BatchStatusBody.parse(await res.json());
}

/** A result whose trajectory carries an evaluation report with `verdict`. */
function graded(session: SessionAssignment, verdict: string, discarded: boolean, reward: number) {
  const r = resultFor(session, "node-ev");
  return {
    ...r,
    reward,
    trajectory: {
      ...r.trajectory,
      metadata: { evaluation: { strategy: "test_on_output", verdict, reward_discarded: discarded } },
    },
  };
}

describe("evaluation verdicts a trainer can watch", () => {
  it("counts evaluations, discarded rewards, flagged results and each verdict per task and per batch", async () => {
    const { batchId, gw, assigns } = await startBatch(
      uniqueId("evq"),
      [task("t0", { num_samples: 3 }), task("t1")],
      4,
    );
    const [a, b, c, d] = assigns as [
      (typeof assigns)[0],
      (typeof assigns)[0],
      (typeof assigns)[0],
      (typeof assigns)[0],
    ];
    const sends: Array<[typeof a, unknown]> = [
      [a, graded(a.session, "clean", false, 1)],
      [b, graded(b.session, "reverted", false, 0)],
      // No evaluation report at all (no evaluator): not counted.
      [c, resultFor(c.session, "node-ev")],
      [d, graded(d.session, "zeroed", true, 0)],
    ];
    for (const [assign, result] of sends) {
      gw.send({ v: 1, type: "result", lease_id: assign.lease_id, result });
      expect((await gw.expect("ack")).status).toBe("accepted");
    }
    // A duplicate is refused by the ledger and never counted twice.
    gw.send({ v: 1, type: "result", lease_id: b.lease_id, result: sends[1]![1] });
    expect((await gw.expect("ack")).status).toBe("duplicate");

    const body = await status(batchId);
    expect(body.tasks.map((t) => t.evaluation)).toEqual([
      { evaluated: 2, reward_discarded: 0, flagged: 1, verdicts: { clean: 1, reverted: 1 } },
      { evaluated: 1, reward_discarded: 1, flagged: 1, verdicts: { zeroed: 1 } },
    ]);
    expect(body.evaluation).toEqual({
      evaluated: 3,
      reward_discarded: 1,
      flagged: 2,
      verdicts: { clean: 1, reverted: 1, zeroed: 1 },
    });
  });

  it("refuses results whose reward is infinite, a boolean or a string, naming the field; the session stays open", async () => {
    const { batchId, gw, assigns } = await startBatch(uniqueId("evq"), [task("t0")], 1);
    const a = assigns[0]!;
    const good = graded(a.session, "clean", false, 1);
    const frame = (reward: string, traceReward = "1") =>
      JSON.stringify({ v: 1, type: "result", lease_id: a.lease_id, result: good })
        .replace('"reward":1,"trajectory"', `"reward":${reward},"trajectory"`)
        .replace('"reward":1,"metadata"', `"reward":${traceReward},"metadata"`);
    for (const [reward, trace] of [
      ["1e999", "1"],
      ["true", "1"],
      ['"1"', "1"],
      ["1", "-1e999"],
    ] as const) {
      gw.send(frame(reward, trace));
      const error = await gw.expect("error");
      expect(error.code).toBe("invalid_message");
      expect(error.message).toMatch(
        trace === "1" ? /result\.reward/ : /result\.trajectory\.traces\[0\]\.reward/,
      );
    }
    expect((await status(batchId)).counts.COMPLETED).toBe(0);
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result: good });
    expect((await gw.expect("ack")).status).toBe("accepted");
    expect((await status(batchId)).evaluation).toMatchObject({ evaluated: 1 });
  });
});
