import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { useLoad } from '../use-load';
import { changer, ErrorNote, when } from '../components';
import type { MyGitConnection } from '../wire';

/** What not being connected means for the person's agents, by the host's mode. */
const unconnected = (c: MyGitConnection) =>
  c.userConnections === 'required'
    ? `Your agents cannot reach ${c.host} until you connect your account.`
    : c.userConnections === 'optional'
      ? "Until you connect, your agents reach it with your organisation's shared access."
      : 'This host no longer takes personal connections.';

/**
 * A person's own accounts at the git hosts: connected through the host's consent page, so
 * their agents clone and push as them. The host sends the browser back to the API, which returns here
 * with `?connected=<host>` or `?error=<message>` after the route.
 */
export function ConnectionsScreen() {
  const [notice, setNotice] = useState<string | null>(null);
  const { data: items, error, setError, reload: load } = useLoad(() => api<{ git: MyGitConnection[] }>('GET', '/me/connections').then((r) => r.git));
  useEffect(() => {
    const readBack = () => {
      const back = new URLSearchParams(location.hash.split('?')[1] ?? '');
      const connected = back.get('connected');
      const failed = back.get('error');
      if (!connected && !failed) return false;
      setNotice(connected ? `Connected to ${connected}: your agents now act as you there.` : null);
      setError(failed ? `Not connected: ${failed}` : null);
      // Said once: a reload or a bookmark must not announce it again.
      history.replaceState(null, '', '#/connections');
      return true;
    };
    readBack();
    void load();
    // Back from the host in this same page (the hash changed, the screen stayed): said and reloaded too.
    const onHash = () => readBack() && void load();
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  const run = changer(load, setError);
  const connect = async (host: string) => {
    try {
      const { authorizeUrl } = await api<{ authorizeUrl: string }>('POST', `/me/connections/git/${encodeURIComponent(host)}`);
      window.location.href = authorizeUrl;
    } catch (err) {
      setError(explain(err));
    }
  };
  const disconnect = (host: string) => {
    if (!confirm(`Disconnect your account from ${host}? Your agents stop acting as you there.`)) return;
    setNotice(null);
    void run(() => api('DELETE', `/me/connections/git/${encodeURIComponent(host)}`));
  };

  return (
    <section class="connections">
      <h1>Connections</h1>
      <p class="hint">Connect your own account at a git host and your agents clone and push as you there, with what your account may do. Your tokens stay on the service, never in a sandbox.</p>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : null}
      <ErrorNote error={error} onClose={() => setError(null)} />
      {items?.length === 0 ? <p class="empty">No git host takes personal connections yet. Ask an admin of your organisation to turn them on for a host (Admin → Git hosts).</p> : null}
      <ul class="list" aria-label="Git hosts">
        {items?.map((c) => (
          <li key={c.host} data-testid="connection">
            <span class="grow">
              <strong>{c.host}</strong> <small>{c.baseUrl}</small>
              {c.userConnections === 'required' ? <small class="tag">required</small> : null}
              <br />
              <small>
                {c.connected
                  ? [`Connected as ${c.account ?? 'your account'}`, `since ${when(c.connectedAt!)}`, c.expiresAt ? `access token valid until ${when(c.expiresAt)}` : ''].filter(Boolean).join(' · ')
                  : `Not connected. ${unconnected(c)}`}
              </small>
              {c.connected && c.problem ? (
                <>
                  <br />
                  <small class="problem" role="status">
                    Could not be refreshed ({c.problem}).{' '}
                    {c.userConnections === 'required' ? `Your agents cannot reach ${c.host} until you reconnect.` : "Until it works again, your agents reach it with your organisation's shared access. Reconnect to fix it."}
                  </small>
                </>
              ) : null}
            </span>
            {c.connected ? (
              <span>
                {/* Another account, or a grant the host revoked: connecting again replaces the connection. */}
                {c.userConnections !== 'off' ? (
                  <button type="button" onClick={() => void connect(c.host)}>
                    Reconnect
                  </button>
                ) : null}
                <button type="button" class="danger" onClick={() => disconnect(c.host)}>
                  Disconnect
                </button>
              </span>
            ) : c.userConnections !== 'off' ? (
              <button type="button" class="primary" onClick={() => void connect(c.host)}>
                Connect
              </button>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  );
}
