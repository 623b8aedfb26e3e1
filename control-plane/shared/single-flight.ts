/**
 * One pass at a time over work that re-derives itself from stored state (an outbox, due
 * callbacks, the event outbox). A Durable Object's input gate opens at every `await` that leaves
 * the object (an RPC, a `fetch`), so a second event may ask for the same pass while the first one
 * awaits: running both would send the same rows twice. Instead the second asker leaves a mark and
 * returns, and the running pass looks again when it ends, so what fell due meanwhile still goes out.
 *
 * @module
 */

/**
 * What {@link SingleFlight.run} does around its passes.
 *
 * @example
 * ```ts
 * const options: FlightOptions = { repeatWhile: () => failures === 0, settle: () => armAlarm() };
 * ```
 */
export interface FlightOptions {
  /** Checked after a pass that was asked for again: false ends the run anyway (e.g. after a failure). */
  repeatWhile?: () => boolean;
  /** Runs once the run is over (also after a throw), when the next asker may already start one. */
  settle?: () => Promise<void>;
}

/**
 * A single-flight guard: at most one run of passes at a time; an ask during a run makes it pass
 * once more instead of starting another.
 *
 * @example
 * ```ts
 * const flight = new SingleFlight();
 * await flight.run(() => deliverDueRows(db), { settle: () => armAlarm() });
 * ```
 */
export class SingleFlight {
  private running = false;
  private again = false;

  /** Runs `pass` until nobody asked again meanwhile; returns at once when a run is in flight. */
  async run(pass: () => Promise<void>, options: FlightOptions = {}): Promise<void> {
    if (this.running) {
      // The running pass looks again when it ends (work that fell due meanwhile).
      this.again = true;
      return;
    }
    this.running = true;
    try {
      do {
        this.again = false;
        await pass();
      } while (this.again && (options.repeatWhile?.() ?? true));
    } finally {
      this.running = false;
      await options.settle?.();
    }
  }
}
