import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { DOCUMENT_PATH, documentText, SCHEMA_PATH, typesFromDocument } from "./codegen";

// control-plane/openapi.test.ts checks that this file is what the Worker serves today.
const document = JSON.parse(readFileSync(DOCUMENT_PATH, "utf8")) as {
  paths: Record<string, Record<string, { operationId?: string }>>;
};
const scratch = mkdtempSync(join(tmpdir(), "polar-openapi-lint-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; message: string; location: Array<{ pointer: string }> }>;
}

/** Redocly's linter with the repository's redocly.yaml, offline: no telemetry, no update check. */
async function lint(file: string): Promise<LintReport> {
  const run = await execa(
    join(REPO_ROOT, "node_modules", ".bin", "redocly"),
    ["lint", file, "--format", "json"],
    {
      cwd: REPO_ROOT,
      reject: false,
      env: { REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" },
    },
  );
  try {
    return JSON.parse(run.stdout) as LintReport;
  } catch {
    throw new Error(`redocly lint printed no report (exit ${run.exitCode}):\n${run.stdout}\n${run.stderr}`);
  }
}

describe("the OpenAPI document as a contract", () => {
  it("passes Redocly's linter with no error and no warning", async () => {
    const report = await lint(DOCUMENT_PATH);
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it("makes a missing operationId an error of the linter", async () => {
    const broken = structuredClone(document);
    delete broken.paths["/v1/batches"]!.get!.operationId;
    const file = join(scratch, "no-id.json");
    writeFileSync(file, documentText(broken));
    const report = await lint(file);
    expect(report.totals.errors).toBeGreaterThan(0);
    expect(report.problems.map((p) => p.ruleId)).toContain("operation-operationId");
  }, 60_000);

  it("has checked-in types that are what openapi-typescript generates from it today", async () => {
    const generated = await typesFromDocument(document);
    // On a mismatch: `npm run gen:api` regenerates both files from the Worker.
    expect(
      generated === readFileSync(SCHEMA_PATH, "utf8"),
      "src/schema.ts is stale: run npm run gen:api",
    ).toBe(true);
    expect(generated).toContain('"/v1/batches/{id}/results"');
  });
});
