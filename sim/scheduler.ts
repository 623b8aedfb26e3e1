/**
 * The simulated "GPU" of the sim engine: a latency model (prefill and decode tokens/s), a limit of
 * running requests with a FIFO waiting queue (as SGLang's scheduler admits requests), an abort
 * registry by request id, seeded fault injection, and the counters benchmarks read to see how busy
 * the engine was (busy time, running/waiting, tokens).
 *
 * @module
 */
import { setTimeout as sleep } from "node:timers/promises";
import { hash32, prng } from "./policy";

/** Fault knobs; every probability is per generation request, drawn from the engine seed. */
export interface FaultOptions {
  /** Probability that a request fails with HTTP 503 before it is scheduled. */
  errorRate?: number;
  /** Probability that a request stalls for {@link stallMs} before prefill. */
  stallRate?: number;
  /** Length of a stall (ms); default 5000. */
  stallMs?: number;
  /** Probability that a request is aborted by the engine halfway through its decode. */
  abortRate?: number;
}

/** Latency and capacity of the simulated GPU. */
export interface SchedulerOptions {
  /** Uncached prompt tokens per second; 0 = instant. */
  prefillTokensPerSecond?: number;
  /** Generated tokens per second per request; 0 = instant. */
  decodeTokensPerSecond?: number;
  /** Requests decoding at once; more wait in a FIFO queue. 0 = unlimited. */
  maxRunningRequests?: number;
  faults?: FaultOptions;
  seed?: number;
}

/** A request refused by fault injection (HTTP 503, like an overloaded or restarting server). */
export class EngineUnavailableError extends Error {
  override readonly name = "EngineUnavailableError";
}

/** A request reuses the id of one still running (HTTP 400). */
export class DuplicateRidError extends Error {
  override readonly name = "DuplicateRidError";
}

/** Counters since start; `busy_seconds` counts time with at least one running request. */
export interface SchedulerStats {
  running: number;
  waiting: number;
  max_running_requests: number;
  busy_seconds: number;
  /** Integral of running requests over time (request-seconds): occupancy = this / busy. */
  running_request_seconds: number;
  uptime_seconds: number;
  requests_total: number;
  finished_total: number;
  aborted_total: number;
  prompt_tokens_total: number;
  cached_tokens_total: number;
  generation_tokens_total: number;
  queue_seconds_total: number;
  faults: { errors: number; stalls: number; aborts: number };
}

/** How a scheduled generation ended. */
export interface ScheduleOutcome {
  /** Tokens decoded before the end (all of them unless aborted). */
  produced: number;
  /** Set when the request was aborted: SGLang's `finish_reason.message`. */
  abortMessage?: string;
}

/** One generation to run through the GPU. */
export interface ScheduleJob {
  rid: string;
  uncachedPromptTokens: number;
  outputTokens: number;
  /** Aborts the job (client disconnect). */
  signal?: AbortSignal;
  /** Called as tokens are decoded (cumulative count), for streaming. */
  onProgress?: (produced: number) => void;
  /**
   * A health probe: queued and timed like any job (it takes a slot and busy time), but in no
   * counter, never stalled or aborted by injected faults, and it draws no random number, so the seeded fault sequence of client requests is
   * the same whether or not anyone polls `/health`.
   */
  probe?: boolean;
}

/** Decode progress is reported about this often (ms) when decoding takes time. */
const PROGRESS_INTERVAL_MS = 20;

/**
 * The scheduler: admission, timing, abort and counters.
 *
 * @example
 * ```ts
 * const gpu = new GpuScheduler({ decodeTokensPerSecond: 100, maxRunningRequests: 2 });
 * const { produced } = await gpu.run({ rid: "r1", uncachedPromptTokens: 10, outputTokens: 50 });
 * gpu.stats().busy_seconds; // ≈ 0.5
 * ```
 */
export class GpuScheduler {
  private readonly prefillRate: number;
  private readonly decodeRate: number;
  private readonly maxRunning: number;
  private readonly faults: Required<FaultOptions>;
  private readonly random: () => number;
  private readonly startedAt = performance.now();
  private readonly queue: Array<() => void> = [];
  private readonly active = new Map<string, AbortController>();
  private running = 0;
  private lastChange = performance.now();
  private busyMs = 0;
  private occupancyMs = 0;
  private counters = {
    requests_total: 0,
    finished_total: 0,
    aborted_total: 0,
    prompt_tokens_total: 0,
    cached_tokens_total: 0,
    generation_tokens_total: 0,
    queue_seconds_total: 0,
  };
  private faultCounts = { errors: 0, stalls: 0, aborts: 0 };

  constructor(options: SchedulerOptions = {}) {
    this.prefillRate = options.prefillTokensPerSecond ?? 0;
    this.decodeRate = options.decodeTokensPerSecond ?? 0;
    this.maxRunning = options.maxRunningRequests ?? 0;
    this.faults = {
      errorRate: options.faults?.errorRate ?? 0,
      stallRate: options.faults?.stallRate ?? 0,
      stallMs: options.faults?.stallMs ?? 5000,
      abortRate: options.faults?.abortRate ?? 0,
    };
    this.random = prng(hash32(`${options.seed ?? 0}\u0000faults`));
  }

  /** Requests waiting for a slot or running. */
  get busy(): boolean {
    return this.running > 0 || this.queue.length > 0;
  }

  /** Adds prompt-side counts once a request's prompt is known. */
  countPrompt(promptTokens: number, cachedTokens: number): void {
    this.counters.prompt_tokens_total += promptTokens;
    this.counters.cached_tokens_total += cachedTokens;
  }

  /**
   * Aborts one request by id, or all with `rid === undefined`; returns how many were aborted.
   * An aborted request finishes with `finish_reason.type == "abort"` and the tokens decoded so far.
   */
  abort(rid?: string): number {
    let n = 0;
    for (const [id, controller] of this.active) {
      if (rid !== undefined && id !== rid) continue;
      controller.abort(new Error("Abort requested by /abort_request"));
      n++;
    }
    return n;
  }

  /** Throws {@link EngineUnavailableError} when fault injection drops this request. */
  admit(): void {
    this.counters.requests_total++;
    if (this.faults.errorRate > 0 && this.random() < this.faults.errorRate) {
      this.faultCounts.errors++;
      throw new EngineUnavailableError("simulated fault: the engine is unavailable (error_rate)");
    }
  }

  /** Runs one job: waits for a slot, stalls (fault), prefills, decodes; honours aborts. */
  async run(job: ScheduleJob): Promise<ScheduleOutcome> {
    if (this.active.has(job.rid)) throw new DuplicateRidError(`rid: ${job.rid} is already running`);
    const controller = new AbortController();
    const onClientAbort = () => controller.abort(new Error("Abort: the client disconnected"));
    if (job.signal?.aborted) onClientAbort();
    job.signal?.addEventListener("abort", onClientAbort, { once: true });
    this.active.set(job.rid, controller);
    const signal = controller.signal;
    let produced = 0;
    let slot = false;
    const faulty = !job.probe;
    // A probe is in no counter (SGLang sends its health generation with `log_metrics=False`): a
    // client watching `finished_total` for its own call to end must not see a health check end.
    const counters = job.probe ? { ...this.counters } : this.counters;
    const stall = faulty && this.faults.stallRate > 0 && this.random() < this.faults.stallRate;
    const abortAt =
      faulty && this.faults.abortRate > 0 && this.random() < this.faults.abortRate
        ? Math.floor(job.outputTokens / 2)
        : undefined;
    try {
      const queuedAt = performance.now();
      await this.acquire(signal);
      slot = true;
      counters.queue_seconds_total += (performance.now() - queuedAt) / 1000;
      if (stall) {
        this.faultCounts.stalls++;
        await sleep(this.faults.stallMs, undefined, { signal });
      }
      if (this.prefillRate > 0 && job.uncachedPromptTokens > 0)
        await sleep((job.uncachedPromptTokens / this.prefillRate) * 1000, undefined, { signal });
      const target = abortAt ?? job.outputTokens;
      if (this.decodeRate > 0) {
        const perTick = Math.max(1, Math.round((this.decodeRate * PROGRESS_INTERVAL_MS) / 1000));
        while (produced < target) {
          const step = Math.min(perTick, target - produced);
          await sleep((step / this.decodeRate) * 1000, undefined, { signal });
          produced += step;
          job.onProgress?.(produced);
        }
      } else {
        produced = target;
        job.onProgress?.(produced);
      }
      if (abortAt !== undefined) {
        this.faultCounts.aborts++;
        counters.aborted_total++;
        return { produced, abortMessage: "simulated fault: aborted by the engine (abort_rate)" };
      }
      counters.finished_total++;
      return { produced };
    } catch (error) {
      if (!signal.aborted) throw error;
      counters.aborted_total++;
      return { produced, abortMessage: (signal.reason as Error).message };
    } finally {
      counters.generation_tokens_total += produced;
      this.active.delete(job.rid);
      job.signal?.removeEventListener("abort", onClientAbort);
      if (slot) this.release();
    }
  }

  /** Waits for a running slot (FIFO); an abort while waiting leaves the queue. */
  private async acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw signal.reason;
    if (this.maxRunning === 0 || this.running < this.maxRunning) {
      this.setRunning(this.running + 1);
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.queue.indexOf(grant);
        if (i !== -1) this.queue.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(grant);
    });
  }

  private release(): void {
    const next = this.queue.shift();
    // The slot passes straight to the next waiter: the running count does not change.
    if (next) next();
    else this.setRunning(this.running - 1);
  }

  private setRunning(n: number): void {
    const now = performance.now();
    const dt = now - this.lastChange;
    if (this.running > 0) this.busyMs += dt;
    this.occupancyMs += this.running * dt;
    this.lastChange = now;
    this.running = n;
  }

  /**
   * A snapshot of the counters.
   *
   * @example
   * ```ts
   * const { busy_seconds, running, waiting } = gpu.stats();
   * ```
   */
  stats(): SchedulerStats {
    const now = performance.now();
    const dt = now - this.lastChange;
    return {
      running: this.running,
      waiting: this.queue.length,
      max_running_requests: this.maxRunning,
      busy_seconds: (this.busyMs + (this.running > 0 ? dt : 0)) / 1000,
      running_request_seconds: (this.occupancyMs + this.running * dt) / 1000,
      uptime_seconds: (now - this.startedAt) / 1000,
      ...this.counters,
      faults: { ...this.faultCounts },
    };
  }
}
