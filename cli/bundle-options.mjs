// How the CLI is bundled, shared by the gateway package's build (scripts/build-gateway-package.ts)
// and the repository's own bundle (bin/cli-bundle.mjs), so the two cannot drift. Plain JavaScript:
// bin/cli-bundle.mjs reads it before any TypeScript can be loaded.

/**
 * esbuild options for `cli/main.ts` bundled into `outdir`: ES modules, one entry and a chunk per
 * lazily imported subcommand, every file flat in `outdir` (the code that finds a file beside
 * itself, and the root one level up, finds it from whichever chunk esbuild put it in),
 * third-party packages external.
 *
 * @example
 * ```ts
 * await build({ ...cliBundleOptions(REPO, "dist"), logLevel: "warning" });
 * ```
 *
 * @param {string} root the repository (esbuild's working directory)
 * @param {string} outdir where the bundle goes
 * @returns {import("esbuild").BuildOptions & { metafile: true }}
 */
export function cliBundleOptions(root, outdir) {
  return {
    absWorkingDir: root,
    entryPoints: { main: "cli/main.ts" },
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20.18",
    outdir,
    chunkNames: "[name]-[hash]",
    packages: "external",
    metafile: true,
  };
}
