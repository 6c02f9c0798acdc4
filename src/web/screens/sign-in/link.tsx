import { useEffect, useState } from 'preact/hooks';
import { SettingText } from '../../components';
import { api, explain } from '../../api';

/**
 * The page a one-time sign-in link opens (`aws user sign-in-link`): `/#/sign-in-link/<token>`. The token
 * is in the fragment, which the browser never sends, so it reaches no access log, proxy or Referer; and
 * nothing is used until the person presses Sign in, so a previewer or mail scanner that fetches the link
 * (or even runs this page) leaves it unused. The token is taken out of the address bar at once.
 */
export function SignInLinkScreen(props: { token: string | undefined; onSignedIn: () => void }) {
  const [token] = useState(props.token);
  const [state, setState] = useState<{ busy: boolean; error?: string }>({ busy: false });
  useEffect(() => {
    // Out of the address bar and the history (the token alone would still sign in until used).
    if (props.token) history.replaceState(null, '', `${location.pathname}#/sign-in-link`);
  }, []);

  const signIn = async () => {
    setState({ busy: true });
    try {
      await api('POST', '/auth/link', { token });
      props.onSignedIn();
    } catch (err) {
      setState({ busy: false, error: explain(err) });
    }
  };

  return (
    <div class="signin">
      <h1>Agent Workspace</h1>
      {!token ? (
        <p class="error" role="alert">
          This page needs the whole sign-in link, as the command printed it. Links work once: ask the operator for a new one.
        </p>
      ) : state.error ? (
        <p class="error" role="alert">
          <SettingText text={state.error} />
        </p>
      ) : (
        <>
          <p>This one-time link signs you in. It works once, for a few minutes.</p>
          <button type="button" class="primary" disabled={state.busy} onClick={signIn}>
            Sign in
          </button>
        </>
      )}
      <p>
        <a href="#/sessions">Go to the dashboard</a>
      </p>
    </div>
  );
}
