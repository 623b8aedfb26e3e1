/**
 * The dashboard shell: sign-in, navigation, and the view of the current hash route.
 *
 * @module
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { Api } from "./api";
import { saveToken, signIn, signOut } from "./auth";
import { hrefOf, parseRoute, type Route } from "./routes";
import { Batch } from "./views/batch";
import { Batches } from "./views/batches";
import { Compare } from "./views/compare";
import { Fleet } from "./views/fleet";
import { Session } from "./views/session";
import { Task } from "./views/task";

const replaceHash = (hash: string) =>
  history.replaceState(null, "", `${location.pathname}${location.search}${hash}`);

function SignIn({ onToken }: { onToken: (t: string) => void }) {
  const [value, setValue] = useState("");
  return (
    <form
      class="card signin"
      onSubmit={(e) => {
        e.preventDefault();
        if (value.trim()) onToken(value.trim());
      }}
    >
      <h1>Polar-TS dashboard</h1>
      <p>
        Sign in with a viewer, trainer or admin token (<code>polar dashboard</code> prints a link that signs
        in).
      </p>
      <label>
        token{" "}
        <input
          type="password"
          name="token"
          autocomplete="off"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
      </label>{" "}
      <button type="submit">Sign in</button>
    </form>
  );
}

function View({ api, route }: { api: Api; route: Route }) {
  switch (route.view) {
    case "fleet":
      return <Fleet api={api} />;
    case "batches":
      return <Batches api={api} filters={route.filters} />;
    case "batch":
      return <Batch key={route.batchId} api={api} batchId={route.batchId} />;
    case "task":
      return (
        <Task
          key={`${route.batchId}/${route.taskId}`}
          api={api}
          batchId={route.batchId}
          taskId={route.taskId}
        />
      );
    case "session":
      return <Session key={route.sessionId} api={api} sessionId={route.sessionId} />;
    case "compare":
      return <Compare key={`${route.a}/${route.b}`} api={api} a={route.a} b={route.b} />;
    case "unknown":
      return <p class="error">No such page: {route.path}</p>;
  }
}

/**
 * The whole app.
 *
 * @example
 * ```tsx
 * render(<App />, document.getElementById("app")!);
 * ```
 */
export function App() {
  const [token, setToken] = useState<string | null>(() => signIn(location.hash, sessionStorage, replaceHash));
  const [route, setRoute] = useState<Route>(() => parseRoute(location.hash));
  useEffect(() => {
    const onHash = () => {
      // A `#token=` link opened in a tab that is already open.
      const t = signIn(location.hash, sessionStorage, replaceHash);
      if (t && t !== token) setToken(t);
      setRoute(parseRoute(location.hash));
    };
    addEventListener("hashchange", onHash);
    // The hash may have changed between the first render and this effect.
    onHash();
    return () => removeEventListener("hashchange", onHash);
  }, [token]);
  const api = useMemo(() => (token ? new Api(token) : null), [token]);
  if (!api)
    return (
      <SignIn
        onToken={(t) => {
          saveToken(sessionStorage, t);
          setToken(t);
        }}
      />
    );
  return (
    <>
      <nav>
        <b>Polar-TS</b>
        <a href={hrefOf({ view: "fleet" })} class={route.view === "fleet" ? "active" : ""}>
          Fleet
        </a>
        <a href={hrefOf({ view: "batches", filters: {} })} class={route.view === "batches" ? "active" : ""}>
          Batches
        </a>
        <button
          type="button"
          class="signout"
          onClick={() => {
            signOut(sessionStorage);
            setToken(null);
          }}
        >
          Sign out
        </button>
      </nav>
      <main>
        <View api={api} route={route} />
      </main>
    </>
  );
}
