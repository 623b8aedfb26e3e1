/**
 * Helpers shared by the control plane's workers-pool tests: request builders, a task factory and a
 * WebSocket inbox that turns frames into awaitable messages.
 *
 * @module
 */
import { runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { expect } from "vitest";
import {
  type ControlMessage,
  ResultsPage,
  type SessionAssignment,
  type SessionResult,
  type TaskSpecInput,
} from "../../protocol";
import type { QueueDO } from "../queue/queue-do";

/** Tokens bound by the root vitest config. */
export const TOKENS = {
  trainer: "test-trainer-token",
  gateway: "test-gateway-token",
  admin: "test-admin-token",
  viewer: "test-viewer-token",
} as const;

const BASE = "http://control-plane.test";

/**
 * Options of `expect.poll` where what is awaited is the control plane catching up, not its own
 * timing: vitest's 1 s default fails a correct run on a loaded two-core machine.
 */
export const POLL = { timeout: 15_000, interval: 20 } as const;

/** What {@link shardSettled} reads inside a QueueDO (private at compile time, there at run time). */
interface ShardInternals {
  shard: { backlog: { active: number } };
  dispatcher: { running: boolean };
}

/**
 * Waits until the queue shard has no event in flight: no frame, alarm or dispatch pass is being
 * handled (its backlog counts them), so every frame those would send has been sent. Read inside
 * the object; a renamed field fails loudly rather than passing.
 *
 * @example
 * ```ts
 * await shardSettled(env.QUEUE.getByName(queue));
 * await gw.expectNothingBeforeReply(); // no assign was sent
 * ```
 */
export async function shardSettled(stub: DurableObjectStub<QueueDO>): Promise<void> {
  await expect
    .poll(
      () =>
        runInDurableObject(stub, (instance) => {
          const inside = instance as unknown as ShardInternals;
          if (
            typeof inside.shard?.backlog?.active !== "number" ||
            typeof inside.dispatcher?.running !== "boolean"
          )
            throw new Error("QueueDO internals changed: update shardSettled");
          return inside.shard.backlog.active === 0 && !inside.dispatcher.running;
        }),
      POLL,
    )
    .toBe(true);
}

/**
 * Calls the Worker through its real entry point.
 *
 * @example
 * ```ts
 * const res = await call("/health");
 * ```
 */
export function call(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(new Request(`${BASE}${path}`, init));
}

/** `POST /v1/batches` with a JSON body (or raw string) and the trainer token. */
export function postBatch(body: unknown, token: string = TOKENS.trainer): Promise<Response> {
  return call("/v1/batches", {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** `GET` with the trainer token. */
export function getAsTrainer(path: string): Promise<Response> {
  return call(path, { headers: { Authorization: `Bearer ${TOKENS.trainer}` } });
}

/**
 * One page of a batch's results as the trainer reads it (`query` as in the URL: `?cursor=…`),
 * checked to be a 200 and parsed with the protocol's schema.
 *
 * @example
 * ```ts
 * const { results, next_cursor } = await resultsPage(batchId, "?limit=10");
 * ```
 */
export async function resultsPage(batchId: string, query = ""): Promise<ResultsPage> {
  const res = await getAsTrainer(`/v1/batches/${batchId}/results${query}`);
  expect(res.status).toBe(200);
  return ResultsPage.parse(await res.json());
}

/** A valid task: a shell harness with `num_samples` sessions. */
export function task(taskId: string, extra: Partial<TaskSpecInput> = {}): TaskSpecInput {
  return {
    task_id: taskId,
    instruction: `solve ${taskId}`,
    num_samples: 1,
    agent: { harness: "shell", custom_shell: { command: "echo hi" } },
    ...extra,
  };
}

/** Unique ids per test: storage is shared by all tests of one file. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

/** A terminal result for an assigned session. */
export function resultFor(
  session: SessionAssignment,
  nodeId: string,
  metadata: Record<string, unknown> = {},
): SessionResult {
  return {
    session_id: session.session_id,
    task_id: session.task_id,
    batch_id: session.batch_id,
    status: "COMPLETED",
    reward: 1,
    trajectory: {
      status: "COMPLETED",
      traces: [
        {
          prompt_ids: [1, 2, 3],
          response_ids: [4, 5],
          loss_mask: [1, 1],
          response_logprobs: [-0.5, -0.25],
          prompt_messages: [{ role: "user", content: session.instruction }],
          response_messages: [{ role: "assistant", content: "hi" }],
          tools: null,
          finish_reason: "stop",
          reward: 1,
          metadata: {},
        },
      ],
      metadata: {},
      error: null,
    },
    timing: { queued_ms: 1, init_ms: 2, ready_ms: 3, run_ms: 4, postrun_ms: 5, total_ms: 15 },
    node_id: nodeId,
    attempt: session.attempt,
    error: null,
    metadata,
  };
}

/**
 * A connected gateway socket whose incoming frames queue up until a test takes them.
 *
 * @example
 * ```ts
 * const gw = await Gateway.connect("q1");
 * gw.send({ v: 1, type: "credit", grant: 1 });
 * const msg = await gw.next();
 * ```
 */
export class Gateway {
  private readonly frames: string[] = [];
  private readonly waiters: ((frame: string) => void)[] = [];
  closed: { code: number; reason: string } | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.addEventListener("message", (event) => {
      const frame =
        typeof event.data === "string" ? event.data : new TextDecoder().decode(event.data as ArrayBuffer);
      const waiter = this.waiters.shift();
      if (waiter) waiter(frame);
      else this.frames.push(frame);
    });
    ws.addEventListener("close", (event) => {
      this.closed = { code: event.code, reason: event.reason };
    });
  }

  /**
   * Opens `GET /v1/gateways/connect?queue=…[&node_id=…]` with the gateway token and accepts the
   * socket (`nodeId` picks the shard of a sharded queue).
   */
  static async connect(queue: string, token: string = TOKENS.gateway, nodeId?: string): Promise<Gateway> {
    const node = nodeId === undefined ? "" : `&node_id=${encodeURIComponent(nodeId)}`;
    const res = await call(`/v1/gateways/connect?queue=${encodeURIComponent(queue)}${node}`, {
      headers: { Upgrade: "websocket", Authorization: `Bearer ${token}` },
    });
    if (res.status !== 101 || !res.webSocket)
      throw new Error(`connect failed: ${res.status} ${await res.text()}`);
    res.webSocket.accept();
    return new Gateway(res.webSocket);
  }

  /** Sends a JSON message (or a raw text frame). */
  send(message: unknown): void {
    this.ws.send(typeof message === "string" ? message : JSON.stringify(message));
  }

  /** Sends the hello of node `nodeId` with `credit`, in wire version `wire` (default 1). */
  hello(
    nodeId: string,
    credit: number,
    leases: { lease_id: string; session_id: string }[] = [],
    wire: 1 | 2 | 3 = 1,
  ): void {
    this.send({
      v: wire,
      type: "hello",
      node_id: nodeId,
      agent_version: "test",
      capacity: { max_init: 4, max_run: 4, max_postrun: 4 },
      capabilities: { runtimes: ["local"], harnesses: ["shell"], engines: ["sim"] },
      credit,
      leases,
    });
  }

  /** The next raw frame, failing after `timeoutMs`. */
  nextRaw(timeoutMs = 5000): Promise<string> {
    const queued = this.frames.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new Error(`no frame within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (frame: string) => {
        clearTimeout(timer);
        resolve(frame);
      };
      this.waiters.push(waiter);
    });
  }

  /** The next message, parsed. */
  async next(timeoutMs = 5000): Promise<ControlMessage> {
    return JSON.parse(await this.nextRaw(timeoutMs)) as ControlMessage;
  }

  /** The next message, which must be of `type`. */
  async expect<T extends ControlMessage["type"]>(
    type: T,
    timeoutMs = 5000,
  ): Promise<Extract<ControlMessage, { type: T }>> {
    const message = await this.next(timeoutMs);
    if (message.type !== type) throw new Error(`expected '${type}', got ${JSON.stringify(message)}`);
    return message as Extract<ControlMessage, { type: T }>;
  }

  /**
   * Asserts that no frame is waiting: sends a frame the shard answers at once with an error (it is
   * not JSON) and requires that answer to be the next frame. A WebSocket keeps order, so whatever
   * the shard sent before it handled this frame has arrived by then. Call it once the frame that
   * must not come would already have been sent (see {@link shardSettled}).
   */
  async expectNothingBeforeReply(): Promise<void> {
    this.send("not json: are you there?");
    const frame = await this.nextRaw(10_000);
    let reply: { type?: string; code?: string } | null = null;
    try {
      reply = JSON.parse(frame) as { type?: string; code?: string };
    } catch {
      // reported below
    }
    if (reply?.type !== "error" || reply.code !== "invalid_json")
      throw new Error(`expected no message before the reply to a probe, got ${frame}`);
  }

  close(): void {
    try {
      this.ws.close(1000, "test done");
    } catch {
      // already closed
    }
  }
}

/**
 * Posts a batch of `tasks` to `queue` as the trainer, checks it was created (201) and returns its
 * id. `extra` adds top-level fields of the batch (`sampling`, `callback_url`, …).
 *
 * @example
 * ```ts
 * const batchId = await submitBatch("q1", [task("t1", { num_samples: 2 })]);
 * ```
 */
export async function submitBatch(
  queue: string,
  tasks: TaskSpecInput[],
  extra: Record<string, unknown> = {},
  batchId: string = uniqueId("b"),
): Promise<string> {
  const res = await postBatch({ batch_id: batchId, queue, tasks, ...extra });
  expect(res.status, `POST /v1/batches ${batchId}: ${res.status}`).toBe(201);
  return batchId;
}

/** Options of {@link GatewayPool.join}. */
export interface JoinOptions {
  /** Credit sent with the hello (default 0: the gateway asks for no work yet). */
  credit?: number;
  /** Wire version of the hello (default 1). */
  wire?: 1 | 2 | 3;
  /** Wait for the `welcome` before returning (default true). */
  welcome?: boolean;
}

/**
 * The test gateways of one file: each one joined here is closed by {@link GatewayPool.closeAll},
 * which the file calls after each test so no socket outlives it.
 *
 * @example
 * ```ts
 * const gateways = new GatewayPool();
 * afterEach(() => gateways.closeAll());
 * const gw = await gateways.join("q1", "node-a", { credit: 2 });
 * ```
 */
export class GatewayPool {
  private readonly open: Gateway[] = [];

  /**
   * Connects as node `nodeId` (its id in the URL, so a sharded queue routes it to its own shard),
   * sends the hello and, unless told otherwise, waits for the welcome.
   */
  async join(queue: string, nodeId: string, options: JoinOptions = {}): Promise<Gateway> {
    const gw = await Gateway.connect(queue, TOKENS.gateway, nodeId);
    this.open.push(gw);
    gw.hello(nodeId, options.credit ?? 0, [], options.wire ?? 1);
    if (options.welcome ?? true) await gw.expect("welcome");
    return gw;
  }

  /** Opens a socket without a hello (for tests of what comes before it, or of the hello itself). */
  async connect(queue: string, options: { nodeId?: string; token?: string } = {}): Promise<Gateway> {
    return this.track(await Gateway.connect(queue, options.token, options.nodeId));
  }

  /** Adds a gateway opened some other way, so it is closed with the rest. */
  track(gw: Gateway): Gateway {
    this.open.push(gw);
    return gw;
  }

  /** Closes every gateway joined or tracked since the last call. */
  closeAll(): void {
    for (const gw of this.open.splice(0)) gw.close();
  }
}
