import { SettingText } from '../../components';
import type { AuthStatus } from '../../wire';
export type { AuthStatus };

/**
 * What /v1/auth/status says this service offers: sign-in at the identity provider, or local demo mode;
 * with neither, what the operator must configure, with the exact variables.
 */
export function SignInScreen(props: { status: AuthStatus | null; error?: string }) {
  const s = props.status?.auth;
  const back = `${location.pathname}${location.hash}`;
  return (
    <div class="signin">
      <h1>Agent Workspace</h1>
      {props.error ? (
        <p class="error" role="alert">
          <SettingText text={props.error} />
        </p>
      ) : null}
      {!s ? <p>The service does not answer. Try again in a moment.</p> : null}
      {s?.entraConfigured ? (
        <a class="button primary" href={`/v1/auth/login?redirect=${encodeURIComponent(back)}`}>
          Sign in with your organisation
        </a>
      ) : null}
      {s && !s.entraConfigured && s.allowAnonymous ? (
        <p>
          Local demo mode: this service acts as its operator without a sign-in. <a href="#/sessions" onClick={() => location.reload()}>Continue</a>
        </p>
      ) : null}
      {s && !s.entraConfigured && !s.allowAnonymous ? (
        <div class="setup">
          <h2>Sign-in is not set up yet</h2>
          <p>Ask the operator of this service to configure an OpenID Connect identity provider in its config file or environment, then restart it:</p>
          <pre>
            <SettingText
              text={`# Microsoft Entra ID
AGENTWS_ENTRA_TENANT_ID=<directory (tenant) id>
# or any other OpenID Connect issuer
AGENTWS_OIDC_ISSUER_URL=https://issuer.example.com
AGENTWS_OIDC_CLIENT_ID=<application (client) id>
AGENTWS_OIDC_CLIENT_SECRET=<client secret>
AGENTWS_PUBLIC_URL=https://agents.example.com
# redirect URI to register at the provider: <AGENTWS_PUBLIC_URL>/v1/auth/callback`}
            />
          </pre>
          <p>
            <SettingText text="Or, on a machine only you can reach (AGENTWS_HOST=127.0.0.1, no identity provider), turn on local demo mode: " />
            <code>
              <SettingText text="AGENTWS_ALLOW_ANONYMOUS=true" />
            </code>{' '}
            with{' '}
            <code>
              <SettingText text="AGENTWS_OPERATOR_EMAIL" />
            </code>
            .
          </p>
          <p>
            <a href="/docs/admin/identity" target="_blank" rel="noopener">
              Setting up sign-in, in the docs
            </a>
          </p>
        </div>
      ) : null}
    </div>
  );
}
