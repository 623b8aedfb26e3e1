/**
 * What each harness preset sets so its CLI makes no network call of its own: update checks and
 * auto-updaters, telemetry and usage statistics, model catalogues, plugin downloads. A session in
 * a sandbox without network then only ever talks to the proxy. docs/harnesses.md lists the same.
 *
 * @module
 */

/**
 * What each preset sets so its CLI makes no network call of its own (checked against the pinned
 * versions: the names below are read by that code).
 */
export const OFFLINE_KNOBS = {
  claude_code: {
    env: {
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
    },
  },
  qwen_code: {
    env: {
      // Its default relaunches itself as a child with a heap of half the host's memory.
      QWEN_CODE_NO_RELAUNCH: "true",
      QWEN_CODE_DISABLE_PRECONNECT: "1",
    },
    /** `~/.qwen/settings.json` (schema version 4: no migration at start). */
    settings: {
      $version: 4,
      general: { enableAutoUpdate: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    },
  },
  codex: {
    /** Top-level `config.toml` keys. */
    config: {
      check_for_update_on_startup: false,
      analytics: { enabled: false },
      feedback: { enabled: false },
    },
  },
  opencode: {
    env: {
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      // The provider catalogue it would download at start; the proxy's provider is in the config.
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
      OPENCODE_DISABLE_SHARE: "1",
    },
    config: { autoupdate: false, share: "disabled" },
  },
  pi: { env: { PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" } },
  gemini_cli: {
    env: {
      // Its default relaunches itself as a child with a larger heap.
      GEMINI_CLI_NO_RELAUNCH: "true",
      // Headless runs in an untrusted folder exit 55; the session's workdir is the task's own.
      GEMINI_CLI_TRUST_WORKSPACE: "true",
    },
    /** `~/.gemini/settings.json` (0.61's names; `disableAutoUpdate` is a deprecated alias). */
    settings: {
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    },
  },
  copilot_cli: {
    env: {
      // No GitHub login, no model list from GitHub: the provider below is the only one.
      COPILOT_OFFLINE: "true",
      COPILOT_AUTO_UPDATE: "false",
    },
  },
  cline: {
    env: { CLINE_NO_AUTO_UPDATE: "1" },
    /** `$CLINE_DIR/data/settings/global-settings.json`: its OpenTelemetry export and updater off. */
    settings: { telemetryOptOut: true, autoUpdateEnabled: false },
  },
  kilo_code: {
    env: {
      KILO_DISABLE_AUTOUPDATE: "1",
      // The provider catalogue it would download at start; the proxy's provider is in the config.
      KILO_DISABLE_MODELS_FETCH: "1",
      KILO_DISABLE_LSP_DOWNLOAD: "1",
      KILO_DISABLE_DEFAULT_PLUGINS: "1",
      KILO_DISABLE_SHARE: "1",
      // Uploads of the session and a presence connection to Kilo's cloud.
      KILO_DISABLE_SESSION_INGEST: "1",
      KILO_DISABLE_PRESENCE: "1",
      KILO_TELEMETRY_LEVEL: "off",
    },
    config: { autoupdate: false, share: "disabled" },
  },
  continue: {
    env: {
      CONTINUE_CLI_ENABLE_TELEMETRY: "0",
      CONTINUE_METRICS_ENABLED: "0",
      // Read as "this process is the updated one": it never runs `npm i -g` on itself.
      CONTINUE_CLI_AUTO_UPDATED: "1",
    },
  },
  // Grok CLI 0.0.34 has no update check or telemetry; it calls nothing but its base URL (and
  // Morph's API only when MORPH_API_KEY is set, which the session does not pass).
  grok_cli: { env: {} },
  nanocoder: {
    env: {
      // Qwen3's context window, which it would otherwise look up in an online model catalogue.
      NANOCODER_CONTEXT_LIMIT: "40960",
    },
  },
} as const;
