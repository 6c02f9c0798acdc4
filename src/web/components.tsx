import type { ComponentChildren } from 'preact';
import { adminTabs } from './admin-tabs';
import { api, explain } from './api';
import type { Me } from './types';

/** The frame of every signed-in screen: navigation (only what this user may use) and sign-out. */
export function Shell(props: { me: Me; demo: boolean; route: string; children: ComponentChildren }) {
  const { me } = props;
  const screens: Array<[string, string]> = [
    ['sessions', 'Sessions'],
    ['plans', 'Plans'],
    ['memories', 'Memories'],
    ['skills', 'Skills'],
    // Everyone's: a person's own accounts at the git hosts, which their agents then act as.
    ['connections', 'Connections'],
    // Everyone's: tokens for the person's own scripts.
    ['tokens', 'API tokens'],
    // Only when the user's permissions open at least one admin tab.
    ...(adminTabs(me.permissions).length ? ([['admin', 'Admin']] as Array<[string, string]>) : []),
  ];
  const signOut = async () => {
    await api('POST', '/auth/logout').catch(() => {});
    location.hash = '#/sessions';
    location.reload();
  };
  return (
    <div class="shell">
      <header class="top">
        <a class="brand" href="#/sessions">
          Agent Workspace
        </a>
        <nav aria-label="Main">
          {screens.map(([id, label]) => (
            <a href={`#/${id}`} aria-current={props.route === id ? 'page' : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="who" title={me.user.email}>
          {me.user.displayName || me.user.handle} <small>({me.roles.join(', ') || 'no role'})</small>
          {props.demo && me.user.email ? <small class="tag">demo mode</small> : null}
        </span>
        <button type="button" class="link" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>{props.children}</main>
    </div>
  );
}

export function ErrorNote(props: { error: string | null; onClose?: () => void }) {
  if (!props.error) return null;
  return (
    <div class="error" role="alert">
      {props.error}
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
