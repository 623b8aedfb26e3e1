/**
 * Vite build of the dashboard. Its output (`web/dist`) is what `wrangler.toml`'s `[assets]`
 * serves; `cli/web-build.ts` runs this build once when the output is missing or stale.
 *
 * Preact's JSX goes through Vite's own transform (automatic runtime, `preact` import source), so
 * the build needs no Babel.
 */
import { defineConfig } from "vite";

export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // One small app: the chart library is the bulk; no warning for it.
    chunkSizeWarningLimit: 400,
  },
  // `vite` (dev server) proxies the API to a running `polar dev`.
  server: { proxy: { "/v1": "http://127.0.0.1:8787" } },
});
