// A custom harness (loaded by `agent.import_path` in the tests): a plan that writes a config file
// into the session's HOME and runs one command that reads it.
export function plan(ctx) {
  return {
    name: "custom",
    install: null,
    files: [{ path: `${ctx.sessionPath}/home/custom.json`, content: JSON.stringify({ model: ctx.model }) }],
    env: { CUSTOM_FLAVOUR: "mint" },
    steps: [
      {
        command: `cat "$HOME/custom.json"; echo " $CUSTOM_FLAVOUR"; ${ctx.session.agent.settings.after ?? "true"}`,
      },
    ],
    postprocess: [],
  };
}
