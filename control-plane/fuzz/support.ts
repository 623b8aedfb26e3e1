/**
 * Helpers of the control plane's fuzz tests (workers pool): the fuzz settings from the pool's
 * bindings, a gateway that answers every `admin` message (so a fence change never waits for it),
 * and the check that a normal batch still completes after a fuzz run.
 *
 * @module
 */
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { ControlMessage } from "../../protocol";
import { type FuzzSettings, fuzzSettings } from "../../test/support/fuzz";
import { call, Gateway, postBatch, resultFor, TOKENS, task, uniqueId } from "../testing/fixtures";

/**
 * The fuzz settings: `POLAR_FUZZ_RUNS` / `POLAR_FUZZ_SEED` reach workerd as bindings (vitest.config.ts).
 *
 * @example
 * ```ts
 * const settings = workerFuzzSettings(); // 300 cases, seed 27 inside npm test
 * ```
 */
export function workerFuzzSettings(ciRuns?: number): FuzzSettings {
  return fuzzSettings(env as unknown as Record<string, unknown>, ciRuns);
}

/**
 * Answers every `admin` message `gw` receives with a successful `admin_ack` (wire v1: paused
 * after `pause`, running after `resume`), so fence routes never wait out their timeout on it.
 *
 * @example
 * ```ts
 * answerAdmin(gw);
 * ```
 */
export function answerAdmin(gw: Gateway): void {
  let paused = false;
  gw.ws.addEventListener("message", (event) => {
    if (typeof event.data !== "string" || event.data === "pong") return;
    const message = JSON.parse(event.data) as ControlMessage;
    if (message.type !== "admin") return;
    if (message.action === "pause") paused = true;
    if (message.action === "resume") paused = false;
    if (message.action === "fence") paused = message.fence?.paused ?? paused;
    gw.send({
      v: 1,
      type: "admin_ack",
      request_id: message.request_id,
      ok: true,
      paused,
      inflight: 0,
      policy_version: null,
    });
  });
}

/**
 * Submits one normal batch on `queue` and serves it with a fresh gateway, which answers whatever
 * it is sent (results for every assignment, acks for admin messages), until the batch is
 * completed: the control plane's state survived what came before.
 *
 * @example
 * ```ts
 * await expectNormalBatchCompletes(uniqueId("after"));
 * ```
 */
export async function expectNormalBatchCompletes(queue: string): Promise<void> {
  const batchId = uniqueId("b-intact");
  const created = await postBatch({ batch_id: batchId, queue, tasks: [task("t0", { num_samples: 2 })] });
  expect(created.status).toBe(201);
  const nodeId = uniqueId("intact-node");
  const gw = await Gateway.connect(queue);
  try {
    answerAdmin(gw);
    gw.hello(nodeId, 4);
    const accepted = new Set<string>();
    for (let i = 0; i < 200 && accepted.size < 2; i++) {
      const message = await gw.next(10_000);
      if (message.type === "assign") {
        gw.send({ v: 1, type: "credit", grant: 1 });
        gw.send({
          v: 1,
          type: "result",
          lease_id: message.lease_id,
          result: resultFor(message.session, nodeId),
        });
      } else if (message.type === "ack" && message.status === "accepted") {
        if (message.session_id.startsWith(`${batchId}.`)) accepted.add(message.session_id);
      } else if (message.type === "error") {
        throw new Error(`the intact-state gateway was refused: ${JSON.stringify(message)}`);
      }
    }
    expect([...accepted].sort()).toEqual([`${batchId}.0.0`, `${batchId}.0.1`]);
    const status = await call(`/v1/batches/${batchId}`, {
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(status.status).toBe(200);
    expect(await status.json()).toMatchObject({ status: "completed", completed_sessions: 2 });
  } finally {
    gw.close();
  }
}

/**
 * Keeps `gw` alive through a long run: a `ping` every 5 s (a gateway silent for three ping
 * intervals is closed). Returns the function that stops it.
 *
 * @example
 * ```ts
 * const stop = keepAlive(gw);
 * ```
 */
export function keepAlive(gw: Gateway): () => void {
  const timer = setInterval(() => {
    if (!gw.closed) gw.send("ping");
  }, 5000);
  return () => clearInterval(timer);
}

/**
 * The next message of `type` on `gw`, skipping `pong` frames and messages of other types.
 *
 * @example
 * ```ts
 * const ack = await nextOfType(gw, "ack");
 * ```
 */
export async function nextOfType<T extends ControlMessage["type"]>(
  gw: Gateway,
  type: T,
): Promise<Extract<ControlMessage, { type: T }>> {
  for (;;) {
    const raw = await gw.nextRaw(10_000);
    if (raw === "pong") continue;
    const message = JSON.parse(raw) as ControlMessage;
    if (message.type === type) return message as Extract<ControlMessage, { type: T }>;
  }
}
