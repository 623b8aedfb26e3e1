import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRESET_PACKAGES, PRESETS, type PresetName } from "../../gateway-agent/harness";
import { UsageError } from "../usage-error";
import { conformancePlan, runConformance } from "./conformance";

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
    expect(r.model_family).toBe("qwen3");
    expect(r.turns.length).toBe(4);
    expect(r.turns[0]!.verdict).toBe("new_chain");
    expect(r.turns.slice(1).map((t) => t.verdict)).toEqual(["extended", "template_mismatch", "extended"]);
    expect(r.chains).toBe(1);
    expect(r.honours_sampling).toBe(true);
    expect(r.streams).toBe("never");
    expect(r.rewrites_history).toBe(false);
    expect(r.compacts_history).toBe(false);
    expect(r.drops_reasoning).toBe(false);
    expect(r.flags).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 0 });
    expect(r.safe_to_train).toBe(true);
    expect(out).toMatch(/\| safe to train on \| yes \|/);
    expect(out).toMatch(/\| drops reasoning \| no \|/);
  }, 120_000);

  it("shows the turns whose request came back without the previous reply's reasoning", async () => {
    const { value: r, out } = await silenced(() =>
      runConformance({ harness: "shell", env: { CONFORMANCE_REASONING: "drop" } }),
    );
    // Every reply of the simulated policy carries a <think> block: each later turn drops one.
    expect(r.turns.map((t) => t.flags)).toEqual([
      [],
      ["reasoning_dropped"],
      ["reasoning_dropped"],
      ["reasoning_dropped"],
    ]);
    expect(r.flags).toEqual({ reasoning_dropped: 3, image_prompt_unverified: 0 });
    expect(r.drops_reasoning).toBe(true);
    // The bridge still extends the chain from the sampled ids: training data is unaffected.
    expect(r.chains).toBe(1);
    expect(out).toMatch(/\| 2 \| openai_chat \|.*\| extended \| reasoning_dropped \|/);
    expect(out).toMatch(/\| drops reasoning \| yes: 3 of 4 turns /);
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
    expect(ignores.value.sampling_overridden).toEqual([]);

    // The same harness under the task's policy: it still sends nothing, the engine samples at 0.6.
    const policed = await silenced(() =>
      runConformance({
        harness: "shell",
        command: `env -u POLAR_TEMPERATURE ${CLIENT}`,
        temperature: 0.6,
        samplingTemperature: 0.6,
      }),
    );
    expect(policed.value.honours_sampling).toBe(false);
    expect(policed.value.samples_as_expected).toBe(true);
    expect(policed.value.sampling_overridden).toEqual(["temperature"]);
    expect(policed.value.turns.map((t) => [t.sent.temperature, t.applied.temperature])).toEqual(
      Array(4).fill([undefined, 0.6]),
    );
    expect(policed.value.safe_to_train).toBe(true);
    expect(policed.out).toMatch(/\| task's sampling policy applied over \| temperature \|/);
    expect(policed.out).toMatch(/\| 1 \| openai_chat \|.*\| - \(applied temperature=0\.6\) \|/);
  }, 240_000);

  it("runs the client against the second model family: DeepSeek V3 prompts, every follow-up extended", async () => {
    const { value: r, out } = await silenced(() =>
      runConformance({ harness: "shell", temperature: 0.6, modelFamily: "deepseek_v3" }),
    );
    expect(r.model_family).toBe("deepseek_v3");
    expect(out).toContain("| model family | deepseek_v3 |");
    expect(r.turns.length).toBe(4);
    // V3 has no reasoning block, so no turn loses one to the template, as Qwen3's third turn does.
    expect(r.turns.map((t) => t.verdict)).toEqual(["new_chain", "extended", "extended", "extended"]);
    expect(r.safe_to_train).toBe(true);
  }, 240_000);

  it("counts a retried call in the turn tree and keeps the session one chain", async () => {
    const { value: r, out } = await silenced(() =>
      runConformance({ harness: "shell", env: { CONFORMANCE_STYLE: "retry" } }),
    );
    // Two tasks, each first request sent twice: 4 answers used + 2 replaced.
    expect(r.turns.length).toBe(6);
    expect(r.tree).toEqual({ turns: 6, chains: 1, branch_points: 0, retries_dropped: 2, roots: 1 });
    expect(r.chains).toBe(1);
    expect(out).toContain("| turn tree | 1 trace(s), 0 branch point(s), 2 retried call(s) dropped |");
    expect(r.safe_to_train).toBe(true);
  }, 240_000);

  it("names the flag for a missing or unknown harness", async () => {
    await expect(runConformance({ harness: "shell", modelFamily: "llama" })).rejects.toThrow(
      /^--model-family: .*"llama" \(known: qwen3, deepseek_v3\)/,
    );
    await expect(runConformance({})).rejects.toThrow(UsageError);
    await expect(runConformance({})).rejects.toThrow(/^--harness:/);
    await expect(runConformance({ harness: "nope" })).rejects.toThrow(/^--harness: .*not supported/);
  });
});

describe("polar conformance for every preset", () => {
  const presets = Object.keys(PRESETS) as PresetName[];
  let empty: string;
  beforeAll(async () => {
    empty = await mkdtemp(path.join(tmpdir(), "polar-conformance-nocli-"));
  });
  afterAll(async () => {
    await rm(empty, { recursive: true, force: true });
  });

  it.each(presets)("%s: the plan is built from a schema-parsed session, wired to the proxy", async (name) => {
    const at = { proxyUrl: "http://127.0.0.1:9", sessionKey: "sk-polar-x", sessionPath: "/s" };
    const { ctx, plan, env, cwd } = await conformancePlan(
      { harness: name, temperature: 0.6, harnessDir: "/opt/clis" },
      at,
    );
    // The defaults a preset reads (settings, mcp_servers, env) come from the gateway's schema.
    expect(ctx.session.agent).toMatchObject({ harness: name, settings: {}, mcp_servers: [], env: {} });
    expect(ctx.session.instruction).toMatch(/calculator\.js/);
    expect(plan.steps[0]!.command).toContain(`${PRESET_PACKAGES[name].bin} `);
    expect(cwd).toBe("/s/workspace");
    expect(env).toMatchObject({
      HOME: "/s/home",
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9",
      GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:9",
      POLAR_TEMPERATURE: "0.6",
      ...plan.env,
    });
    // Pre-installed CLIs first on PATH, as on a gateway with POLAR_HARNESS_DIR.
    expect(env.PATH!.split(":")[0]).toBe("/opt/clis/bin");
  });

  it("a --task file's settings reach the preset as agent.settings (continue on its Anthropic provider)", async () => {
    const at = { proxyUrl: "http://127.0.0.1:9", sessionKey: "sk-polar-x", sessionPath: "/s" };
    const task = path.join(empty, "continue-anthropic.yaml");
    await writeFile(task, "harness: continue\nsettings:\n  provider: anthropic\n");
    const { ctx, plan } = await conformancePlan({ task }, at);
    expect(ctx.session.agent.settings).toEqual({ provider: "anthropic" });
    const config = plan.files.find((f) => f.path.endsWith("polar.yaml"))!.content;
    expect(config).toContain("provider: anthropic");
    expect(config).toContain("apiBase: http://127.0.0.1:9/v1/");
    await writeFile(task, "harness: continue\nsettings: [anthropic]\n");
    await expect(conformancePlan({ task }, at)).rejects.toThrow(/^--task: settings in .* must be a mapping/);
    await writeFile(task, "harness: continue\nsettings:\n  provider: gemini\n");
    await expect(conformancePlan({ task }, at)).rejects.toThrow(
      /agent\.settings\.provider: must be one of openai, anthropic/,
    );
  });

  it.each(presets)(
    "%s without its CLI stops at once, naming the binary and how to install it",
    async (name) => {
      const p = PRESET_PACKAGES[name];
      const run = runConformance({ harness: name, harnessDir: empty, env: { PATH: empty } });
      await expect(run).rejects.toThrow(UsageError);
      await expect(
        runConformance({ harness: name, harnessDir: empty, env: { PATH: empty } }),
      ).rejects.toThrow(
        new RegExp(
          `^--harness: ${name} needs its CLI '${p.bin}'.*${p.via === "npm" ? `install-harnesses\\.sh ${name}` : "pip install"}`,
        ),
      );
    },
    30_000,
  );
});
