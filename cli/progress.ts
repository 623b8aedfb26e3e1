/**
 * The progress of `polar submit --wait`: sessions done out of the batch's total, the mean reward so
 * far and the errors. On a terminal it is a live bar (cli-progress) redrawn in place; anywhere else
 * (a pipe, a CI log) one plain line per finished session, since a redrawn bar would leave a
 * screenful of escape codes there.
 *
 * @module
 */
import { Presets, SingleBar } from "cli-progress";
import type { SessionResult } from "../protocol";

/** What the progress reads of a finished session's result. */
export type Finished = Pick<SessionResult, "session_id" | "status" | "reward" | "error">;

/** The numbers the progress shows. */
export interface ProgressStats {
  done: number;
  total: number;
  /** Mean of the rewards of the finished sessions that have one; null before the first. */
  meanReward: number | null;
  /** Finished sessions that ended with an error (any `error.kind`). */
  errors: number;
}

/**
 * Folds one more result into the stats.
 *
 * @example
 * ```ts
 * let s: ProgressStats = { done: 0, total: 4, meanReward: null, errors: 0 };
 * s = addResult(s, result, 0); // rewarded: 0 so far
 * ```
 */
export function addResult(stats: ProgressStats, result: Finished, rewarded: number): ProgressStats {
  const meanReward =
    result.reward === null
      ? stats.meanReward
      : ((stats.meanReward ?? 0) * rewarded + result.reward) / (rewarded + 1);
  return {
    done: stats.done + 1,
    total: stats.total,
    meanReward,
    errors: stats.errors + (result.error ? 1 : 0),
  };
}

const reward = (r: number | null) => (r === null ? "-" : r.toFixed(2));

/**
 * The plain line printed for a finished session when the output is not a terminal.
 *
 * @example
 * ```ts
 * plainLine(stats, result); // "3/4 done, mean reward 0.67, 0 errors; b.0.2 COMPLETED, reward 1.00"
 * ```
 */
export function plainLine(stats: ProgressStats, result: Finished): string {
  // The status is followed by a comma, so the line never reads as a row of the results table.
  const error = result.error ? ` (${result.error.kind})` : "";
  const what = `${result.session_id} ${result.status}${error}, reward ${reward(result.reward)}`;
  return `${stats.done}/${stats.total} done, mean reward ${reward(stats.meanReward)}, ${stats.errors} errors; ${what}`;
}

/**
 * The live progress of one batch.
 *
 * @example
 * ```ts
 * const progress = new SubmitProgress(created.sessions);
 * for await (const { result } of client.streamResults(id)) progress.add(result);
 * progress.stop();
 * ```
 */
export class SubmitProgress {
  private stats: ProgressStats;
  private rewarded = 0;
  private readonly bar: SingleBar | null;

  constructor(
    total: number,
    private readonly out: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout,
  ) {
    this.stats = { done: 0, total, meanReward: null, errors: 0 };
    this.bar = out.isTTY
      ? new SingleBar(
          {
            format: "{bar} {value}/{total} sessions | mean reward {reward} | errors {errors}",
            stream: out as NodeJS.WriteStream,
            hideCursor: true,
            clearOnComplete: false,
          },
          Presets.shades_classic,
        )
      : null;
    this.bar?.start(total, 0, { reward: "-", errors: 0 });
  }

  /** The numbers so far. */
  get current(): ProgressStats {
    return this.stats;
  }

  /** Counts a finished session and redraws (or prints its line). */
  add(result: Finished): void {
    this.stats = addResult(this.stats, result, this.rewarded);
    if (result.reward !== null) this.rewarded += 1;
    if (this.bar)
      this.bar.update(this.stats.done, { reward: reward(this.stats.meanReward), errors: this.stats.errors });
    else this.out.write(`${plainLine(this.stats, result)}\n`);
  }

  /** Ends the bar (its last state stays on screen). */
  stop(): void {
    this.bar?.stop();
  }
}
