/**
 * The gateway's stage pools (upstream §1.5): INIT (`max_init` workers, priority queue), the READY
 * buffer (at most `max_run` prepared runtimes waiting — the warm pool), RUN (`max_run`) and
 * POST_RUN (`max_postrun`), plus the credit rule that follows them.
 *
 * A session that finished INIT takes a READY slot before it gives its INIT slot back, so READY
 * can never exceed its target: when the buffer is full, finished INIT work waits in place.
 *
 * @module
 */
import type { GatewayCapacity, GatewayStage, StageMetrics } from "../protocol";
import { Semaphore } from "./semaphore";

/**
 * @example
 * ```ts
 * const pools = new StagePools({ max_init: 4, max_run: 2, max_postrun: 4 });
 * await pools.of("INITIALIZING").acquire(signal, priority);
 * ```
 */
export class StagePools {
  /** One pool per stage, named by the stage it admits to. */
  private readonly slots: Record<GatewayStage, Semaphore>;

  constructor(readonly capacity: GatewayCapacity) {
    this.slots = {
      INITIALIZING: new Semaphore(capacity.max_init),
      READY: new Semaphore(capacity.max_run),
      RUNNING: new Semaphore(capacity.max_run),
      POST_RUN: new Semaphore(capacity.max_postrun),
    };
  }

  /**
   * The pool of one stage.
   *
   * @example
   * ```ts
   * pools.of("READY").release();
   * ```
   */
  of(stage: GatewayStage): Semaphore {
    return this.slots[stage];
  }

  /** Sessions per stage, as reported with credit and progress. */
  metrics(): StageMetrics {
    return {
      init_queue_depth: this.slots.INITIALIZING.waiting,
      init_inflight: this.slots.INITIALIZING.inUse,
      ready_depth: this.slots.READY.inUse,
      run_inflight: this.slots.RUNNING.inUse,
      postrun_queue_depth: this.slots.POST_RUN.waiting,
      postrun_inflight: this.slots.POST_RUN.inUse,
    };
  }

  /** Sessions that may be held before RUN: every INIT slot plus a full READY buffer. */
  get intakeCapacity(): number {
    return this.capacity.max_init + this.capacity.max_run;
  }

  /** Sessions held before RUN (queued for INIT, in INIT, or READY). */
  get intakeUsed(): number {
    return this.slots.INITIALIZING.waiting + this.slots.INITIALIZING.inUse + this.slots.READY.inUse;
  }

  /**
   * Sessions the gateway can take now: free INIT slots plus the READY gap (upstream's credit),
   * none while post-run is backed up to twice its pool (upstream refuses work then too).
   */
  creditAvailable(): number {
    if (this.slots.POST_RUN.waiting >= 2 * this.capacity.max_postrun) return 0;
    return Math.max(0, this.intakeCapacity - this.intakeUsed);
  }
}
