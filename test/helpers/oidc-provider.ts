import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
// oidc-provider ships no type declarations (and @types/oidc-provider is not installed), so it is `any` here;
// the few members this file uses are described by OidcProviderInstance below.
// @ts-ignore
import Provider from 'oidc-provider';

/**
 * An in-process OpenID Connect provider for tests (oidc-provider v9 on a loopback port), and a fetch-based
 * "browser" that signs in through it: authorization code + PKCE against our service, no real browser.
 *
 * The provider serves its own minimal login and consent pages under /interaction/<uid> (the same shape as
 * oidc-provider's devInteractions: a form with `login` and `password` inputs, then a consent form), because
 * devInteractions takes the typed login verbatim as the account id, which breaks signing in by email.
 */

export interface TestOidcUser {
  sub: string;
  email: string;
  name: string;
  preferred_username?: string;
  /** Entra-style directory (tenant) id claim. */
  tid?: string;
  groups?: string[];
  /**
   * Entra's group overage instead of `groups`: `_claim_names: { groups: 'src1' }` and `_claim_sources:
   * { src1: { endpoint } }` (the Graph URL), plus `hasgroups` when given.
   */
  groupOverage?: { endpoint: string; hasgroups?: boolean };
}

export interface TestOidcProvider {
  /** http://127.0.0.1:<port>, no trailing slash; discovery at `${issuer}/.well-known/openid-configuration`. */
  issuer: string;
  clientId: string;
  /** '' when the client was registered as a public client (token_endpoint_auth_method 'none'). */
  clientSecret: string;
  /** Register/replace the users the login form accepts (login = the user's sub or email, any non-empty password). */
  setUsers(users: TestOidcUser[]): void;
  /**
   * Replace the client's registered redirect URIs (exact match), e.g. once the service's port is known.
   * Takes effect for the next authorization request.
   */
  setRedirectUris(redirectUris: string[]): void;
  /** The underlying oidc-provider instance (escape hatch: events, models). */
  readonly provider: unknown;
  close(): Promise<void>;
}

export interface StartOidcProviderOptions {
  redirectUris: string[];
  clientId?: string;
  /** Defaults to a random secret. Pass '' to register a public client (token_endpoint_auth_method 'none', PKCE only). */
  clientSecret?: string;
  users?: TestOidcUser[];
}

/** The members of oidc-provider's Provider this file relies on. */
interface OidcProviderInstance {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{
    uid: string;
    prompt: { name: string; details: Record<string, unknown> & { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> } };
    params: Record<string, unknown> & { client_id: string };
    session?: { accountId?: string };
    grantId?: string;
  }>;
  interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
  Grant: {
    new (init: { accountId: string; clientId: string }): OidcGrant;
    find(id: string): Promise<OidcGrant | undefined>;
  };
}
interface OidcGrant {
  addOIDCScope(scope: string): void;
  addOIDCClaims(claims: string[]): void;
  addResourceScope(indicator: string, scope: string): void;
  save(): Promise<string>;
}

export async function startOidcProvider(options: StartOidcProviderOptions): Promise<TestOidcProvider> {
  const clientId = options.clientId ?? 'test-client';
  const clientSecret = options.clientSecret ?? randomBytes(24).toString('base64url');
  let redirectUris = [...options.redirectUris];
  const users = new Map<string, TestOidcUser>();
  const setUsers = (list: TestOidcUser[]) => {
    users.clear();
    for (const user of list) users.set(user.sub, user);
  };
  setUsers(options.users ?? []);
  const findUser = (login: string): TestOidcUser | undefined =>
    users.get(login) ?? [...users.values()].find((u) => u.email.toLowerCase() === login.toLowerCase());

  // The issuer must be known when the Provider is built: listen on an ephemeral loopback port first.
  const server = http.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const issuer = `http://127.0.0.1:${port}`;

  const closeServer = async () => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  };

  try {
    const { privateKey } = await generateKeyPair('RS256', { extractable: true });
    const signingKey = { ...(await exportJWK(privateKey)), kid: `test-${randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };

    // Clients are served by the adapter rather than the static `clients` list so setRedirectUris can change them
    // (oidc-provider caches static clients for its lifetime; adapter-backed ones are re-read per request).
    const clientMetadata = () => ({
      client_id: clientId,
      ...(clientSecret ? { client_secret: clientSecret, token_endpoint_auth_method: 'client_secret_basic' } : { token_endpoint_auth_method: 'none' }),
      redirect_uris: redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      id_token_signed_response_alg: 'RS256',
    });

    const provider: OidcProviderInstance = new Provider(issuer, {
      adapter: memoryAdapter((id) => (id === clientId ? clientMetadata() : undefined)),
      clients: [],
      jwks: { keys: [signingKey] },
      cookies: { keys: [randomBytes(32).toString('hex')] },
      findAccount: async (_ctx: unknown, id: string) => {
        const user = users.get(id);
        if (!user) return undefined;
        return {
          accountId: user.sub,
          claims: async () => ({
            sub: user.sub,
            email: user.email,
            email_verified: true,
            name: user.name,
            ...(user.preferred_username !== undefined && { preferred_username: user.preferred_username }),
            ...(user.tid !== undefined && { tid: user.tid }),
            ...(user.groups !== undefined && { groups: user.groups }),
            ...(user.groupOverage && {
              _claim_names: { groups: 'src1' },
              _claim_sources: { src1: { endpoint: user.groupOverage.endpoint } },
              ...(user.groupOverage.hasgroups !== undefined && { hasgroups: user.groupOverage.hasgroups }),
            }),
          }),
        };
      },
      claims: {
        openid: ['sub'],
        email: ['email', 'email_verified'],
        profile: ['name', 'preferred_username', 'tid', 'groups', 'hasgroups'],
      },
      // Put the scope-granted claims into the ID token itself (as Entra does), not only into userinfo.
      conformIdTokenClaims: false,
      pkce: { required: () => true },
      // Explicit lifetimes (seconds) and error page: the defaults print a NOTICE each the first time they are used.
      ttl: {
        AccessToken: 3600,
        AuthorizationCode: 60,
        BackchannelAuthenticationRequest: 600,
        ClientCredentials: 600,
        DeviceCode: 600,
        Grant: 86_400,
        IdToken: 3600,
        Interaction: 3600,
        PreAuthorizedCode: 60,
        RefreshToken: 86_400,
        Session: 86_400,
      },
      renderError: async (ctx: { type: string; body: unknown }, out: Record<string, string>) => {
        ctx.type = 'html';
        ctx.body = `<!DOCTYPE html><html><head><title>oidc error</title></head><body>${Object.entries(out)
          .map(([key, value]) => `<pre>${escapeHtml(key)}: ${escapeHtml(String(value))}</pre>`)
          .join('\n')}</body></html>`;
      },
      features: { devInteractions: { enabled: false } },
      interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    });

    const providerCallback = provider.callback();
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const path = new URL(req.url ?? '/', issuer).pathname;
      const match = /^\/interaction\/([^/]+)(?:\/(login|confirm|abort))?$/.exec(path);
      if (!match) {
        providerCallback(req, res);
        return;
      }
      handleInteraction(provider, findUser, req, res, match[1], match[2]).catch((err: unknown) => {
        if (res.headersSent) {
          res.destroy();
          return;
        }
        res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end(`interaction failed: ${(err as Error)?.message ?? String(err)}`);
      });
    });

    return {
      issuer,
      clientId,
      clientSecret,
      setUsers,
      setRedirectUris(uris: string[]) {
        redirectUris = [...uris];
      },
      provider,
      close: closeServer,
    };
  } catch (err) {
    await closeServer();
    throw err;
  }
}

/** The login and consent pages (GET /interaction/:uid) and their form targets. */
async function handleInteraction(
  provider: OidcProviderInstance,
  findUser: (login: string) => TestOidcUser | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  uid: string,
  action: string | undefined,
): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction uid does not match the interaction cookie');
  const { prompt, params, session, grantId } = details;

  if (req.method === 'GET' && action === undefined) {
    if (prompt.name === 'login') return sendPage(res, 200, 'Sign-in', loginForm(uid, ''));
    if (prompt.name === 'consent') return sendPage(res, 200, 'Authorize', consentForm(uid, prompt.details));
    throw new Error(`prompt ${prompt.name} is not implemented`);
  }
  if (req.method === 'GET' && action === 'abort') {
    return provider.interactionFinished(req, res, { error: 'access_denied', error_description: 'End-User aborted interaction' }, { mergeWithLastSubmission: false });
  }
  if (req.method !== 'POST' || action === undefined) throw new Error(`${req.method} ${action ?? ''} is not supported`);

  const form = new URLSearchParams(await readBody(req));
  if (action === 'login') {
    if (prompt.name !== 'login') throw new Error(`expected the ${prompt.name} prompt, got a login submission`);
    const login = form.get('login') ?? '';
    const user = findUser(login);
    if (!user || !form.get('password')) {
      const error = user ? 'a password is required' : `unknown user ${login}`;
      return sendPage(res, 200, 'Sign-in', loginForm(uid, error));
    }
    return provider.interactionFinished(req, res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
  }

  // action === 'confirm' (consent), as oidc-provider's devInteractions does it.
  if (prompt.name !== 'consent') throw new Error(`expected the ${prompt.name} prompt, got a consent submission`);
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session?.accountId ?? '', clientId: params.client_id });
  if (!grant) throw new Error('grant not found');
  const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
  if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
  if (missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(missingResourceScopes)) grant.addResourceScope(indicator, scopes.join(' '));
  }
  return provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

function loginForm(uid: string, error: string): string {
  return [
    error ? `<p class="error">${escapeHtml(error)}</p>` : '',
    `<form autocomplete="off" action="/interaction/${escapeHtml(uid)}/login" method="post">`,
    '<input type="hidden" name="prompt" value="login"/>',
    '<input required type="text" name="login" placeholder="sub or email">',
    '<input required type="password" name="password" placeholder="any password">',
    '<button type="submit">Sign-in</button>',
    '</form>',
    `<a href="/interaction/${escapeHtml(uid)}/abort">[ Cancel ]</a>`,
  ].join('\n');
}

function consentForm(uid: string, details: Record<string, unknown>): string {
  const scopes = ((details.missingOIDCScope as string[] | undefined) ?? []).map((s) => `<li>${escapeHtml(s)}</li>`).join('');
  return [
    `<ul>${scopes}</ul>`,
    `<form autocomplete="off" action="/interaction/${escapeHtml(uid)}/confirm" method="post">`,
    '<input type="hidden" name="prompt" value="consent"/>',
    '<button autofocus type="submit">Continue</button>',
    '</form>',
    `<a href="/interaction/${escapeHtml(uid)}/abort">[ Cancel ]</a>`,
  ].join('\n');
}

function sendPage(res: ServerResponse, status: number, title: string, body: string): void {
  const html = `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1>\n${body}\n</body></html>`;
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(html);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * oidc-provider's storage adapter, in memory and private to one provider (the bundled MemoryAdapter shares one
 * module-level store between providers). Client lookups are answered by `clients`.
 */
function memoryAdapter(clients: (id: string) => Record<string, unknown> | undefined) {
  type Entry = { payload: Record<string, unknown>; expiresAt: number };
  const store = new Map<string, Entry>();
  const live = (key: string): Record<string, unknown> | undefined => {
    const entry = store.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return entry.payload;
  };
  return class TestMemoryAdapter {
    constructor(private readonly model: string) {}
    private key(id: string) {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>, expiresIn?: number) {
      store.set(this.key(id), { payload: structuredClone(payload), expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
    }
    async find(id: string) {
      if (this.model === 'Client') return clients(id);
      const payload = live(this.key(id));
      return payload && structuredClone(payload);
    }
    async findByUid(uid: string) {
      for (const [key] of store) {
        if (!key.startsWith(`${this.model}:`)) continue;
        const payload = live(key);
        if (payload?.uid === uid) return structuredClone(payload);
      }
      return undefined;
    }
    async findByUserCode(userCode: string) {
      for (const [key] of store) {
        if (!key.startsWith(`${this.model}:`)) continue;
        const payload = live(key);
        if (payload?.userCode === userCode) return structuredClone(payload);
      }
      return undefined;
    }
    async consume(id: string) {
      const entry = store.get(this.key(id));
      if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [key, entry] of store) if (entry.payload.grantId === grantId) store.delete(key);
    }
  };
}

// ---------------------------------------------------------------------------------------------------------------
// browserSignIn: a fetch-based browser.

export interface BrowserSignInResult {
  /** Status of our service's callback response (e.g. 302 or 403). */
  finalStatus: number;
  /** Location header of the callback's response. */
  location: string | null;
  /** The full callback URL requested on our service (code, state, iss in the query), after `tamper`. */
  callbackUrl: string;
  /** Set-Cookie headers our service sent on the callback response. */
  setCookies: string[];
  /** Body of the callback response. */
  body: string;
  /** Cookie jar for our service's (the callback's) origin after the flow: name -> value. */
  cookies: Record<string, string>;
}

export interface BrowserSignInOptions {
  /** Defaults to 'pw' (the provider accepts any non-empty password). */
  password?: string;
  /** Modify the callback URL (e.g. its state or code) just before the browser follows the redirect to it. */
  tamper?: (url: URL) => URL | void | Promise<URL | void>;
}

const MAX_STEPS = 30;

/**
 * Drives a browser sign-in with fetch and per-origin cookie jars: GET `startUrl` (our service's login route),
 * follow its redirects to the identity provider, submit the login form with `login` and the password, approve
 * the consent form, follow the provider's redirects until one leaves the provider (that is our callback), then
 * request the callback once and report its response without following it.
 * Throws (with the page's status and an excerpt) if the flow goes anywhere else.
 */
export async function browserSignIn(startUrl: string, login: string, options: BrowserSignInOptions = {}): Promise<BrowserSignInResult> {
  const password = options.password ?? 'pw';
  const jars = new CookieJars();
  const visited: string[] = [];

  const request = async (url: URL, init: { method?: string; form?: URLSearchParams } = {}) => {
    if (visited.length >= MAX_STEPS) throw new Error(`browserSignIn: more than ${MAX_STEPS} requests:\n${visited.join('\n')}`);
    const method = init.method ?? 'GET';
    visited.push(`${method} ${url.href}`);
    const headers: Record<string, string> = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'user-agent': 'browserSignIn (test)' };
    const cookie = jars.header(url);
    if (cookie) headers.cookie = cookie;
    if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await fetch(url, { method, headers, body: init.form?.toString(), redirect: 'manual', signal: AbortSignal.timeout(30_000) });
    const setCookies = res.headers.getSetCookie();
    jars.store(url, setCookies);
    const body = await res.text();
    const location = res.headers.get('location');
    const redirect = res.status >= 300 && res.status < 400 && location !== null ? new URL(location, url) : null;
    return { res, body, setCookies, redirect };
  };
  const unexpected = (what: string, r: { res: Response; body: string }) =>
    new Error(`browserSignIn: ${what}: ${r.res.status} ${r.res.statusText}\n${r.body.slice(0, 1000)}\nrequests:\n${visited.join('\n')}`);

  // 1. Our service's login route, and any redirects it makes on its own origin, up to the redirect to the provider.
  const serviceOrigin = new URL(startUrl).origin;
  let step = await request(new URL(startUrl));
  while (step.redirect && step.redirect.origin === serviceOrigin) step = await request(step.redirect);
  if (!step.redirect) throw unexpected(`expected ${startUrl} to redirect to the identity provider, got`, step);
  const providerOrigin = step.redirect.origin;

  // 2. The provider: follow its redirects on its own origin and fill in its forms, until it redirects elsewhere.
  let loginSubmitted = false;
  let next: { url: URL; method?: string; form?: URLSearchParams } = { url: step.redirect };
  for (;;) {
    step = await request(next.url, next);
    if (step.redirect) {
      if (step.redirect.origin !== providerOrigin) break;
      // 307/308 keep the method and body; 301/302/303 become a GET, as browsers do.
      next = step.res.status === 307 || step.res.status === 308 ? { ...next, url: step.redirect } : { url: step.redirect };
      continue;
    }
    const forms = step.res.status === 200 ? parseForms(step.body) : [];
    const loginForm = forms.find((f) => f.inputNames.has('login'));
    if (loginForm) {
      if (loginSubmitted) {
        const error = /<p class="error">([\s\S]*?)<\/p>/.exec(step.body)?.[1];
        throw unexpected(`the identity provider did not accept login ${JSON.stringify(login)}${error ? ` (${decodeEntities(error)})` : ''}`, step);
      }
      loginSubmitted = true;
      const form = new URLSearchParams(loginForm.fields);
      form.set('login', login);
      form.set('password', password);
      next = { url: new URL(loginForm.action, next.url), method: loginForm.method, form };
      continue;
    }
    const consentForm = forms.find((f) => f.fields.get('prompt') === 'consent') ?? (loginSubmitted ? forms[0] : undefined);
    if (consentForm) {
      next = { url: new URL(consentForm.action, next.url), method: consentForm.method, form: new URLSearchParams(consentForm.fields) };
      continue;
    }
    throw unexpected(`unexpected identity provider response to ${next.method ?? 'GET'} ${next.url.href}`, step);
  }

  // 3. The redirect back to our service's callback (optionally tampered with), requested once.
  let callback = new URL(step.redirect.href);
  if (options.tamper) callback = (await options.tamper(callback)) ?? callback;
  const result = await request(callback);
  return {
    finalStatus: result.res.status,
    location: result.res.headers.get('location'),
    callbackUrl: callback.href,
    setCookies: result.setCookies,
    body: result.body,
    cookies: jars.values(callback.origin),
  };
}

interface ParsedForm {
  action: string;
  method: string;
  /** Inputs with a value attribute (hidden inputs and prefilled ones). */
  fields: Map<string, string>;
  /** All input names, with or without a value. */
  inputNames: Set<string>;
}

function parseForms(html: string): ParsedForm[] {
  const forms: ParsedForm[] = [];
  for (const [, attrs, inner] of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    const fields = new Map<string, string>();
    const inputNames = new Set<string>();
    for (const [input] of inner.matchAll(/<input\b[^>]*>/gi)) {
      const name = attr(input, 'name');
      if (name === undefined) continue;
      inputNames.add(name);
      const type = (attr(input, 'type') ?? 'text').toLowerCase();
      if ((type === 'checkbox' || type === 'radio') && !/\schecked\b/i.test(input)) continue;
      const value = attr(input, 'value');
      if (value !== undefined) fields.set(name, value);
    }
    forms.push({ action: attr(attrs, 'action') ?? '', method: (attr(attrs, 'method') ?? 'GET').toUpperCase(), fields, inputNames });
  }
  return forms;
}

function attr(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, 'i').exec(tag);
  if (!m) return undefined;
  return decodeEntities(m[1] ?? m[2] ?? m[3] ?? '');
}

function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos|#39);/gi, (_, e: string) => {
    const lower = e.toLowerCase();
    if (lower.startsWith('#x')) return String.fromCodePoint(parseInt(lower.slice(2), 16));
    if (lower.startsWith('#')) return String.fromCodePoint(parseInt(lower.slice(1), 10));
    return ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" } as Record<string, string>)[lower] ?? _;
  });
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

/**
 * Cookie jars keyed by origin (scheme + host + port, so the provider and our service never share cookies even
 * on the same host), honouring Path, Max-Age and Expires. Domain, Secure and SameSite are ignored.
 */
class CookieJars {
  private readonly jars = new Map<string, Map<string, { name: string; value: string; path: string; expiresAt: number }>>();

  store(url: URL, setCookies: string[]): void {
    let jar = this.jars.get(url.origin);
    if (!jar) this.jars.set(url.origin, (jar = new Map()));
    for (const line of setCookies) {
      const [pair, ...attributes] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      let path = defaultPath(url.pathname);
      let expiresAt = Infinity;
      let maxAgeSeen = false;
      for (const attribute of attributes) {
        const i = attribute.indexOf('=');
        const key = (i === -1 ? attribute : attribute.slice(0, i)).trim().toLowerCase();
        const val = i === -1 ? '' : attribute.slice(i + 1).trim();
        if (key === 'path' && val.startsWith('/')) path = val;
        else if (key === 'max-age' && /^-?\d+$/.test(val)) {
          maxAgeSeen = true;
          expiresAt = Date.now() + Number(val) * 1000;
        } else if (key === 'expires' && !maxAgeSeen) {
          const t = Date.parse(val);
          if (!Number.isNaN(t)) expiresAt = t;
        }
      }
      const key = `${name}\0${path}`;
      if (expiresAt <= Date.now()) jar.delete(key);
      else jar.set(key, { name, value, path, expiresAt });
    }
  }

  private live(origin: string) {
    const jar = this.jars.get(origin);
    if (!jar) return [];
    const now = Date.now();
    for (const [key, c] of jar) if (c.expiresAt <= now) jar.delete(key);
    return [...jar.values()];
  }

  header(url: URL): string {
    return this.live(url.origin)
      .filter((c) => pathMatches(url.pathname, c.path))
      .sort((a, b) => b.path.length - a.path.length)
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }

  /** name -> value for an origin; where a name is set on several paths, the most specific path wins. */
  values(origin: string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const c of this.live(origin).sort((a, b) => a.path.length - b.path.length)) out[c.name] = c.value;
    return out;
  }
}

function defaultPath(requestPath: string): string {
  const i = requestPath.lastIndexOf('/');
  return i <= 0 ? '/' : requestPath.slice(0, i);
}

function pathMatches(requestPath: string, cookiePath: string): boolean {
  if (requestPath === cookiePath) return true;
  if (!requestPath.startsWith(cookiePath)) return false;
  return cookiePath.endsWith('/') || requestPath[cookiePath.length] === '/';
}
