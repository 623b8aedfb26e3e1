import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { type Finished, SubmitProgress } from "./progress";

const done = (i: number, reward: number | null, error = false): Finished => ({
  session_id: `b.0.${i}`,
  status: error ? "ERROR" : "COMPLETED",
  reward,
  error: error ? { kind: "agent", message: "exit 1" } : null,
});

/** A stream that collects what is written; `tty` makes it claim to be a terminal. */
function sink(tty: boolean) {
  const stream = Object.assign(new PassThrough(), { isTTY: tty, columns: 120 });
  const chunks: string[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c.toString()));
  return { stream, text: () => chunks.join("") };
}

describe("SubmitProgress", () => {
  it("prints one plain line per session when the output is no terminal", () => {
    const out = sink(false);
    const p = new SubmitProgress(3, out.stream);
    p.add(done(0, 1));
    p.add(done(1, null, true));
    p.add(done(2, 0));
    p.stop();
    expect(out.text().split("\n").filter(Boolean)).toEqual([
      "1/3 done, mean reward 1.00, 0 errors; b.0.0 COMPLETED, reward 1.00",
      "2/3 done, mean reward 1.00, 1 errors; b.0.1 ERROR (agent), reward -",
      "3/3 done, mean reward 0.50, 1 errors; b.0.2 COMPLETED, reward 0.00",
    ]);
    expect(out.text()).not.toContain("\u001b[");
  });

  it("draws a live bar on a terminal: done/total, mean reward, errors", () => {
    const out = sink(true);
    const p = new SubmitProgress(4, out.stream);
    p.add(done(0, 1));
    p.add(done(1, 0, true));
    p.stop();
    expect(p.current).toEqual({ done: 2, total: 4, meanReward: 0.5, errors: 1 });
    // cli-progress redraws in place with cursor escapes; its last frame has the final numbers.
    expect(out.text()).toContain("\u001b[");
    expect(out.text()).toContain("2/4 sessions | mean reward 0.50 | errors 1");
    expect(out.text()).not.toContain("done, mean reward");
  });
});
