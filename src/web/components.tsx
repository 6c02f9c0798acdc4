import { type ComponentChildren, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, explain } from './api';
import { belongsTo, refusalOf, type Refusal } from './refusal';
import { settingHref, settingParts } from './setting-links';
import { useLoad } from './use-load';
import type { Me } from './types';

/**
 * The frame of every signed-in screen: navigation (only what this user may use) and sign-out. On a
 * narrow screen (under 52rem) the navigation folds behind a Menu button and opens as a column.
 */
export function Shell(props: { me: Me; demo: boolean; route: string; nav: Array<{ href: string; title: string; current: boolean }>; docs?: { href: string; title: string }; children: ComponentChildren }) {
  const { me } = props;
  const [menu, setMenu] = useState(false);
  // A link followed from the open menu closes it.
  useEffect(() => setMenu(false), [props.route]);
  // In demo mode there is no sign-in to end: the page that says so, and how to turn sign-in on.
  const demoMode = props.demo && me.demo === true;
  const signOut = async () => {
    if (demoMode) {
      location.hash = '#/signed-out';
      return;
    }
    await api('POST', '/auth/logout').catch(() => {});
    location.hash = '#/sessions';
    location.reload();
  };
  return (
    <div class="shell">
      <header class={`top ${menu ? 'open' : ''}`}>
        <a class="brand" href="#/sessions">
          Agent Workspace
        </a>
        {/* This screen's page of the docs: in a tab of its own, so the screen stays as it was. */}
        {props.docs ? (
          <a class="docs-link" href={props.docs.href} target="_blank" rel="noopener" title={`${props.docs.title} in the docs`} data-testid="docs-link">
            Docs
          </a>
        ) : null}
        <button type="button" class="menu-toggle" aria-expanded={menu} aria-controls="main-menu" onClick={() => setMenu(!menu)}>
          {menu ? 'Close' : 'Menu'}
        </button>
        <div class="menu" id="main-menu">
          <nav aria-label="Main">
            {props.nav.map((n) => (
              <a href={n.href} aria-current={n.current ? 'page' : undefined}>
                {n.title}
              </a>
            ))}
          </nav>
          <span class="who" title={me.user.email}>
            {me.user.displayName || me.user.handle} <small>({me.roles.join(', ') || 'no role'})</small>
            {demoMode ? <small class="tag">demo mode</small> : null}
          </span>
          <button type="button" class="link" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main>{props.children}</main>
    </div>
  );
}

/**
 * What "Sign out" shows in demo mode: there is no sign-in to end (every visitor acts as the operator),
 * what demo mode is, and how an administrator turns sign-in on.
 */
export function DemoSignedOut(props: { me: Me }) {
  return (
    <section class="signed-out" aria-labelledby="signed-out-title">
      <h1 id="signed-out-title">Nothing to sign out of</h1>
      <p>
        This service runs in <b>local demo mode</b>: it asks nobody to sign in, and everyone who opens it acts as its operator, {props.me.user.displayName || props.me.user.handle}
        {props.me.user.email ? ` (${props.me.user.email})` : ''}. So there is no sign-in to end: closing this tab is all it takes.
      </p>
      <p>Demo mode is for trying the service on a machine only you can reach. To have people sign in with their own accounts, an administrator of the machine configures an identity provider and turns demo mode off, then restarts the service:</p>
      <pre>
        <SettingText
          text={`AGENTWS_ALLOW_ANONYMOUS=false
# Microsoft Entra ID
AGENTWS_ENTRA_TENANT_ID=<directory (tenant) id>
# or any other OpenID Connect issuer
AGENTWS_OIDC_ISSUER_URL=https://issuer.example.com
AGENTWS_OIDC_CLIENT_ID=<application (client) id>
AGENTWS_OIDC_CLIENT_SECRET=<client secret>`}
        />
      </pre>
      <p>
        <a href="#/sessions">Back to your sessions</a>
      </p>
    </section>
  );
}

export function ErrorNote(props: { error: string | null; onClose?: () => void }) {
  if (!props.error) return null;
  return (
    <div class="error" role="alert">
      <SettingText text={props.error} />
      {props.onClose ? (
        <button type="button" class="link" onClick={props.onClose} aria-label="Dismiss">
          ×
        </button>
      ) : null}
    </div>
  );
}

export const usd = (n: number | undefined) => (n === undefined ? '' : n < 0.01 && n > 0 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`);

export const when = (iso: string | number | undefined) => (iso === undefined ? '' : new Date(iso).toLocaleString());

/** A screen's way to change something: run the change, then reload what it shows; a failure becomes its error. */
export const changer =
  (reload: () => Promise<unknown>, setError: (message: string) => void) =>
  async (change: () => Promise<unknown>): Promise<void> => {
    try {
      await change();
      await reload();
    } catch (err) {
      setError(explain(err));
    }
  };

/**
 * A form's refusal, placed where the person looks (refusal.ts maps the API's answer): one naming an
 * input of `fields` shows under that input (`at(field)`, in plain words), anything else (403, 409, an
 * input the form does not show) in its general note (`general`), at the form's top or by its button.
 * Every form of the dashboard uses it.
 */
export function useRefusal(fields: string[] = [], options: { conflictAt?: string } = {}) {
  const [refusal, setRefusalRaw] = useState<Refusal | null>(null);
  // A 409 ("already exists") is about the form's identifying input when it names none itself.
  const setRefusal = (r: Refusal | null, status?: number) =>
    setRefusalRaw(r && !r.field && status === 409 && options.conflictAt ? { ...r, field: options.conflictAt, message: r.full } : r);
  const placed = Boolean(refusal?.field && fields.some((f) => belongsTo(refusal.field, f)));
  return {
    /** The refusal no input of `fields` shows, naming its input if it has one. */
    general: refusal && !placed ? refusal.full : null,
    /** The message for the input `field` (its path, or a path inside it). */
    at: (field: string) => (refusal && placed && belongsTo(refusal.field, field) ? refusal.message : null),
    /** The message naming exactly `field`: a section's own complaint, not those of the inputs within it. */
    only: (field: string) => (refusal && placed && refusal.field === field ? refusal.message : null),
    clear: () => setRefusal(null),
    /** Shows a refusal the screen got by itself (an error it caught). */
    show: (err: unknown) => setRefusal(refusalOf(err), (err as { status?: number })?.status),
    /** Shows a sentence of the form's own (a check before any call), under `field` when given. */
    say: (message: string, field?: string) => setRefusal({ field, message, full: message }),
    /** Runs a change; a failure becomes the refusal (placed by its field) and false. */
    async run(change: () => Promise<unknown>): Promise<boolean> {
      try {
        await change();
        setRefusal(null);
        return true;
      } catch (err) {
        setRefusal(refusalOf(err), (err as { status?: number })?.status);
        return false;
      }
    },
  };
}

/** The refusal of one input, right under it (give the input aria-describedby={id}). */
export function FieldError(props: { message: string | null; id?: string }) {
  return props.message ? (
    <span class="field-error" role="alert" id={props.id}>
      <SettingText text={props.message} />
    </span>
  ) : null;
}

/** A form's refusal that names none of its inputs, by its buttons. */
export function FormError(props: { message: string | null }) {
  return props.message ? (
    <p class="error form-error" role="alert">
      <SettingText text={props.message} />
    </p>
  ) : null;
}

/**
 * Names for the `user:<uuid>` references some answers carry (who created a SCIM token, who set the
 * embedder): the tenant's people, read once where the viewer may list them; else the reference as is.
 */
export function usePersonNames(canList = true): (ref: string) => string {
  // Only where the viewer may list people (admin.manage_users): a refusal would be a console error.
  const people =
    useLoad(() =>
      canList
        ? api<{ users: Array<{ id: string; handle: string; email: string; displayName: string }> }>('GET', '/admin/users').then(
            (r) => new Map(r.users.map((u) => [u.id, { name: u.displayName || u.handle, email: u.email }])),
          )
        : Promise.resolve(new Map<string, { name: string; email: string }>()),
    ).data ?? new Map<string, { name: string; email: string }>();
  return (ref: string) => {
    const p = people.get(/^user:(.+)$/.exec(ref)?.[1] ?? '');
    return p ? `${p.name} <${p.email}>` : ref;
  };
}

/** The message, its setting names linked; a message that names none is the same text. */
export function SettingText(props: { text: string | null | undefined }) {
  if (!props.text) return null;
  const parts = settingParts(props.text);
  if (!parts.some((p) => p.setting)) return <>{props.text}</>;
  return (
    <>
      {parts.map((p) =>
        p.setting ? (
          <a class="setting" href={settingHref(p.text)} target="_blank" rel="noopener" title={`${p.text} in the configuration reference`}>
            {p.text}
          </a>
        ) : (
          p.text
        ),
      )}
    </>
  );
}

/** A column of a `Table`: its heading ('' for none) and what each row shows in it. */
export interface Column<T> {
  title: string;
  cell?: (item: T) => ComponentChildren;
  /** The cell's tooltip (the raw reference behind a name, say). */
  hint?: (item: T) => string | undefined;
  /** The cell's data-testid. */
  testId?: string;
}

/**
 * The dashboard's tables: headings, then a row an item. `row` draws a row itself where each needs its own
 * state (an inline form): `columns` then give only the headings.
 */
export function Table<T>(props: {
  label?: string;
  columns: Array<Column<T>>;
  items: T[];
  /** Each row's key among the others. */
  id: (item: T) => string;
  testId?: (item: T) => string;
  row?: (item: T) => ComponentChildren;
}) {
  return (
    <table aria-label={props.label}>
      <thead>
        <tr>
          {props.columns.map((c) => (
            <th>{c.title}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.items.map((item) =>
          props.row ? (
            <Fragment key={props.id(item)}>{props.row(item)}</Fragment>
          ) : (
            <tr key={props.id(item)} data-testid={props.testId?.(item)}>
              {props.columns.map((c) => (
                <td title={c.hint?.(item)} data-testid={c.testId}>
                  {c.cell?.(item)}
                </td>
              ))}
            </tr>
          ),
        )}
      </tbody>
    </table>
  );
}
