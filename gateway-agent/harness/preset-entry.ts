/**
 * The shape of a harness preset and the one builder that turns it into a {@link Harness}. A preset
 * is a declarative {@link PresetEntry}: the API families its CLI speaks, whether it takes MCP
 * servers and skills, the environment it gets, the config files written into the session's HOME,
 * and its command line. What every preset shares (the pinned install step, `agent.settings`
 * `version`/`install`/`extra_args`, refusing MCP servers or skills it cannot take, tee-ing its
 * output to `logs/agent/<name>.txt`) lives here, once.
 *
 * @module
 */
import { stringify as toToml } from "smol-toml";
import { stringify as toYaml } from "yaml";
import type { AgentSpec, CompletionRecord } from "../../protocol";
import { SessionFailure } from "../errors";
import { type Harness, type HarnessPlan, type PlanContext, sessionPaths, sq } from "./plan";
import { isBool, isString, isStrings, setting } from "./preset-settings";

/** Provider name the presets register for the proxy in their config files. */
export const PROVIDER = "polar";

/** An API family a CLI can reach the proxy by (the proxy's `api_type`). */
export type ApiFamily = CompletionRecord["api_type"];

/** A pinned CLI package (one row of `PRESET_PACKAGES`). */
export interface PresetPackage {
  readonly pkg: string;
  readonly version: string;
  readonly bin: string;
  readonly via: "npm" | "pip";
}

/** What a preset's builders see for one session. */
export interface PresetCall<O> {
  ctx: PlanContext;
  agent: AgentSpec;
  /** The session's HOME inside the sandbox. */
  home: string;
  /** The model, shell-quoted for the command line. */
  model: string;
  /** The proxy's OpenAI-style base URL (`<proxy>/v1`). */
  v1: string;
  /** `agent.settings.extra_args`, shell-quoted, with a leading space (or empty). */
  extra: string;
  /** What the entry's {@link PresetEntry.options} read from `agent.settings`. */
  options: O;
}

/** A config file a preset writes into the session's HOME. */
export interface PresetFile<O> {
  /** Path under the session's HOME. */
  path: string;
  format: "json" | "toml" | "yaml";
  content(c: PresetCall<O>): unknown;
  /** Written only when this holds (default: always). */
  when?(c: PresetCall<O>): boolean;
}

/**
 * One harness preset, declared. `O` is what the preset reads from `agent.settings` beyond the
 * common keys.
 */
export interface PresetEntry<O = undefined> {
  /** The API families the CLI can reach the proxy by; the first is the one it uses by default. */
  api: readonly ApiFamily[];
  /** Takes `agent.mcp_servers` (its config builders write them); otherwise they are refused. */
  mcp?: true;
  /** Folder under HOME that `agent.skills_path` is copied into; without it skills are refused. */
  skills?: string;
  /** Its own `agent.settings`, read after the common ones (a bad value names its key). */
  options?(agent: AgentSpec): O;
  env?(c: PresetCall<O>): Record<string, string>;
  files?: ReadonlyArray<PresetFile<O>>;
  /** The command line (reading the instruction through `INSTRUCTION_ARG`), without the tee. */
  command(c: PresetCall<O>): string;
  /** Best-effort commands after the run (collecting the CLI's own logs). */
  postprocess?: readonly string[];
}

/**
 * Declares an entry, keeping its options' type inside it.
 *
 * @example
 * ```ts
 * const grok = presetEntry({ api: ["openai_chat"], command: (c) => `grok -m ${c.model} -p ${INSTRUCTION_ARG}` });
 * ```
 */
export function presetEntry<O = undefined>(entry: PresetEntry<O>): PresetEntry<unknown> {
  return entry;
}

/**
 * The pinned install command: skipped when the CLI is on PATH already (images that ship it).
 *
 * @example
 * ```ts
 * installLine(PRESET_PACKAGES.codex, "0.171.0"); // command -v codex >/dev/null 2>&1 || npm install -g …
 * ```
 */
export function installLine(p: PresetPackage, version: string): string {
  const install =
    p.via === "npm"
      ? `npm install -g --no-audit --no-fund ${p.pkg}@${version}`
      : `pip install --no-input ${p.pkg}==${version}`;
  return `command -v ${p.bin} >/dev/null 2>&1 || ${install}`;
}

interface CommonSettings {
  version: string;
  install: boolean;
  extraArgs: string[];
}

function common(p: PresetPackage, agent: AgentSpec): CommonSettings {
  const version = setting(agent, "version", isString, "a version string") ?? p.version;
  if (!/^[0-9A-Za-z.+-]+$/.test(version))
    throw new SessionFailure("configuration", `agent.settings.version: '${version}' is not a plain version`);
  return {
    version,
    install: setting(agent, "install", isBool, "true or false") ?? true,
    extraArgs: setting(agent, "extra_args", isStrings, "a list of strings") ?? [],
  };
}

function refuseUnsupported(name: string, entry: PresetEntry<unknown>, agent: AgentSpec): void {
  if (!entry.mcp && agent.mcp_servers.length > 0)
    throw new SessionFailure(
      "configuration",
      `agent.mcp_servers: harness '${name}' does not support MCP servers`,
    );
  if (entry.skills === undefined && agent.skills_path !== undefined)
    throw new SessionFailure("configuration", `agent.skills_path: harness '${name}' does not support skills`);
}

function tee(name: string, command: string): string {
  // pipefail: the step's exit status is the CLI's, not tee's.
  return `set -o pipefail; ${command} 2>&1 | tee -a "$AGENT_LOG_DIR/${name}.txt"`;
}

const SERIALIZE: Record<PresetFile<unknown>["format"], (v: unknown) => string> = {
  json: (v) => JSON.stringify(v, null, 2),
  toml: (v) => toToml(v as Record<string, unknown>),
  yaml: (v) => toYaml(v),
};

function uploadsOf(entry: PresetEntry<unknown>, c: PresetCall<unknown>): Pick<HarnessPlan, "uploads"> {
  if (entry.skills === undefined) return {};
  const source = c.agent.skills_path;
  return { uploads: source ? [{ source, target: `${c.home}/${entry.skills}` }] : [] };
}

/**
 * The harness of a preset: checks the common settings, refuses what the CLI cannot take, reads the
 * entry's own settings, then builds its plan (one step, tee'd to `logs/agent/<name>.txt`).
 *
 * @example
 * ```ts
 * const harness = presetHarness("pi", PRESET_PACKAGES.pi, PRESET_ENTRIES.pi);
 * const plan = harness(ctx);
 * ```
 */
export function presetHarness(name: string, pkg: PresetPackage, entry: PresetEntry<unknown>): Harness {
  return (ctx) => {
    const agent = ctx.session.agent;
    const s = common(pkg, agent);
    refuseUnsupported(name, entry, agent);
    const c: PresetCall<unknown> = {
      ctx,
      agent,
      home: sessionPaths(ctx).home,
      model: sq(ctx.model),
      v1: `${ctx.proxyUrl}/v1`,
      extra: s.extraArgs.length ? ` ${s.extraArgs.map(sq).join(" ")}` : "",
      options: entry.options?.(agent),
    };
    const command = tee(name, entry.command(c));
    const env = entry.env?.(c) ?? {};
    const files = (entry.files ?? [])
      .filter((f) => f.when?.(c) ?? true)
      .map((f) => ({ path: `${c.home}/${f.path}`, content: SERIALIZE[f.format](f.content(c)) }));
    return {
      name,
      install: s.install ? installLine(pkg, s.version) : null,
      postprocess: (entry.postprocess ?? []).map((line) => ({ command: line })),
      files,
      env,
      ...uploadsOf(entry, c),
      steps: [{ command }],
    };
  };
}
