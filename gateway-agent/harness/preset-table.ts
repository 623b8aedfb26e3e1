/**
 * Every harness preset, declared: the API families its CLI speaks, what it takes (MCP servers,
 * skills), its environment, the config files written into the session's HOME, and its command
 * line. The instruction reaches every CLI as one argument read from the instruction file
 * (`INSTRUCTION_ARG`); `c.extra` is where `agent.settings.extra_args` go.
 *
 * Adding a CLI: pin its package in `PRESET_PACKAGES` (presets.ts), list what keeps it offline in
 * `OFFLINE_KNOBS`, and add its entry here.
 *
 * @module
 */

import { OFFLINE_KNOBS } from "./offline-knobs";
import { INSTRUCTION_ARG as I, sq } from "./plan";
import {
  claudeFlags,
  codexConfig,
  continueConfig,
  continueProvider,
  copilotEnv,
  copilotWire,
  miniFlags,
  miniOptions,
  opencodeProvider,
} from "./preset-configs";
import { PROVIDER, type PresetEntry, presetEntry } from "./preset-entry";
import { mcpServersJson, opencodeMcp } from "./preset-mcp";

const CLAUDE_MCP_FILE = ".claude/polar-mcp.json";

const claudeCode = presetEntry({
  api: ["anthropic"],
  mcp: true,
  skills: ".claude/skills",
  options: claudeFlags,
  env: (c) => ({
    CLAUDE_CONFIG_DIR: `${c.home}/.claude`,
    IS_SANDBOX: "1",
    ...OFFLINE_KNOBS.claude_code.env,
    ANTHROPIC_MODEL: c.ctx.model,
    ANTHROPIC_SMALL_FAST_MODEL: c.ctx.model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: c.ctx.model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: c.ctx.model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: c.ctx.model,
  }),
  files: [
    {
      path: CLAUDE_MCP_FILE,
      format: "json",
      when: (c) => c.agent.mcp_servers.length > 0,
      content: (c) => ({ mcpServers: mcpServersJson(c.agent, "url") }),
    },
  ],
  command: (c) => {
    const mcp = c.agent.mcp_servers.length ? ` --mcp-config ${sq(`${c.home}/${CLAUDE_MCP_FILE}`)}` : "";
    return `claude -p ${I} --output-format=stream-json --verbose --dangerously-skip-permissions --model ${c.model}${c.options}${mcp}${c.extra}`;
  },
});

const codex = presetEntry({
  api: ["openai_responses"],
  mcp: true,
  skills: ".codex/skills",
  env: (c) => ({ CODEX_HOME: `${c.home}/.codex` }),
  files: [{ path: ".codex/config.toml", format: "toml", content: codexConfig }],
  command: (c) =>
    `codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox${c.extra} ${I}`,
  // Its own session logs are the richest record of what it did.
  postprocess: [`cp -r "$CODEX_HOME/sessions" "$AGENT_LOG_DIR/codex-sessions" 2>/dev/null || true`],
});

const qwenCode = presetEntry({
  api: ["openai_chat"],
  mcp: true,
  env: () => ({ ...OFFLINE_KNOBS.qwen_code.env }),
  files: [
    {
      path: ".qwen/settings.json",
      format: "json",
      content: (c) => ({
        ...OFFLINE_KNOBS.qwen_code.settings,
        ...(c.agent.mcp_servers.length ? { mcpServers: mcpServersJson(c.agent, "httpUrl") } : {}),
      }),
    },
  ],
  command: (c) => `qwen -p ${I} --yolo --auth-type openai -m ${c.model}${c.extra}`,
});

const OPENCODE_CONFIG = ".config/opencode/opencode.json";

const opencode = presetEntry({
  api: ["openai_chat"],
  mcp: true,
  env: (c) => ({
    OPENCODE_CONFIG: `${c.home}/${OPENCODE_CONFIG}`,
    XDG_CONFIG_HOME: `${c.home}/.config`,
    XDG_DATA_HOME: `${c.home}/.local/share`,
    XDG_CACHE_HOME: `${c.home}/.cache`,
    ...OFFLINE_KNOBS.opencode.env,
  }),
  files: [
    {
      path: OPENCODE_CONFIG,
      format: "json",
      content: (c) => ({
        $schema: "https://opencode.ai/config.json",
        ...opencodeProvider(c),
        ...OFFLINE_KNOBS.opencode.config,
        ...(c.agent.mcp_servers.length ? { mcp: opencodeMcp(c.agent) } : {}),
      }),
    },
  ],
  command: (c) => `opencode run${c.extra} ${I}`,
});

const geminiCli = presetEntry({
  api: ["google"],
  mcp: true,
  env: (c) => ({ GEMINI_MODEL: c.ctx.model, ...OFFLINE_KNOBS.gemini_cli.env }),
  files: [
    {
      path: ".gemini/settings.json",
      format: "json",
      content: (c) => ({
        // An API key (the session key): no login, no Google account.
        security: { auth: { selectedType: "gemini-api-key" } },
        ...OFFLINE_KNOBS.gemini_cli.settings,
        ...(c.agent.mcp_servers.length ? { mcpServers: mcpServersJson(c.agent, "httpUrl") } : {}),
      }),
    },
  ],
  command: (c) => `gemini -p ${I} --yolo -m ${c.model}${c.extra}`,
});

const pi = presetEntry({
  api: ["openai_chat"],
  env: () => ({ ...OFFLINE_KNOBS.pi.env }),
  files: [
    {
      path: ".pi/agent/models.json",
      format: "json",
      content: (c) => ({
        providers: {
          [PROVIDER]: {
            baseUrl: c.v1,
            api: "openai-completions",
            apiKey: c.ctx.sessionKey,
            models: [{ id: c.ctx.model }],
          },
        },
      }),
    },
  ],
  command: (c) => `pi --provider ${PROVIDER} --model ${c.model} -p ${I} --no-session${c.extra}`,
});

const miniSweAgent = presetEntry({
  api: ["openai_chat"],
  options: miniOptions,
  // LiteLLM's OpenAI route; the proxy does not bill, so cost tracking must not fail the run.
  env: () => ({ MSWEA_CONFIGURED: "true", MSWEA_COST_TRACKING: "ignore_errors" }),
  command: (c) =>
    `mini -y --exit-immediately -m ${sq(`openai/${c.ctx.model}`)} -t ${I} -o "$AGENT_LOG_DIR/mini_swe_agent.traj.json"${miniFlags(c.options)}${c.extra}`,
});

const copilotCli = presetEntry({
  api: ["openai_responses", "openai_chat", "anthropic"],
  options: copilotWire,
  env: copilotEnv,
  command: (c) => `copilot -p ${I} --yolo --no-auto-update --model ${c.model}${c.extra}`,
});

const cline = presetEntry({
  // Its OpenAI provider takes a base URL; its Anthropic provider does not, so OpenAI Chat it is.
  api: ["openai_chat"],
  env: (c) => ({ ...OFFLINE_KNOBS.cline.env, CLINE_DIR: `${c.home}/.cline` }),
  files: [
    {
      path: ".cline/data/settings/global-settings.json",
      format: "json",
      content: () => OFFLINE_KNOBS.cline.settings,
    },
  ],
  // `cline auth` registers the proxy as its OpenAI provider (in CLINE_DIR), then the task runs.
  command: (c) => {
    const key = sq(c.ctx.sessionKey);
    return `cline auth -p openai -k ${key} -m ${c.model} -b ${sq(c.v1)} && cline --json -P openai -m ${c.model} -k ${key}${c.extra} ${I}`;
  },
});

const KILO_CONFIG = ".config/kilo/kilo.json";

// Kilo Code CLI is an OpenCode fork: the same provider block, its own file and variable names.
const kiloCode = presetEntry({
  api: ["openai_chat"],
  env: (c) => ({
    KILO_CONFIG: `${c.home}/${KILO_CONFIG}`,
    XDG_CONFIG_HOME: `${c.home}/.config`,
    XDG_DATA_HOME: `${c.home}/.local/share`,
    XDG_CACHE_HOME: `${c.home}/.cache`,
    XDG_STATE_HOME: `${c.home}/.local/state`,
    ...OFFLINE_KNOBS.kilo_code.env,
  }),
  files: [
    {
      path: KILO_CONFIG,
      format: "json",
      content: (c) => ({
        ...opencodeProvider(c),
        ...OFFLINE_KNOBS.kilo_code.config,
        // Its undo snapshots (a git copy of the workdir after every turn) take minutes of CPU on a
        // busy host before the first model call; a session's workdir is graded and thrown away anyway.
        snapshot: false,
      }),
    },
  ],
  command: (c) => `kilo run --auto -m ${sq(`${PROVIDER}/${c.ctx.model}`)}${c.extra} ${I}`,
});

const CONTINUE_CONFIG = ".continue/polar.yaml";

const continueCli = presetEntry({
  api: ["openai_chat", "anthropic"],
  options: continueProvider,
  env: (c) => ({ CONTINUE_GLOBAL_DIR: `${c.home}/.continue`, ...OFFLINE_KNOBS.continue.env }),
  files: [{ path: CONTINUE_CONFIG, format: "yaml", content: continueConfig }],
  command: (c) => `cn -p --auto --config ${sq(`${c.home}/${CONTINUE_CONFIG}`)}${c.extra} ${I}`,
});

const grokCli = presetEntry({
  api: ["openai_chat"],
  env: (c) => ({ GROK_BASE_URL: c.v1, GROK_API_KEY: c.ctx.sessionKey, GROK_MODEL: c.ctx.model }),
  command: (c) => `grok -d "$PWD" -u ${sq(c.v1)} -k "$GROK_API_KEY" -m ${c.model}${c.extra} -p ${I}`,
});

const NANOCODER_DIR = ".config/nanocoder";

const nanocoder = presetEntry({
  api: ["openai_chat"],
  env: (c) => ({
    NANOCODER_CONFIG_DIR: `${c.home}/${NANOCODER_DIR}`,
    NANOCODER_DATA_DIR: `${c.home}/.local/share/nanocoder`,
    ...OFFLINE_KNOBS.nanocoder.env,
  }),
  files: [
    {
      path: `${NANOCODER_DIR}/agents.config.json`,
      format: "json",
      content: (c) => ({
        nanocoder: {
          providers: [{ name: PROVIDER, baseUrl: c.v1, apiKey: c.ctx.sessionKey, models: [c.ctx.model] }],
        },
      }),
    },
    // The session's workdir is the task's own: no first-run trust prompt for it.
    {
      path: `${NANOCODER_DIR}/nanocoder-preferences.json`,
      format: "json",
      content: (c) => ({ trustedDirectories: [c.ctx.workdir] }),
    },
  ],
  command: (c) =>
    `nanocoder --provider ${PROVIDER} --model ${c.model} --mode yolo --plain${c.extra} run ${I}`,
});

/** Every preset's entry by name. */
export const PRESET_ENTRIES = {
  claude_code: claudeCode,
  codex,
  qwen_code: qwenCode,
  opencode,
  gemini_cli: geminiCli,
  pi,
  mini_swe_agent: miniSweAgent,
  copilot_cli: copilotCli,
  cline,
  kilo_code: kiloCode,
  continue: continueCli,
  grok_cli: grokCli,
  nanocoder,
} as const satisfies Record<string, PresetEntry<unknown>>;
