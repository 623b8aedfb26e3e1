#!/usr/bin/env bash
# SWE-Gym GRPO with slime on one 8-GPU host: slime trains (4 GPUs) and owns 4 SGLang rollout
# engines behind its router (4 GPUs); one Polar-TS gateway on the same host runs the sessions in
# containers (codex in each SWE-Gym instance's image) and calls the router in token mode; the
# control plane runs wherever POLAR_URL points (wrangler deploy, or `polar dev` on this host).
#
# Needs: slime checked out at SLIME_DIR with its Megatron environment (slime's own docker image),
# ray, docker or podman with the SWE-Gym images pulled, this repository (npm ci) for the gateway,
# and `pip install -e clients/python` in slime's Python for the bridge.
#
# doc-test: syntax needs an 8-GPU host with slime, ray and the SWE-Gym images
#   POLAR_URL=https://polar.example.workers.dev POLAR_TRAINER_TOKEN=... POLAR_GATEWAY_TOKEN=... \
#   SLIME_DIR=~/slime HF_CHECKPOINT=~/models/Qwen3-4B bash examples/swegym_slime_grpo/run.sh
#
# The dry run (examples/swegym_slime_grpo/dry-run.ts) reads the bridge's flags from this file and
# drives them, polar.yaml and topology.yaml against the local stack.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

: "${POLAR_URL:?the control plane URL}"
: "${POLAR_TRAINER_TOKEN:?the trainer token}"
: "${POLAR_GATEWAY_TOKEN:?the gateway token}"
: "${SLIME_DIR:?a slime checkout}"
: "${HF_CHECKPOINT:?the Hugging Face checkpoint to train}"
export POLAR_URL POLAR_TRAINER_TOKEN POLAR_GATEWAY_TOKEN
export RUN_ID="${RUN_ID:-swegym-grpo-$(date +%Y%m%d-%H%M%S)}"
export POLAR_MAX_ASYNC_LEVEL="${POLAR_MAX_ASYNC_LEVEL:-2}"
export POLAR_MODEL="${POLAR_MODEL:-$(basename "$HF_CHECKPOINT")}"
export POLAR_CONTAINER_CLI="${POLAR_CONTAINER_CLI:-docker}"
export POLAR_GATEWAY_NODE_ID="${POLAR_GATEWAY_NODE_ID:-$(hostname -s)}"
export POLAR_GATEWAY_WORK_ROOT="${POLAR_GATEWAY_WORK_ROOT:-$PWD/.polar/swegym-work}"
ROUTER_PORT="${SGLANG_ROUTER_PORT:-30000}"
export SGLANG_ROUTER_BASE_URL="http://127.0.0.1:${ROUTER_PORT}"
WORK="${WORK_DIR:-$HOME/swegym-grpo/$RUN_ID}"
mkdir -p "$WORK"

# 1. Data: SWE-Gym rows (SWE-bench's schema) -> slime prompt rows {prompt, label, metadata}.
INSTANCES="${SWEGYM_INSTANCES:-$HERE/instances.jsonl}"
(cd "$REPO" && npx tsx examples/swegym_slime_grpo/prepare-data.ts --instances "$INSTANCES" --out "$WORK/prompts.jsonl")

# 2. The bridge's configuration, ${VAR} filled from the environment.
envsubst <"$HERE/polar.yaml" >"$WORK/polar.yaml"

# 3. The gateway, pointed at slime's router (it waits for the router to come up).
(cd "$REPO" && node bin/polar.mjs serve_gateway -c "$HERE/topology.yaml") >"$WORK/gateway.log" 2>&1 &
GATEWAY_PID=$!
trap 'kill "$GATEWAY_PID" 2>/dev/null || true' EXIT

# 4. slime: upstream's SWE-Gym shape (4 prompts x 16 samples per rollout, async level 2, one weight
# sync per rollout), the Polar bridge in its four hooks.
cd "$SLIME_DIR"
ray start --head --num-gpus 8 --disable-usage-stats >/dev/null
ray job submit --address=http://127.0.0.1:8265 \
  --runtime-env-json="{\"env_vars\": {\"PYTHONPATH\": \"$SLIME_DIR:$REPO/clients/python/src\", \"POLAR_TRAINER_TOKEN\": \"$POLAR_TRAINER_TOKEN\"}}" \
  -- python3 train_async.py \
  --hf-checkpoint "$HF_CHECKPOINT" \
  --ref-load "$HF_CHECKPOINT" \
  --save "$WORK/ckpt" \
  --save-interval 20 \
  --prompt-data "$WORK/prompts.jsonl" \
  --input-key prompt \
  --label-key label \
  --metadata-key metadata \
  --rollout-shuffle \
  --num-rollout 300 \
  --rollout-batch-size 4 \
  --n-samples-per-prompt 16 \
  --global-batch-size 64 \
  --rollout-max-response-len 8192 \
  --rollout-temperature 1.0 \
  --update-weights-interval 1 \
  --advantage-estimator grpo \
  --use-kl-loss \
  --kl-loss-coef 0.0 \
  --eps-clip 0.2 \
  --eps-clip-high 0.28 \
  --use-tis \
  --optimizer adam \
  --lr 1e-6 \
  --actor-num-nodes 1 \
  --actor-num-gpus-per-node 4 \
  --tensor-model-parallel-size 2 \
  --rollout-num-gpus 4 \
  --rollout-num-gpus-per-engine 1 \
  --sglang-mem-fraction-static 0.8 \
  --sglang-context-length 65536 \
  --sglang-router-ip 127.0.0.1 \
  --sglang-router-port "$ROUTER_PORT" \
  --rollout-function-path polar_trainer.slime.rollout.generate_rollout \
  --custom-rm-path polar_trainer.slime.reward.reward_func \
  --custom-reward-post-process-path polar_trainer.slime.reward_post_process.post_process_rewards \
  --data-source-path polar_trainer.slime.data_source.PolarDataSource \
  --custom-config-path "$WORK/polar.yaml"
