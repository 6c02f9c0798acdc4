import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, explain, keepSignedIn, onSignedOut, prefetch } from './api';
import { DemoSignedOut, Shell } from './components';
import { AdminScreen } from './screens/admin';
import { ConnectionsScreen } from './screens/connections';
import { MemoriesScreen } from './screens/memories';
import { PlansScreen } from './screens/plans';
import { SkillsScreen } from './screens/skills';
import { SessionsScreen } from './screens/sessions';
import { SessionScreen } from './screens/session-screen';
import { SignInScreen, type AuthStatus } from './screens/sign-in';
import { SignInLinkScreen } from './screens/sign-in-link';
import { TokensScreen } from './screens/tokens';
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

  // A one-time sign-in link, whoever is signed in now: using it signs this browser in as its person.
  if (route[0] === 'sign-in-link') {
    return (
      <SignInLinkScreen
        token={route[1]}
        onSignedIn={() => {
          setWho({ state: 'loading' });
          location.replace('#/sessions');
          void load();
        }}
      />
    );
  }
  if (who.state === 'loading') return <p class="boot">Loading…</p>;
  if (who.state === 'out') return <SignInScreen status={who.status} error={who.error} />;
  const { me, status } = who;
  const [screen, id] = route;
  return (
    <Shell me={me} demo={status.auth.allowAnonymous} route={screen}>
      {screen === 'sessions' && id ? <SessionScreen me={me} sessionId={id} key={id} /> : null}
      {screen === 'sessions' && !id ? <SessionsScreen me={me} /> : null}
      {screen === 'plans' ? <PlansScreen planId={id} key={id ?? 'list'} /> : null}
      {screen === 'memories' ? <MemoriesScreen me={me} /> : null}
      {screen === 'skills' ? <SkillsScreen me={me} skillId={id} key={id ?? 'list'} /> : null}
      {screen === 'connections' ? <ConnectionsScreen /> : null}
      {screen === 'tokens' ? <TokensScreen /> : null}
      {screen === 'admin' ? <AdminScreen me={me} tab={id ?? 'users'} /> : null}
      {screen === 'signed-out' && me.demo ? <DemoSignedOut me={me} /> : null}
      {!['sessions', 'plans', 'memories', 'skills', 'connections', 'tokens', 'admin', ...(me.demo ? ['signed-out'] : [])].includes(screen) ? <p class="empty">Nothing here. <a href="#/sessions">Go to your sessions</a>.</p> : null}
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
