import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { adminTabs } from './admin-tabs';
import { api, explain } from './api';
import { belongsTo, refusalOf, type Refusal } from './refusal';
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

/**
 * A form's refusal, placed where the person looks (refusal.ts maps the API's answer): one naming an
 * input of `fields` shows under that input (`at(field)`, in plain words), anything else (403, 409, an
 * input the form does not show) in its general note (`general`), at the form's top or by its button.
 * Every form of the dashboard uses it.
 */
export function useRefusal(fields: string[] = []) {
  const [refusal, setRefusal] = useState<Refusal | null>(null);
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
    show: (err: unknown) => setRefusal(refusalOf(err)),
    /** Shows a sentence of the form's own (a check before any call), under `field` when given. */
    say: (message: string, field?: string) => setRefusal({ field, message, full: message }),
    /** Runs a change; a failure becomes the refusal (placed by its field) and false. */
    async run(change: () => Promise<unknown>): Promise<boolean> {
      try {
        await change();
        setRefusal(null);
        return true;
      } catch (err) {
        setRefusal(refusalOf(err));
        return false;
      }
    },
  };
}

/** The refusal of one input, right under it (give the input aria-describedby={id}). */
export function FieldError(props: { message: string | null; id?: string }) {
  return props.message ? (
    <span class="field-error" role="alert" id={props.id}>
      {props.message}
    </span>
  ) : null;
}
