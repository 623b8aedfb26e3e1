/**
 * Sign-in: a bearer token (viewer, trainer or admin) kept in the tab's `sessionStorage`.
 *
 * `…/#token=…` signs in: the fragment never leaves the browser (no request carries it, so no
 * server log holds it), and it is wiped from the address bar at once so it is not bookmarked or
 * shared by accident.
 *
 * @module
 */

const KEY = "polar.token";

/** Where the token is kept (the tab's `sessionStorage` in the browser). */
export interface TokenStore {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

/**
 * Splits a `#token=…` fragment off a location hash: the token, and the hash to show instead.
 * Other fragments pass through unchanged.
 *
 * @example
 * ```ts
 * takeTokenFromHash("#token=abc"); // { token: "abc", rest: "#/" }
 * takeTokenFromHash("#/batches/b1&token=abc"); // { token: "abc", rest: "#/batches/b1" }
 * takeTokenFromHash("#/fleet"); // { token: null, rest: "#/fleet" }
 * ```
 */
export function takeTokenFromHash(hash: string): { token: string | null; rest: string } {
  const m = /(^#|[&?])token=([^&]*)/.exec(hash);
  if (!m) return { token: null, rest: hash };
  const token = decodeURIComponent(m[2] ?? "");
  const lead = m[1] === "&" ? "" : m[1];
  let after = hash.slice(m.index + m[0].length);
  // `#token=a&x` / `?token=a&x`: the separator before the next parameter goes with the token.
  if (lead !== "" && after.startsWith("&")) after = after.slice(1);
  const rest = hash.slice(0, m.index) + (after === "" ? "" : lead) + after;
  return { token: token || null, rest: rest === "" || rest === "#" ? "#/" : rest };
}

/**
 * Reads the signed-in token, taking a `#token=` fragment first (and then removing it from the
 * address bar through `replace`).
 *
 * @example
 * ```ts
 * const token = signIn(location.hash, sessionStorage, (h) => history.replaceState(null, "", h));
 * ```
 */
export function signIn(hash: string, store: TokenStore, replace: (hash: string) => void): string | null {
  const { token, rest } = takeTokenFromHash(hash);
  if (token) {
    store.setItem(KEY, token);
    replace(rest);
    return token;
  }
  return store.getItem(KEY);
}

/**
 * Keeps a token typed into the sign-in form.
 *
 * @example
 * ```ts
 * saveToken(sessionStorage, "polar-dev-trainer-token");
 * ```
 */
export function saveToken(store: TokenStore, token: string): void {
  store.setItem(KEY, token.trim());
}

/**
 * Signs out: forgets the token.
 *
 * @example
 * ```ts
 * signOut(sessionStorage);
 * ```
 */
export function signOut(store: TokenStore): void {
  store.removeItem(KEY);
}
