/**
 * A small in-process gateway speaking `protocol/wire.ts` over a real WebSocket, for end-to-end
 * tests and the benchmark of the control plane. Its harness is a no-op: an assign is answered
 * with progress (INITIALIZING → RUNNING → POST_RUN) and a COMPLETED result, after an optional
 * delay. Like the real gateway it resends results until acknowledged, lists the leases it holds
 * in `hello` after a reconnect, grants credit as slots free, and pings for liveness.
 *
 * @module
 */
import WebSocket from "ws";
import {
  type AssignMessage,
  ControlMessage,
  type SessionResult,
  type StageMetrics,
  WIRE_VERSION,
  ZERO_STAGE_METRICS,
} from "../../protocol";

export interface WireGatewayOptions {
  /** Control plane base URL (http://…). */
  url: string;
  token: string;
  nodeId: string;
  queue?: string;
  /** Concurrent sessions (credit granted at hello). */
  slots: number;
  /** Milliseconds a session "runs" before its result (`Infinity`: until {@link WireGateway.finishAll}). */
  runMs?: number;
  /** When false, assigns are held and never finished (a gateway that will be lost). */
  autoRun?: boolean;
  /** Send every result twice (duplicate-delivery test). */
  duplicateResults?: boolean;
  /** Milliseconds between liveness pings (default 5000). */
  pingIntervalMs?: number;
  /** Tokens of the one trace of each result (default 2 prompt + 1 response): trainer-sized results. */
  traceTokens?: { prompt: number; response: number };
}

/** A result the control plane acknowledged. */
export interface AckedResult {
  session_id: string;
  lease_id: string;
  status: "accepted" | "duplicate" | "stale";
}

/**
 * The test gateway.
 *
 * @example
 * ```ts
 * const gw = await WireGateway.start({ url, token, nodeId: "g1", slots: 4, runMs: 50 });
 * await gw.waitFor(() => gw.acks.length >= 10);
 * await gw.close();
 * ```
 */
export class WireGateway {
  ws: WebSocket | null = null;
  /** Every assign received, in order, with the time it arrived. */
  readonly assigns: { message: AssignMessage; at: number }[] = [];
  readonly acks: AckedResult[] = [];
  readonly cancels: string[] = [];
  /** Times the socket closed under it and it connected again. */
  reconnects = 0;
  /** Protocol frames sent and received (liveness pings and pongs not counted). */
  readonly frames = { sent: 0, received: 0 };
  /** Leases in hand (assigned, not yet acknowledged). */
  readonly held = new Map<string, AssignMessage>();
  /** Results waiting for their ack, by lease id (resent on reconnect). */
  private readonly unacked = new Map<string, SessionResult>();
  private pinger: NodeJS.Timeout | null = null;
  private closedByUs = false;
  private reconnecting = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Set by {@link finishAll}: sessions no longer wait for their `runMs`. */
  private released = false;
  /** Sessions running, by lease id: what finishes each one now. */
  private readonly running = new Map<string, () => void>();

  private constructor(readonly opts: WireGatewayOptions) {}

  /** Connects and says hello; resolves after `welcome`. */
  static async start(opts: WireGatewayOptions): Promise<WireGateway> {
    const gw = new WireGateway(opts);
    await gw.connect();
    return gw;
  }

  /** Opens the socket, sends hello (with held leases) and resends unacknowledged results. */
  async connect(): Promise<void> {
    const base = this.opts.url.replace(/^http/, "ws");
    // The node id lets the Worker route a sharded queue's gateway to its shard.
    const query = `queue=${encodeURIComponent(this.opts.queue ?? "default")}&node_id=${encodeURIComponent(this.opts.nodeId)}`;
    const ws = new WebSocket(`${base}/v1/gateways/connect?${query}`, {
      headers: { Authorization: `Bearer ${this.opts.token}` },
    });
    this.ws = ws;
    const welcomed = new Promise<void>((resolve, reject) => {
      ws.once("error", reject);
      ws.once("close", (code) => reject(new Error(`closed before welcome (${code})`)));
      ws.on("message", (data) => {
        const text = data.toString();
        if (text === "pong") return;
        this.frames.received++;
        try {
          const message = ControlMessage.parse(JSON.parse(text));
          if (message.type === "welcome") resolve();
          this.onMessage(message);
        } catch (error) {
          console.error(`wire gateway ${this.opts.nodeId}: bad frame`, error, text.slice(0, 200));
        }
      });
    });
    // Observed below; without this a refused connection would also reject it unhandled.
    welcomed.catch(() => {});
    await new Promise<void>((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    const held = [...this.held.values()].map((a) => ({
      lease_id: a.lease_id,
      session_id: a.session.session_id,
    }));
    const free = Math.max(0, this.opts.slots - this.held.size);
    this.send({
      v: WIRE_VERSION,
      type: "hello",
      node_id: this.opts.nodeId,
      agent_version: "wire-gateway",
      capacity: { max_init: this.opts.slots, max_run: this.opts.slots, max_postrun: this.opts.slots },
      capabilities: { runtimes: ["local"], harnesses: ["shell"], engines: ["sim"] },
      credit: free,
      leases: held,
    });
    await welcomed;
    ws.on("close", () => this.onClose());
    for (const [leaseId, result] of this.unacked)
      this.send({ v: WIRE_VERSION, type: "result", lease_id: leaseId, result });
    this.pinger = setInterval(
      () => this.ws?.readyState === WebSocket.OPEN && this.ws.send("ping"),
      this.opts.pingIntervalMs ?? 5000,
    );
  }

  private onClose(): void {
    if (this.pinger) clearInterval(this.pinger);
    this.pinger = null;
    if (this.closedByUs || this.reconnecting) return;
    // Reconnect with backoff until the control plane is back (it may be restarting).
    this.reconnecting = true;
    const attempt = async (delay: number): Promise<void> => {
      if (this.closedByUs) return;
      try {
        await this.connect();
        this.reconnecting = false;
        this.reconnects++;
      } catch {
        const t = setTimeout(() => void attempt(Math.min(delay * 2, 1000)), delay);
        this.timers.add(t);
      }
    };
    void attempt(100);
  }

  private send(message: unknown): void {
    if (this.ws?.readyState !== WebSocket.OPEN) return;
    this.ws.send(JSON.stringify(message));
    this.frames.sent++;
  }

  private onMessage(message: ControlMessage): void {
    if (message.type === "assign") {
      this.assigns.push({ message, at: performance.now() });
      this.held.set(message.lease_id, message);
      if (this.opts.autoRun !== false) this.run(message);
    } else if (message.type === "ack") {
      this.acks.push({ session_id: message.session_id, lease_id: message.lease_id, status: message.status });
      if (this.unacked.delete(message.lease_id) && this.held.delete(message.lease_id)) {
        this.send({ v: WIRE_VERSION, type: "credit", grant: 1, metrics: this.metrics() });
      }
    } else if (message.type === "cancel") {
      this.cancels.push(message.lease_id);
      if (this.held.delete(message.lease_id)) this.send({ v: WIRE_VERSION, type: "credit", grant: 1 });
    } else if (message.type === "admin") {
      this.send({
        v: WIRE_VERSION,
        type: "admin_ack",
        request_id: message.request_id,
        ok: true,
        paused: message.action === "pause",
        inflight: 0,
        policy_version: message.policy_version ?? null,
      });
    }
  }

  private metrics(): StageMetrics {
    return { ...ZERO_STAGE_METRICS, run_inflight: Math.min(this.held.size, this.opts.slots) };
  }

  private run(assign: AssignMessage): void {
    const { session } = assign;
    const progress = (status: "INITIALIZING" | "RUNNING" | "POST_RUN") =>
      this.send({
        v: WIRE_VERSION,
        type: "progress",
        lease_id: assign.lease_id,
        session_id: session.session_id,
        status,
        at: Date.now(),
        metrics: this.metrics(),
      });
    progress("INITIALIZING");
    const finish = () => {
      if (timer) clearTimeout(timer);
      this.timers.delete(timer as NodeJS.Timeout);
      this.running.delete(assign.lease_id);
      if (!this.held.has(assign.lease_id)) return; // cancelled meanwhile
      progress("RUNNING");
      progress("POST_RUN");
      const result = this.resultFor(assign);
      this.unacked.set(assign.lease_id, result);
      this.send({ v: WIRE_VERSION, type: "result", lease_id: assign.lease_id, result });
      if (this.opts.duplicateResults)
        this.send({ v: WIRE_VERSION, type: "result", lease_id: assign.lease_id, result });
    };
    this.running.set(assign.lease_id, finish);
    // Once released, a session assigned later (a requeued one) ends at once too.
    const runMs = this.released ? 0 : (this.opts.runMs ?? 0);
    // setTimeout holds at most 2^31-1 ms; a session without an end waits for finishAll().
    const timer = Number.isFinite(runMs) ? setTimeout(finish, runMs) : undefined;
    if (timer) this.timers.add(timer);
  }

  /**
   * Ends every running session now (its result goes out at once), and every one assigned from now
   * on as soon as it arrives. Returns how many were running.
   */
  finishAll(): number {
    this.released = true;
    const now = [...this.running.values()];
    for (const finish of now) finish();
    return now.length;
  }

  /** The trace's token arrays, built once (`traceTokens`). */
  private tokenArrays: { prompt: number[]; response: number[]; mask: (0 | 1)[]; logprobs: number[] } | null =
    null;

  private tokens() {
    if (!this.tokenArrays && !this.opts.traceTokens)
      this.tokenArrays = { prompt: [1, 2], response: [3], mask: [1], logprobs: [-0.1] };
    if (!this.tokenArrays) {
      const { prompt, response } = this.opts.traceTokens!;
      // Ids spread over a real vocabulary's range, so their JSON is as long as real ids'.
      const id = (i: number) => (i * 7919) % 151_643;
      this.tokenArrays = {
        prompt: Array.from({ length: prompt }, (_, i) => id(i + 1)),
        response: Array.from({ length: response }, (_, i) => id(prompt + i + 1)),
        mask: new Array<0 | 1>(response).fill(1),
        logprobs: Array.from({ length: response }, (_, i) => -((i % 97) + 1) / 37),
      };
    }
    return this.tokenArrays;
  }

  /** The no-op harness's result: one trace (tiny unless `traceTokens` says otherwise). */
  resultFor(assign: AssignMessage): SessionResult {
    const s = assign.session;
    const tokens = this.tokens();
    return {
      session_id: s.session_id,
      task_id: s.task_id,
      batch_id: s.batch_id,
      status: "COMPLETED",
      reward: 1,
      trajectory: {
        status: "COMPLETED",
        traces: [
          {
            prompt_ids: tokens.prompt,
            response_ids: tokens.response,
            loss_mask: tokens.mask,
            response_logprobs: tokens.logprobs,
            prompt_messages: [{ role: "user", content: s.instruction }],
            response_messages: [{ role: "assistant", content: "ok" }],
            tools: null,
            finish_reason: "stop",
            reward: 1,
            metadata: {},
          },
        ],
        metadata: {},
        error: null,
      },
      timing: {
        queued_ms: 0,
        init_ms: 0,
        ready_ms: 0,
        run_ms: Number.isFinite(this.opts.runMs) ? (this.opts.runMs ?? 0) : 0,
        postrun_ms: 0,
        total_ms: Number.isFinite(this.opts.runMs) ? (this.opts.runMs ?? 0) : 0,
      },
      node_id: this.opts.nodeId,
      attempt: s.attempt,
      error: null,
      metadata: {},
    };
  }

  /** Polls `predicate` every 25 ms until true or `timeoutMs` (then throws with `what`). */
  async waitFor(predicate: () => boolean, timeoutMs = 60_000, what = "condition"): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline)
        throw new Error(`${this.opts.nodeId}: ${what} not reached within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Drops the socket abruptly (no close handshake) and stops reconnecting: a lost host. */
  kill(): void {
    this.closedByUs = true;
    this.stopTimers();
    this.ws?.terminate();
  }

  /** Closes cleanly and stops reconnecting. */
  async close(): Promise<void> {
    this.closedByUs = true;
    this.stopTimers();
    if (!this.ws || this.ws.readyState === WebSocket.CLOSED) return;
    const ws = this.ws;
    await new Promise<void>((resolve) => {
      ws.once("close", () => resolve());
      ws.close(1000, "done");
      setTimeout(() => {
        ws.terminate();
        resolve();
      }, 1000).unref();
    });
  }

  private stopTimers(): void {
    if (this.pinger) clearInterval(this.pinger);
    this.running.clear();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
