/**
 * Tokens for local development. These fixed values are used only by `polar dev` and `polar stack`
 * (and the doc test's stack) when the environment does not set its own — so the tokens the docs
 * print are the ones a local stack takes. The demo and the tests draw random ones. A deployed Worker
 * has no defaults and refuses every request until real secrets are set with `wrangler secret put`.
 *
 * @module
 */

/**
 * Bearer tokens of the roles. `viewer` (read-only, for dashboards) is optional: without it the
 * control plane's viewer routes answer the trainer and admin tokens only.
 */
export interface RoleTokens {
  trainer: string;
  gateway: string;
  admin: string;
  viewer?: string;
}

/** The documented local-development tokens. Never valid anywhere but a local `polar dev` or `polar stack`. */
export const DEV_TOKENS: RoleTokens = {
  trainer: "polar-dev-trainer-token",
  gateway: "polar-dev-gateway-token",
  admin: "polar-dev-admin-token",
  viewer: "polar-dev-viewer-token",
};

/**
 * Tokens from `POLAR_TRAINER_TOKEN`, `POLAR_GATEWAY_TOKEN`, `POLAR_ADMIN_TOKEN`,
 * `POLAR_VIEWER_TOKEN`, falling back to the dev defaults for each one that is unset.
 *
 * @example
 * ```ts
 * const tokens = tokensFromEnv(process.env);
 * ```
 */
export function tokensFromEnv(env: NodeJS.ProcessEnv): Required<RoleTokens> {
  return {
    trainer: env.POLAR_TRAINER_TOKEN || DEV_TOKENS.trainer,
    gateway: env.POLAR_GATEWAY_TOKEN || DEV_TOKENS.gateway,
    admin: env.POLAR_ADMIN_TOKEN || DEV_TOKENS.admin,
    viewer: env.POLAR_VIEWER_TOKEN || DEV_TOKENS.viewer!,
  };
}
