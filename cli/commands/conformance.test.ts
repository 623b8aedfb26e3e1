import { describe, expect, it } from "vitest";
import { UsageError } from "../usage-error";
import { runConformance } from "./conformance";

const CLIENT = "npx tsx examples/conformance/scripted-client.ts";
const silenced = async <T>(fn: () => Promise<T>): Promise<{ value: T; out: string }> => {
  const log = console.log;
  let out = "";
  console.log = (...a: unknown[]) => {
    out += `${a.join(" ")}\n`;
  };
  try {
    return { value: await fn(), out };
  } finally {
    console.log = log;
  }
};

describe("polar conformance with the shell harness and the scripted client", () => {
  it("reports an append-only client as one chain that honours sampling: safe to train on", async () => {
    const { value: r, out } = await silenced(() => runConformance({ harness: "shell", temperature: 0.6 }));
    expect(r.turns.length).toBe(4);
    expect(r.turns[0]!.verdict).toBe("new_chain");
    expect(r.turns.slice(1).map((t) => t.verdict)).toEqual(["extended", "template_mismatch", "extended"]);
    expect(r.chains).toBe(1);
    expect(r.honours_sampling).toBe(true);
    expect(r.streams).toBe("never");
    expect(r.rewrites_history).toBe(false);
    expect(r.compacts_history).toBe(false);
    expect(r.safe_to_train).toBe(true);
    expect(out).toMatch(/\| safe to train on \| yes \|/);
  }, 120_000);

  it("flags compaction, rewriting, streaming and ignored sampling parameters", async () => {
    const compact = await silenced(() =>
      runConformance({ harness: "shell", env: { CONFORMANCE_STYLE: "compact", CONFORMANCE_STREAM: "1" } }),
    );
    expect(compact.value.compacts_history).toBe(true);
    expect(compact.value.turns.map((t) => t.verdict)).toContain("compacted");
    expect(compact.value.streams).toBe("always");
    expect(compact.value.safe_to_train).toBe(false);

    const rewrite = await silenced(() =>
      runConformance({ harness: "shell", env: { CONFORMANCE_STYLE: "rewrite" } }),
    );
    expect(rewrite.value.rewrites_history).toBe(true);
    expect(rewrite.value.chains).toBe(2);

    const ignores = await silenced(() =>
      runConformance({ harness: "shell", command: `env -u POLAR_TEMPERATURE ${CLIENT}`, temperature: 0.6 }),
    );
    expect(ignores.value.honours_sampling).toBe(false);
    expect(ignores.value.sampling_mismatches[0]).toMatch(/temperature not sent, expected 0.6/);
    expect(ignores.value.safe_to_train).toBe(false);
  }, 240_000);

  it("names the flag for a missing or unknown harness", async () => {
    await expect(runConformance({})).rejects.toThrow(UsageError);
    await expect(runConformance({})).rejects.toThrow(/^--harness:/);
    await expect(runConformance({ harness: "nope" })).rejects.toThrow(/^--harness: .*not supported/);
  });
});
