#!/usr/bin/env bash
# The GPU host's first-day check: runs Polar-TS's engine contract checks against an SGLang (and
# optionally vLLM) server that is already running, and prints a table. It starts no engine.
#   scripts/gpu-check.sh --sglang http://127.0.0.1:30000 [--tokenizer-path MODEL_DIR] [--vllm URL]
# Every flag: scripts/gpu-check.sh --help; what each check means: docs/engines.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec node --import tsx "$root/scripts/gpu-check/main.ts" "$@"
