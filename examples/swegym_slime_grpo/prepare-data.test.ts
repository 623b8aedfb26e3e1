/**
 * examples/swegym_slime_grpo/prepare-data.ts as a user runs it (a real tsx process): SWE-Gym rows
 * become slime's prompt rows with the instance's image and the raw row for the evaluator, and bad
 * input stops it with exit code 2 and a message naming the flag, line or field.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PromptRow, swegymImageId } from "./prepare-data";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const INSTANCES = path.join(here, "instances.jsonl");

async function cli(args: string[]): Promise<{ code: number; stderr: string }> {
  try {
    const r = await run(process.execPath, ["--import", "tsx", path.join(here, "prepare-data.ts"), ...args]);
    return { code: 0, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

describe("prepare-data", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "polar-swegym-prep-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("names images as SWE-Gym does", () => {
    expect(swegymImageId("getmoto__moto-5752")).toBe("getmoto_s_moto-5752");
    expect(swegymImageId("Project-MONAI__MONAI-3403")).toBe("project-monai_s_monai-3403");
  });

  it("writes one {prompt, label, metadata} row per instance, the raw row in metadata.instance", {
    timeout: 30_000,
  }, async () => {
    const out = path.join(dir, "prompts.jsonl");
    const r = await cli(["--instances", INSTANCES, "--out", out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("2 prompts");
    const raw = readFileSync(INSTANCES, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const rows = readFileSync(out, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as PromptRow);
    expect(rows.map((p) => p.label)).toEqual(raw.map((x) => x.instance_id));
    expect(rows[0]!.prompt).toBe(raw[0].problem_statement.trim());
    expect(rows[0]!.metadata).toMatchObject({
      dataset: "SWE-Gym",
      instance_id: "getmoto__moto-99901",
      repo: "getmoto/moto",
      version: "5.0",
      image: "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-99901:latest",
    });
    expect(rows[1]!.metadata.instance).toEqual(raw[1]);
  });

  it("keeps only the instances asked for, with an image template of its own", {
    timeout: 30_000,
  }, async () => {
    const out = path.join(dir, "one.jsonl");
    const r = await cli([
      "--instances",
      INSTANCES,
      "--out",
      out,
      "--instance-id",
      "python__mypy-99902",
      "--image-template",
      "localhost/swegym:{instance_id}",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const rows = readFileSync(out, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as PromptRow);
    expect(rows.map((p) => p.metadata.image)).toEqual(["localhost/swegym:python__mypy-99902"]);
  });

  it("stops with exit code 2 naming the flag, line or field of bad input", { timeout: 90_000 }, async () => {
    const out = path.join(dir, "bad.jsonl");
    expect(await cli(["--instances", path.join(dir, "missing.jsonl"), "--out", out])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--instances: cannot read"),
    });
    expect(
      await cli(["--instances", INSTANCES, "--out", out, "--image-template", "no-placeholder"]),
    ).toMatchObject({ code: 2, stderr: expect.stringContaining("--image-template: must contain {id}") });
    expect(
      await cli(["--instances", INSTANCES, "--out", out, "--instance-id", "nope__nope-1"]),
    ).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--instance-id: not in"),
    });
    const broken = path.join(dir, "broken.jsonl");
    await writeFile(broken, `${JSON.stringify({ instance_id: "a__b-1", repo: "a/b" })}\n`);
    const r = await cli(["--instances", broken, "--out", out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/broken\.jsonl:1: \w+/);
    expect((await cli(["--instances", INSTANCES, "--out", out, "--limit", "0"])).code).toBe(2);
  });
});
