import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EvalContext } from "../../gateway-agent/evaluator";
import { countBrightBlobs, decodePng, readImageHeader } from "../../sim/image-decode";
import { countStars } from "./evaluator.mjs";
import { MAX_STARS, starImage } from "./stars.mjs";

const run = promisify(execFile);
const here = import.meta.dirname;
let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "polar-stars-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("stars.mjs", () => {
  it("writes a PNG with exactly N stars, the same bytes for the same options", async () => {
    const out = path.join(scratch, "s.png");
    await run(process.execPath, [path.join(here, "stars.mjs"), "--stars", "5", "--seed", "7", "--out", out]);
    const png = await readFile(out);
    expect(readImageHeader(png)).toEqual({ format: "png", width: 160, height: 120 });
    expect(countBrightBlobs(decodePng(png))).toBe(5);
    expect(png.equals(starImage({ stars: 5, seed: 7 }).png)).toBe(true);
    expect(png.equals(starImage({ stars: 5, seed: 8 }).png)).toBe(false);
  });

  it("refuses bad flags naming them", async () => {
    const fail = (args: string[]) =>
      run(process.execPath, [path.join(here, "stars.mjs"), ...args]).then(
        () => "",
        (e: { stderr: string }) => e.stderr,
      );
    expect(await fail(["--stars", "x", "--out", "a.png"])).toMatch(/--stars: must be a non-negative integer/);
    expect(await fail(["--stars", "2"])).toMatch(/--out: required/);
    expect(await fail(["--sars", "2"])).toMatch(/usage/);
    expect(() => starImage({ stars: MAX_STARS + 1 })).toThrow(/stars: must be an integer/);
  });
});

describe("evaluator countStars", () => {
  const ctx = (content: unknown, expected: unknown = 4) =>
    ({
      config: { expected_stars: expected },
      trajectory: {
        status: "COMPLETED",
        metadata: {},
        traces: [{ response_messages: [{ role: "assistant", content }] }],
      },
    }) as unknown as EvalContext;

  it("rewards the exact count, read as the last integer of the final answer", async () => {
    expect(await countStars(ctx("4"))).toMatchObject({ outcome_reward: 1, metadata: { answer: 4 } });
    expect(await countStars(ctx("There are 4 stars in the image."))).toMatchObject({ outcome_reward: 1 });
    expect(await countStars(ctx([{ type: "text", text: "5" }]))).toMatchObject({
      outcome_reward: 0,
      metadata: { expected_stars: 4, answer: 5 },
    });
    expect(await countStars(ctx("no idea"))).toMatchObject({ outcome_reward: 0, metadata: { answer: null } });
  });

  it("names a bad config key", async () => {
    await expect(countStars(ctx("4", "four"))).rejects.toThrow(/evaluator\.config\.expected_stars/);
  });
});
