// @ts-check
/**
 * A Stryker reporter that appends each tested mutant to a JSON-lines file as soon as it is tested
 * (`POLAR_MUTANT_LOG`, set by scripts/mutation.ts): a group stopped before its end (Stryker writes
 * its JSON and HTML reports only at the end) still leaves what it found.
 */
import { appendFileSync } from "node:fs";
import { declareClassPlugin, PluginKind } from "@stryker-mutator/api/plugin";

class MutantLogReporter {
  /** @param {import("@stryker-mutator/api/core").MutantResult} result */
  onMutantTested(result) {
    const file = process.env.POLAR_MUTANT_LOG;
    if (!file) return;
    const { fileName, mutatorName, replacement, status, location, statusReason } = result;
    appendFileSync(
      file,
      `${JSON.stringify({ fileName, mutatorName, replacement, status, location, statusReason })}\n`,
    );
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.Reporter, "mutant-log", MutantLogReporter)];
