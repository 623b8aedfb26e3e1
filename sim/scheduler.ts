/**
 * The simulated "GPU" of the sim engine: a latency model (prefill and decode tokens/s), a limit of
 * running requests with a waiting queue (FIFO, or by request priority then arrival, as SGLang's and
 * vLLM's schedulers admit requests, with SGLang's priority preemption), an abort registry by
 * request id, seeded fault injection, and the counters benchmarks read to see how busy the engine
 * was (busy time, running/waiting, tokens, preemptions).
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

/**
 * How the waiting queue is ordered and when a running request is preempted. Off (the default):
 * FIFO, priorities ignored, no preemption.
 */
export interface PrioritySchedulingOptions {
  /** Order the waiting queue by priority, then by entry into the queue. */
  enabled: boolean;
  /** Lower values run first (vLLM; SGLang `--schedule-low-priority-values-first`); else higher first. */
  lowValuesFirst?: boolean;
  /**
   * When no slot is free, the best waiting request preempts the worst running one (by priority,
   * then the latest to enter the queue) if it is better by more than {@link preemptionThreshold}.
   */
  preemption?: boolean;
  /** SGLang `--priority-scheduling-preemption-threshold`; default 0. */
  preemptionThreshold?: number;
  /** Priority of a job that has none; default the worst there is (after every other, never preempting). */
  defaultPriority?: number;
}

/** Latency and capacity of the simulated GPU. */
export interface SchedulerOptions {
  /** Uncached prompt tokens per second; 0 = instant. */
  prefillTokensPerSecond?: number;
  /** Generated tokens per second per request; 0 = instant. */
  decodeTokensPerSecond?: number;
  /** Requests decoding at once; more wait in a queue. 0 = unlimited. */
  maxRunningRequests?: number;
  /** Order of the waiting queue and preemption; default FIFO without preemption. */
  priority?: PrioritySchedulingOptions;
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
/** How many finished request ids {@link SchedulerStats.recent_finished_rids} keeps. */
export const RECENT_FINISHED = 256;

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
  /** Running requests preempted for a better waiting one (each went back to the queue). */
  preempted_total: number;
  /** Tokens prefilled again by preempted requests when re-admitted (uncached prompt + decoded). */
  reprefill_tokens_total: number;
  faults: { errors: number; stalls: number; aborts: number };
  /**
   * The request ids of the last {@link RECENT_FINISHED} finished requests, oldest first: a client
   * sharing the engine with others waits for its own call (the proxy's rids name the session and
   * turn) instead of for `finished_total` to move, which any other client's call moves too.
   */
  recent_finished_rids: string[];
  /** How the waiting queue is ordered (see {@link PrioritySchedulingOptions}). */
  scheduling: {
    priority: boolean;
    low_values_first: boolean;
    preemption: boolean;
    preemption_threshold: number;
    /** Priority of a request without one; null: the worst there is. */
    default_priority: number | null;
  };
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
  /** The request's priority; without one, {@link PrioritySchedulingOptions.defaultPriority}. */
  priority?: number;
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

type Counters = {
  requests_total: number;
  finished_total: number;
  aborted_total: number;
  prompt_tokens_total: number;
  cached_tokens_total: number;
  generation_tokens_total: number;
  queue_seconds_total: number;
  preempted_total: number;
  reprefill_tokens_total: number;
};

/** One scheduled job, waiting or holding a running slot. */
interface Entry {
  /** Order of the waiting queue: smaller first (the priority in the configured direction, or 0). */
  key: number;
  /** When it last entered the waiting queue (arrival, or return after a preemption), as a count. */
  seq: number;
  holdsSlot: boolean;
  /** Aborted when the job is preempted; a fresh one each time it is given a slot. */
  preempt: AbortController;
  counters: Counters;
  /** Set while it waits: gives it the slot. */
  grant: (() => void) | undefined;
}

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
  private faults: Required<FaultOptions>;
  private readonly random: () => number;
  private readonly priority: Required<Omit<PrioritySchedulingOptions, "defaultPriority">> & {
    defaultPriority: number | undefined;
  };
  private readonly startedAt = performance.now();
  /** Waiting jobs, in arrival order; the next to run is picked by {@link bestWaiting}. */
  private readonly queue: Entry[] = [];
  /** Jobs holding a running slot. */
  private readonly holders = new Set<Entry>();
  private readonly active = new Map<string, AbortController>();
  private readonly recentFinished: string[] = [];
  private entries = 0;
  private running = 0;
  private lastChange = performance.now();
  private busyMs = 0;
  private occupancyMs = 0;
  private counters: Counters = {
    requests_total: 0,
    finished_total: 0,
    aborted_total: 0,
    prompt_tokens_total: 0,
    cached_tokens_total: 0,
    generation_tokens_total: 0,
    queue_seconds_total: 0,
    preempted_total: 0,
    reprefill_tokens_total: 0,
  };
  private faultCounts = { errors: 0, stalls: 0, aborts: 0 };

  constructor(options: SchedulerOptions = {}) {
    this.prefillRate = options.prefillTokensPerSecond ?? 0;
    this.decodeRate = options.decodeTokensPerSecond ?? 0;
    this.maxRunning = options.maxRunningRequests ?? 0;
    const p = options.priority;
    this.priority = {
      enabled: p?.enabled ?? false,
      lowValuesFirst: p?.lowValuesFirst ?? false,
      preemption: (p?.enabled ?? false) && (p?.preemption ?? false),
      preemptionThreshold: p?.preemptionThreshold ?? 0,
      defaultPriority: p?.defaultPriority,
    };
    this.faults = {
      errorRate: options.faults?.errorRate ?? 0,
      stallRate: options.faults?.stallRate ?? 0,
      stallMs: options.faults?.stallMs ?? 5000,
      abortRate: options.faults?.abortRate ?? 0,
    };
    this.random = prng(hash32(`${options.seed ?? 0}\u0000faults`));
  }

  /**
   * Changes the fault knobs from now on (the simulator's `POST /sim/faults`, for fault tests that
   * need bursts); unset fields keep their values. Returns the knobs in force.
   *
   * @example
   * ```ts
   * gpu.setFaults({ errorRate: 1 }); // every request 503 …
   * gpu.setFaults({ errorRate: 0 }); // … until now
   * ```
   */
  setFaults(faults: FaultOptions): Required<FaultOptions> {
    this.faults = {
      ...this.faults,
      ...Object.fromEntries(Object.entries(faults).filter(([, v]) => v !== undefined)),
    };
    return { ...this.faults };
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

  /**
   * Runs one job: waits for a slot, stalls (fault), prefills, decodes; honours aborts. A job
   * preempted for a better one goes back to the waiting queue with the tokens it decoded and, once
   * given a slot again, prefills its uncached prompt and those tokens again before decoding on.
   */
  async run(job: ScheduleJob): Promise<ScheduleOutcome> {
    if (this.active.has(job.rid)) throw new DuplicateRidError(`rid: ${job.rid} is already running`);
    const controller = new AbortController();
    const onClientAbort = () => controller.abort(new Error("Abort: the client disconnected"));
    if (job.signal?.aborted) onClientAbort();
    job.signal?.addEventListener("abort", onClientAbort, { once: true });
    this.active.set(job.rid, controller);
    const signal = controller.signal;
    let produced = 0;
    const faulty = !job.probe;
    // A probe is in no counter (SGLang sends its health generation with `log_metrics=False`): a
    // client watching `finished_total` for its own call to end must not see a health check end.
    const counters = job.probe ? { ...this.counters } : this.counters;
    const stall = faulty && this.faults.stallRate > 0 && this.random() < this.faults.stallRate;
    const abortAt =
      faulty && this.faults.abortRate > 0 && this.random() < this.faults.abortRate
        ? Math.floor(job.outputTokens / 2)
        : undefined;
    const entry: Entry = {
      key: this.keyOf(job.priority),
      seq: 0,
      holdsSlot: false,
      preempt: new AbortController(),
      counters,
      grant: undefined,
    };
    try {
      const target = abortAt ?? job.outputTokens;
      for (let residency = 0; ; residency++) {
        const queuedAt = performance.now();
        await this.acquire(entry, signal);
        counters.queue_seconds_total += (performance.now() - queuedAt) / 1000;
        const preempted = entry.preempt.signal;
        const stop = AbortSignal.any([signal, preempted]);
        try {
          stop.throwIfAborted();
          if (residency === 0 && stall) {
            this.faultCounts.stalls++;
            await sleep(this.faults.stallMs, undefined, { signal: stop });
          }
          // Preempted, its KV cache was freed: what it computed itself is prefilled again.
          const prefill = job.uncachedPromptTokens + (residency > 0 ? produced : 0);
          if (residency > 0) counters.reprefill_tokens_total += prefill;
          if (this.prefillRate > 0 && prefill > 0)
            await sleep((prefill / this.prefillRate) * 1000, undefined, { signal: stop });
          if (this.decodeRate > 0) {
            const perTick = Math.max(1, Math.round((this.decodeRate * PROGRESS_INTERVAL_MS) / 1000));
            while (produced < target) {
              const step = Math.min(perTick, target - produced);
              await sleep((step / this.decodeRate) * 1000, undefined, { signal: stop });
              produced += step;
              job.onProgress?.(produced);
            }
          } else if (produced < target) {
            produced = target;
            job.onProgress?.(produced);
          }
          break;
        } catch (error) {
          // Preempted (not aborted): back to the waiting queue, keeping what it decoded.
          if (signal.aborted || !preempted.aborted) throw error;
        }
      }
      if (abortAt !== undefined) {
        this.faultCounts.aborts++;
        counters.aborted_total++;
        return { produced, abortMessage: "simulated fault: aborted by the engine (abort_rate)" };
      }
      counters.finished_total++;
      if (!job.probe) {
        this.recentFinished.push(job.rid);
        if (this.recentFinished.length > RECENT_FINISHED) this.recentFinished.shift();
      }
      return { produced };
    } catch (error) {
      if (!signal.aborted) throw error;
      counters.aborted_total++;
      return { produced, abortMessage: (signal.reason as Error).message };
    } finally {
      counters.generation_tokens_total += produced;
      this.active.delete(job.rid);
      job.signal?.removeEventListener("abort", onClientAbort);
      if (entry.holdsSlot) this.release(entry);
    }
  }

  /** The queue order of a priority: smaller first; +Infinity for the worst priority there is. */
  private keyOf(priority: number | undefined): number {
    if (!this.priority.enabled) return 0;
    const p = priority ?? this.priority.defaultPriority;
    if (p === undefined) return Number.POSITIVE_INFINITY;
    return this.priority.lowValuesFirst ? p : -p;
  }

  /**
   * Enters the waiting queue and resolves once the job holds a running slot; an abort while
   * waiting leaves the queue.
   */
  private acquire(entry: Entry, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    entry.seq = ++this.entries;
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.queue.indexOf(entry);
        if (i !== -1) this.queue.splice(i, 1);
        entry.grant = undefined;
        reject(signal.reason);
      };
      entry.grant = () => {
        signal.removeEventListener("abort", onAbort);
        entry.grant = undefined;
        resolve();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(entry);
      this.schedule();
    });
  }

  /** The waiting job to run next: best key, then the earliest to enter the queue. */
  private bestWaiting(): Entry | undefined {
    let best: Entry | undefined;
    for (const e of this.queue) {
      if (!best || e.key < best.key || (e.key === best.key && e.seq < best.seq)) best = e;
    }
    return best;
  }

  /**
   * The running job `incoming` preempts, if any: the worst running one (by key, then the latest to
   * enter the queue, as SGLang's `preempt_to_schedule` sorts them), when `incoming` is better by
   * more than the threshold. Two jobs of the worst priority there is never preempt each other.
   */
  private victimFor(incoming: Entry): Entry | undefined {
    if (!this.priority.preemption) return undefined;
    let worst: Entry | undefined;
    for (const e of this.holders) {
      if (!worst || e.key > worst.key || (e.key === worst.key && e.seq > worst.seq)) worst = e;
    }
    if (!worst) return undefined;
    const margin = worst.key - incoming.key; // NaN for two worst-there-is priorities
    return margin > this.priority.preemptionThreshold ? worst : undefined;
  }

  /** Gives free slots to the best waiting jobs, preempting where the priorities say so. */
  private schedule(): void {
    for (;;) {
      const next = this.bestWaiting();
      if (!next) return;
      if (this.maxRunning === 0 || this.running < this.maxRunning) {
        this.setRunning(this.running + 1);
      } else {
        const victim = this.victimFor(next);
        if (!victim) return;
        // The victim's slot passes straight to `next`: the running count does not change.
        victim.holdsSlot = false;
        this.holders.delete(victim);
        victim.counters.preempted_total++;
        victim.preempt.abort(new Error("preempted by a request of higher priority"));
      }
      this.give(next);
    }
  }

  /** Moves a waiting job into a running slot (already counted) and wakes it. */
  private give(entry: Entry): void {
    this.queue.splice(this.queue.indexOf(entry), 1);
    entry.holdsSlot = true;
    entry.preempt = new AbortController();
    this.holders.add(entry);
    entry.grant?.();
  }

  private release(entry: Entry): void {
    entry.holdsSlot = false;
    this.holders.delete(entry);
    const next = this.bestWaiting();
    // The slot passes straight to the next waiter: the running count does not change.
    if (next) this.give(next);
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
      recent_finished_rids: [...this.recentFinished],
      scheduling: {
        priority: this.priority.enabled,
        low_values_first: this.priority.lowValuesFirst,
        preemption: this.priority.preemption,
        preemption_threshold: this.priority.preemptionThreshold,
        default_priority: this.priority.defaultPriority ?? null,
      },
    };
  }
}
