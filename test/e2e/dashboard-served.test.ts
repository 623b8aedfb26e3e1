/**
 * The Worker serves the dashboard as static assets at `/` while every API route keeps answering
 * JSON, and an unknown path under /v1/ still gets the JSON 404 (`wrangler.toml` `[assets]`).
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webBuildStale } from "../../cli/web-build";
import { type ControlPlaneDev, startControlPlaneDev } from "../../cli/wrangler-dev";

const tokens = { trainer: "t-dash", gateway: "g-dash", admin: "a-dash" };
let cp: ControlPlaneDev;
let state: string;

beforeAll(async () => {
  state = mkdtempSync(join(tmpdir(), "polar-dash-"));
  cp = await startControlPlaneDev({ persistTo: state, tokens });
});
afterAll(async () => {
  await cp?.stop();
  rmSync(state, { recursive: true, force: true });
});

describe("dashboard served by the Worker", () => {
  it("was built before wrangler dev started, and / is its page with its script and styles", async () => {
    expect(webBuildStale()).toBe(false);
    const page = await fetch(`${cp.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const html = await page.text();
    expect(html).toContain('<div id="app"></div>');
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const js = await fetch(`${cp.url}${script}`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toContain("javascript");
    expect(await js.text()).toContain("/v1/events");
  });

  it("keeps the API on JSON: routes, auth errors, and the 404 of an unknown /v1/ path", async () => {
    const health = await fetch(`${cp.url}/health`);
    expect(health.headers.get("content-type")).toContain("application/json");
    const unknown = await fetch(`${cp.url}/v1/no-such-route`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: { code: "not_found", message: "no route for GET /v1/no-such-route" },
    });
    // A path that looks like an asset but is under /v1/ goes to the Worker too.
    const asAsset = await fetch(`${cp.url}/v1/index.html`);
    expect(asAsset.status).toBe(404);
    expect(asAsset.headers.get("content-type")).toContain("application/json");
    const list = await fetch(`${cp.url}/v1/batches`, {
      headers: { authorization: `Bearer ${tokens.trainer}` },
    });
    expect(list.status).toBe(200);
    expect(await list.json()).toMatchObject({ batches: [] });
    const other = await fetch(`${cp.url}/no-such-page`);
    expect(other.status).toBe(404);
    expect(other.headers.get("content-type")).toContain("application/json");
  });
});
