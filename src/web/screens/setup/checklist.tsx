// The first-run checklist the sessions screen shows while the workspace cannot prompt (GET /v1/setup):
// model -> apply -> first prompt. People who may set it up get links to the setup screens; the others
// see who may.

import { SettingText } from '../../components';
import type { SetupState } from '../../wire';
export type { SetupState };

export function SetupChecklist(props: { setup: SetupState; onCheck: () => void }) {
  const { steps, canSetUp, ask } = props.setup;
  const items: Array<{ done: boolean; text: string; link?: [string, string] }> = [
    { done: steps.provider, text: 'Add a model provider (its URL, key and models)', link: ['#/admin/providers', 'Add a provider'] },
    { done: steps.applied, text: 'Choose the default model and apply it', link: ['#/admin/providers', 'Choose and apply'] },
    { done: false, text: 'Start a session and ask your first question' },
  ];
  return (
    <div class="gateway" role="region" aria-label="Set up this workspace" data-testid="setup-checklist">
      <h2>This workspace is not set up yet</h2>
      <p class="hint">Agents need a model before they can answer: <SettingText text={props.setup.detail} />.</p>
      <ol>
        {items.map((s) => (
          <li data-testid="setup-step" data-done={s.done ? 'yes' : 'no'}>
            {s.done ? '✓ ' : ''}
            {s.text}
            {!s.done && canSetUp && s.link ? (
              <>
                {' '}
                <a href={s.link[0]}>{s.link[1]}</a>
              </>
            ) : null}
          </li>
        ))}
      </ol>
      {canSetUp ? null : (
        <p data-testid="setup-ask">
          Your role cannot set up models.{' '}
          {ask.length ? (
            <>
              Ask{' '}
              {ask.map((a, i) => (
                <>
                  {i ? (i === ask.length - 1 ? ' or ' : ', ') : ''}
                  <a href={`mailto:${a.email}`}>{a.name}</a> ({a.email})
                </>
              ))}{' '}
              to set it up.
            </>
          ) : (
            'Ask an owner or admin of your workspace to set it up.'
          )}
        </p>
      )}
      <button type="button" onClick={props.onCheck}>
        Check again
      </button>
    </div>
  );
}
