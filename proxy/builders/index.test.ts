import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CompletionRecord, JsonObject, Trajectory } from "../../protocol";
import { UnknownBuilderError } from "../errors";
import { defaultBuilderFor, getBuilder, loadBuilder, registerBuilder } from "./index";

const ctx = { session_id: "s-1", task_id: "t-1", config: { k: 2 } };
// The loaded builders only count records: any record will do.
const records = [{ completion_id: "cmp_1" }, { completion_id: "cmp_2" }] as unknown as CompletionRecord[];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "polar-builders-index-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

/** Writes an ES module into this run's own folder (a fresh path, so no earlier import is reused). */
async function moduleFile(name: string, source: string): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, source);
  return file;
}

/** A module source whose builders report who built (`by`), the record count and the task. */
const report = (by: string, extra = "") =>
  `({ status: "COMPLETED", traces: [], metadata: { by: ${JSON.stringify(by)}, n: records.length, task: ctx.task_id${extra} }, error: null })`;

describe("defaultBuilderFor", () => {
  it("is conversation for token mode (sglang) and per_request for chat-completions engines", () => {
    expect(defaultBuilderFor("sglang")).toBe("conversation");
    expect(defaultBuilderFor("sglang-openai")).toBe("per_request");
    expect(defaultBuilderFor("vllm")).toBe("per_request");
  });
});

describe("registerBuilder", () => {
  it("makes an in-process builder available to getBuilder and loadBuilder under its name", async () => {
    const name = "index-test-registered";
    expect(() => getBuilder(name)).toThrow(UnknownBuilderError);
    const builder = (rs: readonly CompletionRecord[]): Trajectory => ({
      status: "COMPLETED",
      traces: [],
      metadata: { n: rs.length },
      error: null,
    });
    registerBuilder(name, builder);
    expect(getBuilder(name)).toBe(builder);
    expect(await loadBuilder(name)).toBe(builder);
  });
});

describe("loadBuilder", () => {
  it("loads a bare module path's default export, and the default export of 'file:' with no export name", async () => {
    const file = await moduleFile(
      "default.mjs",
      `export default function (records, ctx) { return ${report("default")}; }
       export const other = (records, ctx) => ${report("other")};`,
    );
    for (const spec of [file, `${file}:`]) {
      const build = await loadBuilder(spec);
      expect(build(records, ctx).metadata).toEqual({ by: "default", n: 2, task: "t-1" });
    }
  });

  it("loads an object export with a build method, called on the object with the records and the context", async () => {
    const file = await moduleFile(
      "object.mjs",
      `export const counter = {
         name: "counter",
         build(records, ctx) { return ${report("object", ", self: this.name")}; },
       };`,
    );
    const build = await loadBuilder(`${file}:counter`);
    expect(build(records, ctx).metadata).toEqual({ by: "object", n: 2, task: "t-1", self: "counter" });
    expect(getBuilder(`${file}:counter`)).toBe(build);
  });

  it("constructs a class export with the task's config for each build, from a path relative to the working directory", async () => {
    const file = await moduleFile(
      "class.mjs",
      `export class Scaled {
         constructor(config) { this.k = config.k; }
         build(records, ctx) { return ${report("class", ", k: this.k")}; }
       }`,
    );
    const relative = path.relative(process.cwd(), file);
    const build = await loadBuilder(`${relative.startsWith(".") ? relative : `./${relative}`}:Scaled`);
    expect(build(records, ctx).metadata).toEqual({ by: "class", n: 2, task: "t-1", k: 2 });
    const config: JsonObject = { k: 5 };
    expect(build(records, { ...ctx, config }).metadata).toMatchObject({ k: 5 });
  });

  it("refuses an export that is no builder (a value, an object whose build is not a function, a missing name) and registers nothing", async () => {
    const file = await moduleFile(
      "not-builders.mjs",
      `export const count = 3;
       export const half = { build: "not a function" };`,
    );
    for (const name of ["count", "half", "missing"]) {
      const spec = `${file}:${name}`;
      await expect(loadBuilder(spec)).rejects.toThrow(UnknownBuilderError);
      expect(() => getBuilder(spec)).toThrow(UnknownBuilderError);
    }
  });
});
