/**
 * The token bridge and its verdicts. See `bridge.ts` and docs/token-mode.md.
 *
 * @module
 */
export {
  type BridgedTurn,
  BridgeError,
  type BridgeRequest,
  type PreparedTurn,
  TokenBridge,
  type TokenBridgeOptions,
  type TurnOutcome,
  type TurnProvenance,
  type VersionSegmentSummary,
} from "./bridge";
export { type EnginePromptMatch, matchEnginePrompt } from "./engine-prompt";
export { BRIDGE_FLAGS, type BridgeFlag, emptyFlagCounts } from "./flags";
export { type NormalizedMessage, normalizeMessages, prefixKeys, settingsKey } from "./normalize";
export { reasoningDropped } from "./reasoning";
export { type ToolSchemas, toolSchemas, withoutDefaults } from "./tool-defaults";
export { emptyVerdictCounts, VERDICTS, type Verdict, type VerdictRow, VerdictTally } from "./verdicts";
