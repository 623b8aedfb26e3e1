import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Trace } from "../../protocol";
import { UsageError } from "../usage-error";
import { maskRuns, readTrajectoryFile } from "./inspect";

const trace: Trace = {
  prompt_ids: [1, 2],
  response_ids: [10, 11, 12, 13, 14],
  loss_mask: [1, 1, 0, 0, 1],
  response_logprobs: [-0.5, -0.25, 0, 0, -1],
  prompt_messages: [],
  response_messages: [],
  tools: null,
  finish_reason: "stop",
  reward: 1,
  metadata: {},
};

describe("inspect", () => {
  it("splits a response into runs of equal loss mask, keeping logprobs aligned", () => {
    expect(maskRuns(trace)).toEqual([
      { mask: 1, ids: [10, 11], logprobs: [-0.5, -0.25] },
      { mask: 0, ids: [12, 13], logprobs: [0, 0] },
      { mask: 1, ids: [14], logprobs: [-1] },
    ]);
    expect(maskRuns({ ...trace, response_logprobs: null }).map((r) => r.logprobs)).toEqual([
      null,
      null,
      null,
    ]);
  });

  it("reads a bare trajectory and refuses other JSON with the file named", () => {
    const dir = mkdtempSync(join(tmpdir(), "polar-inspect-"));
    const good = join(dir, "t.json");
    writeFileSync(good, JSON.stringify({ status: "COMPLETED", traces: [trace], metadata: {}, error: null }));
    expect(readTrajectoryFile(good)).toMatchObject({ result: null, trajectory: { traces: [trace] } });
    const bad = join(dir, "x.json");
    writeFileSync(bad, JSON.stringify({ hello: 1 }));
    expect(() => readTrajectoryFile(bad)).toThrow(UsageError);
    expect(() => readTrajectoryFile(bad)).toThrow(/x\.json: neither a session result nor a trajectory/);
  });
});
