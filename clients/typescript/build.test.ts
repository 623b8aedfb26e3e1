import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { PACKAGE_DIR } from "./codegen";

type Built = typeof import("./src/index");
const out = mkdtempSync(join(tmpdir(), "polar-client-build-"));
let built: Built;

beforeAll(async () => {
  // The package's own build (npm run build in clients/typescript), into a scratch folder.
  await execa(join(REPO_ROOT, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.json", "--outDir", out], {
    cwd: PACKAGE_DIR,
  });
  built = (await import(pathToFileURL(join(out, "index.js")).href)) as Built;
}, 60_000);
afterAll(() => rmSync(out, { recursive: true, force: true }));

const answer = (status: number, error?: unknown, data?: unknown) =>
  Promise.resolve({ data, error, response: new Response(null, { status }) });

describe("the built client package", () => {
  it("builds to ES modules with declarations", async () => {
    expect(typeof built.createPolarClient).toBe("function");
    const polar = built.createPolarClient({ baseUrl: "http://127.0.0.1:8787/", token: "t" });
    expect(polar.baseUrl).toBe("http://127.0.0.1:8787");
    expect(typeof polar.api.GET).toBe("function");
  });

  it("maps an {error:{code,message}} answer to PolarApiError, and returns a 2xx body", async () => {
    const body = { error: { code: "not_found", message: "unknown batch 'b'", details: { field: "id" } } };
    const err = await built.unwrap(answer(404, body)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(built.PolarApiError);
    expect(err).toMatchObject({ status: 404, code: "not_found", details: { field: "id" } });
    expect((err as Error).message).toBe("404 not_found: unknown batch 'b'");
    const plain = await built.unwrap(answer(502, "Bad Gateway")).catch((e: unknown) => e);
    expect(plain).toMatchObject({ status: 502, code: "http_error", message: "502 http_error: Bad Gateway" });
    expect(await built.unwrap(answer(200, undefined, { ok: 1 }))).toEqual({ ok: 1 });
  });
});
