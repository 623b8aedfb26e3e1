#!/usr/bin/env bash
# Runs the real harness CLIs on the calculator task and prints one row per harness (API family,
# sessions, turns, tokens, rewards, bridge verdicts): installs the pinned CLIs first when they are
# missing (needs the npm registry once), then runs scripts/run-harnesses.ts, which needs no network.
#
#   scripts/run-harnesses.sh                       # every run of HARNESS_NAMES in scripts/run-harnesses.ts
#   scripts/run-harnesses.sh claude_code codex     # some
#   scripts/run-harnesses.sh --keep pi             # keep the session folders (CLI logs) and print where
set -euo pipefail
cd "$(dirname "$0")/.."
names=()
for a in "$@"; do [ "$a" = "--keep" ] || names+=("$a"); done
# A run on another API family of a preset (continue_anthropic) installs that preset's CLI.
bash scripts/install-harnesses.sh "${names[@]/%_anthropic/}"
exec npx tsx scripts/run-harnesses.ts "$@"
