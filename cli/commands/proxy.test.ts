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

describe("polar proxy token-mode flags", () => {
  const sglang = { ...base, engine: "sglang" };
  it("accepts --engine sglang with its flags and refuses them elsewhere, naming the flag", () => {
    expect(
      proxyOptionsFrom(
        {
          ...sglang,
          tokenizerPath: "models/qwen3",
          toolCallParser: "qwen3_coder",
          reasoningParser: "none",
          contextLength: "32768",
          delegateParsing: true,
          onTemplateMismatch: "new_chain",
        },
        "t",
      ),
    ).toMatchObject({
      engine: "sglang",
      tokenizerPath: "models/qwen3",
      toolCallParser: "qwen3_coder",
      reasoningParser: "none",
      contextLength: 32768,
      delegateParsing: true,
      onTemplateMismatch: "new_chain",
    });
    expect(() => proxyOptionsFrom({ ...sglang, contextLength: "big" }, "t")).toThrow(/^--context-length:/);
    expect(() => proxyOptionsFrom({ ...sglang, onTemplateMismatch: "drop" }, "t")).toThrow(
      /^--on-template-mismatch:/,
    );
    expect(() => proxyOptionsFrom({ ...base, toolCallParser: "qwen3" }, "t")).toThrow(/^--tool-call-parser:/);
  });

  it("runs --engine sglang as a process and names a bad --tokenizer-path", async () => {
    const run = (engineUrl: string, extra: string) =>
      execa(
        "npx",
        [
          "tsx",
          "-e",
          `import("./cli/commands/proxy.ts").then((m) => m.runProxy({ engine: "sglang", engineUrl: "${engineUrl}", model: "Qwen/Qwen3-0.6B", port: 0, host: "127.0.0.1"${extra} })).catch((e) => { console.error(e.message); process.exit(2); })`,
        ],
        { env: { POLAR_ADMIN_TOKEN: "tok" }, reject: false },
      );
    const bad = await run("http://127.0.0.1:1", ', tokenizerPath: "no-such-folder"');
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/--tokenizer-path: .*tokenizer\.json/);

    const sim = await startSimEngine();
    const child = run(sim.url, "");
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
      const { key } = (await (
        await fetch(`${url}/sessions`, { method: "POST", headers: { authorization: "Bearer tok" } })
      ).json()) as { key: string };
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "What is 2 + 2?" }] }),
      });
      expect(res.status).toBe(200);
      const { completions } = (await (
        await fetch(`${url}/sessions/${key}/completions`, { headers: { authorization: "Bearer tok" } })
      ).json()) as { completions: Array<{ engine: string; metadata: { bridge: { verdict: string } } }> };
      expect(completions.map((c) => [c.engine, c.metadata.bridge.verdict])).toEqual([
        ["sglang", "new_chain"],
      ]);
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      await sim.close();
    }
  }, 60_000);
});
