import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "../../sim/server";
import { UsageError } from "../usage-error";
import { proxyOptionsFrom } from "./proxy";

const base = {
  engine: "sglang-openai",
  engineUrl: "http://127.0.0.1:1",
  model: "m",
  port: 0,
  host: "127.0.0.1",
};

describe("polar proxy flags", () => {
  it("names the offending flag", () => {
    expect(() => proxyOptionsFrom({ ...base, engine: "tgi" }, "t")).toThrow(/^--engine:/);
    expect(() => proxyOptionsFrom({ ...base, engineUrl: "" }, "t")).toThrow(/^--engine-url:/);
    expect(() => proxyOptionsFrom({ ...base, engineUrl: "ftp://x" }, "t")).toThrow(/^--engine-url:/);
    expect(() => proxyOptionsFrom(base, undefined)).toThrow(UsageError);
    expect(proxyOptionsFrom({ ...base, engineUrl: "http://a:1, http://b:2" }, "t").engineUrls).toEqual([
      "http://a:1",
      "http://b:2",
    ]);
  });
});

describe("polar proxy as a process", () => {
  let sim: SimEngineHandle;
  beforeAll(async () => {
    sim = await startSimEngine();
  });
  afterAll(async () => sim.close());

  it("serves sessions created over HTTP", async () => {
    const child = execa(
      "npx",
      [
        "tsx",
        "-e",
        `import("./cli/commands/proxy.ts").then((m) => m.runProxy({ engine: "sglang-openai", engineUrl: "${sim.url}", model: "Qwen/Qwen3-0.6B", port: 0, host: "127.0.0.1" }))`,
      ],
      { env: { POLAR_ADMIN_TOKEN: "tok" }, reject: false },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout!.on("data", (d: Buffer) => {
          out += d.toString();
          const m = /listening at (http:\/\/\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once("exit", () => reject(new Error(`proxy exited: ${out}`)));
      });
      const created = (await (
        await fetch(`${url}/sessions`, { method: "POST", headers: { authorization: "Bearer tok" } })
      ).json()) as { key: string };
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${created.key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "What is 2 + 2?" }] }),
      });
      expect(res.status).toBe(200);
      const recs = (await (
        await fetch(`${url}/sessions/${created.key}/completions`, {
          headers: { authorization: "Bearer tok" },
        })
      ).json()) as { completions: unknown[] };
      expect(recs.completions).toHaveLength(1);
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    }
  }, 60_000);
});
