import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGenerateDouble } from "../../proxy/testing/generate-double";
import { type SimEngineHandle, startSimEngine } from "../../sim/server";
import { descendants, waitGone } from "../../test/support/process-tree";
import { MISTRAL_LIKE_TEMPLATE, modelFolderWith } from "../../tokenizer/test-folder";
import { UsageError } from "../usage-error";
import { REPO_ROOT } from "../wrangler-dev";
import { proxyOptionsFrom, runProxy } from "./proxy";

/**
 * `polar proxy FLAGS` as one process (node with the CLI's own entry point): SIGTERM reaches the
 * proxy itself, where `npx tsx` would leave its child running once the wrapper is killed.
 */
const polarProxy = (flags: string[]) =>
  execa(process.execPath, [path.join(REPO_ROOT, "bin", "polar.mjs"), "proxy", ...flags], {
    env: { POLAR_ADMIN_TOKEN: "tok" },
    reject: false,
  });
const FLAGS = ["--model", "Qwen/Qwen3-0.6B", "--port", "0", "--host", "127.0.0.1"];

/** SIGTERM to the proxy; it and every process it started must be gone (none left holding a port). */
async function stop(child: ReturnType<typeof polarProxy>): Promise<void> {
  const tree = [child.pid!, ...descendants(child.pid!).map((p) => p.pid)];
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await exited;
  expect(await waitGone(tree, 10_000)).toEqual([]);
}

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

  it("takes the router's policy (it does not report it) only with --router-url, among its names", () => {
    const router = { ...base, routerUrl: "http://r:1" };
    expect(proxyOptionsFrom({ ...router, routerPolicy: "consistent_hashing" }, "t").routerPolicy).toBe(
      "consistent_hashing",
    );
    expect(() => proxyOptionsFrom({ ...router, routerPolicy: "sticky" }, "t")).toThrow(/^--router-policy:/);
    expect(() => proxyOptionsFrom({ ...base, routerPolicy: "manual" }, "t")).toThrow(
      /only applies with --router-url/,
    );
  });
});

describe("polar proxy as a process", () => {
  let sim: SimEngineHandle;
  beforeAll(async () => {
    sim = await startSimEngine();
  });
  afterAll(async () => sim.close());

  it("serves sessions created over HTTP, and its metrics on /metrics", async () => {
    const child = polarProxy(["--engine", "sglang-openai", "--engine-url", sim.url, ...FLAGS]);
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
      // Standalone, the proxy serves its own Prometheus families.
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toContain('polar_proxy_requests_total{api="openai_chat",status="200"} 1');
      expect(metrics).toContain('polar_proxy_engine_call_seconds_count{engine="sglang-openai"} 1');
      expect(metrics).toContain("# TYPE process_cpu_user_seconds_total counter");
    } finally {
      await stop(child);
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
    expect(proxyOptionsFrom({ ...sglang, routedExperts: "48:8" }, "t")).toMatchObject({
      routedExperts: { layers: 48, topK: 8 },
    });
    expect(() => proxyOptionsFrom({ ...sglang, routedExperts: "48" }, "t")).toThrow(
      /^--routed-experts: '48' is not LAYERS:TOP_K/,
    );
    expect(() => proxyOptionsFrom({ ...sglang, routedExperts: "0:8" }, "t")).toThrow(/^--routed-experts:/);
    expect(() => proxyOptionsFrom({ ...base, routedExperts: "48:8" }, "t")).toThrow(
      /^--routed-experts: only applies to --engine sglang/,
    );
  });

  it("runs --engine sglang as a process and names a bad --tokenizer-path", async () => {
    const run = (engineUrl: string, extra: string[]) =>
      polarProxy(["--engine", "sglang", "--engine-url", engineUrl, ...FLAGS, ...extra]);
    const bad = await run("http://127.0.0.1:1", ["--tokenizer-path", "no-such-folder"]);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/--tokenizer-path: .*tokenizer\.json/);

    const sim = await startSimEngine();
    const child = run(sim.url, []);
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
      await stop(child);
      await sim.close();
    }
  }, 60_000);
});

describe("polar proxy with any model folder (--tokenizer-path DIR)", () => {
  const sglang = { ...base, engine: "sglang", model: "m" };

  it("a template feature the renderer lacks fails at start, naming the flag, the feature and the file", async () => {
    process.env.POLAR_ADMIN_TOKEN = "tok";
    try {
      const folder = modelFolderWith(
        MISTRAL_LIKE_TEMPLATE.replace("{{- eos_token -}}", "{%- do x -%}{{- eos_token -}}"),
      );
      await expect(runProxy({ ...sglang, tokenizerPath: folder })).rejects.toThrow(
        `--tokenizer-path: the chat template ${path.join(folder, "chat_template.jinja")} uses tag {% do %}, which the proxy's template renderer (@huggingface/jinja) does not support`,
      );
      const template = path.join(
        modelFolderWith(
          MISTRAL_LIKE_TEMPLATE.replace("message.content -}}", "message.content | wordcount -}}"),
        ),
        "chat_template.jinja",
      );
      await expect(runProxy({ ...sglang, chatTemplate: template, toolCallParser: "hermes" })).rejects.toThrow(
        `--chat-template: the chat template ${template} uses filter "wordcount", which`,
      );
      // A folder in no known format, no parser named and no engine to ask: the flag to give.
      await expect(
        runProxy({ ...sglang, tokenizerPath: modelFolderWith(MISTRAL_LIKE_TEMPLATE) }),
      ).rejects.toThrow(
        /^--tool-call-parser: toolCallParser: .*chat_template\.jinja is not a format Polar-TS parses .*give --tool-call-parser NAME/,
      );
    } finally {
      delete process.env.POLAR_ADMIN_TOKEN;
    }
  });

  it("a folder in no format Polar-TS parses starts with parsing delegated, and says so", async () => {
    const engine = await startGenerateDouble();
    engine.parsers.functionCall = (body) => ({ normal_text: String(body.text), calls: [] });
    const folder = modelFolderWith(MISTRAL_LIKE_TEMPLATE);
    const child = polarProxy([
      "--engine",
      "sglang",
      "--engine-url",
      engine.url,
      ...FLAGS,
      "--tokenizer-path",
      folder,
      "--tool-call-parser",
      "mistral",
    ]);
    let err = "";
    child.stderr!.on("data", (d: Buffer) => {
      err += d.toString();
    });
    try {
      await new Promise<void>((resolve, reject) => {
        let out = "";
        child.stdout!.on("data", (d: Buffer) => {
          out += d.toString();
          if (/listening at http/.test(out)) resolve();
        });
        child.once("exit", () => reject(new Error(`proxy exited: ${out}${err}`)));
      });
      const said = err.split("\n").filter((l) => l.includes("is not a format Polar-TS parses"));
      expect(said).toHaveLength(1);
      expect(said[0]).toContain(
        `[proxy] token mode: ${path.join(folder, "chat_template.jinja")} is not a format Polar-TS parses (`,
      );
      expect(said[0]).toContain(
        "parsing is delegated to the engine (as --delegate-parsing): tool-call parser mistral (given)",
      );
    } finally {
      await stop(child);
      await engine.close();
    }
  }, 60_000);
});
