import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, explain, keepSignedIn, onSignedOut, prefetch } from './api';
import { Shell } from './components';
import { matchRoute } from './route-match';
import { docsHref, navigation, ROUTES } from './routes';
import { SignInScreen, type AuthStatus } from './screens/sign-in/sign-in';
import type { Me } from './types';

/** The route is the URL's hash (#/sessions, #/sessions/<id>, #/admin/audit): no server routes to keep in step. */
function useRoute(): string[] {
  // A query after the route (#/connections?connected=github) is the screen's to read, not part of the route.
  const read = () => (location.hash.replace(/^#\/?/, '').split('?')[0] || 'sessions').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** Starts the person's runtime if the workspace can prompt (GET /setup says so). */
const prepareIfReady = () =>
  api<{ ready: boolean }>('GET', '/setup')
    .then((s) => (s.ready ? api('POST', '/sessions/prepare') : undefined))
    .catch(() => {});

type Who = { state: 'loading' } | { state: 'in'; me: Me; status: AuthStatus } | { state: 'out'; status: AuthStatus | null; error?: string };

function App() {
  const [who, setWho] = useState<Who>({ state: 'loading' });
  const route = useRoute();

  const load = async () => {
    let status: AuthStatus | null = null;
    try {
      // Both at once: the first screen waits for the slower, not for the two in turn.
      const [s, me] = await Promise.allSettled([api<AuthStatus>('GET', '/auth/status'), api<Me>('GET', '/auth/me')]);
      if (s.status === 'fulfilled') status = s.value;
      if (me.status === 'rejected') throw me.reason;
      if (!status) throw (s as PromiseRejectedResult).reason;
      setWho({ state: 'in', me: me.value, status });
      // Start the person's runtime while they find their way to a prompt (best effort: a full host is
      // reported by the prompt itself). Only where prompts can run: a workspace not set up yet answers
      // 409, which the browser would log as an error on every page.
      if (me.value.permissions.agents.create) void prepareIfReady();
    } catch (err) {
      setWho({ state: 'out', status, error: err instanceof ApiError && err.status === 401 ? undefined : explain(err) });
    }
  };
  useEffect(() => {
    void load();
    // Back to the tab after a while (the runtime may have stopped, idle): start it again meanwhile.
    let hidden = 0;
    const onVisible = () => {
      if (document.hidden) hidden = Date.now();
      else if (hidden && Date.now() - hidden > 5 * 60_000) void prepareIfReady();
    };
    document.addEventListener('visibilitychange', onVisible);
    const stop = keepSignedIn();
    const off = onSignedOut(() => setWho((w) => (w.state === 'in' ? { state: 'out', status: w.status } : w)));
    return () => {
      document.removeEventListener('visibilitychange', onVisible);
      stop();
      off();
    };
  }, []);

  const signedIn = () => {
    setWho({ state: 'loading' });
    location.replace('#/sessions');
    void load();
  };
  const found = matchRoute(route, ROUTES);
  if (found?.route.open) return <>{found.route.open({ params: found.params, signedIn })}</>;
  if (who.state === 'loading') return <p class="boot">Loading…</p>;
  if (who.state === 'out') return <SignInScreen status={who.status} error={who.error} />;
  const { me, status } = who;
  const at = found?.route.screen && (found.route.when?.(me) ?? true) ? found : null;
  return (
    <Shell me={me} demo={status.auth.allowAnonymous} route={route.join('/')} nav={navigation(me, at?.route ?? null)} docs={at ? { href: docsHref(at.route, at.params, me), title: at.route.title } : undefined}>
      {at ? (
        at.route.screen?.({ me, params: at.params })
      ) : (
        <p class="empty">
          Nothing here. <a href="#/sessions">Go to your sessions</a>.
        </p>
      )}
    </Shell>
  );
}

// What the first screen needs, asked for at once rather than after each render: who is signing in, and
// (on the sessions list, where most visits start) the sessions and whether the workspace can prompt yet.
prefetch('/auth/status');
prefetch('/auth/me');
if (/^#?\/?(sessions\/?)?$/.test(location.hash)) {
  prefetch('/sessions');
  prefetch('/setup');
}
// Emptied first: Preact diffs against what is there, and leaves index.html's "Loading…" beside a first
// screen that is not the loading one (a sign-in link's page).
const root = document.getElementById('app')!;
root.replaceChildren();
render(<App />, root);
