import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { ErrorNote } from '../../components';
import { listModels, type ModelChoice } from '../../models-api';
import type { RoleDoc } from './roles';
import { FieldError, useRefusal } from './fields';

/** A role's model allow-list in one line. */
export function modelsSummary(allowed: string[] | '*' | undefined): string {
  if (allowed === undefined || allowed === '*') return 'every model';
  return allowed.length ? `models: ${allowed.join(', ')}` : 'the default model only';
}

/**
 * The models a role's members may choose for a session or a turn (models.allowed): every model
 * (also those added later), or only those ticked. The workspace's default model and a template's model are
 * always usable. Saved with the role (audited as role.update).
 */
export function RoleModels(props: { role: RoleDoc; onDone: (saved: boolean) => void }) {
  const current = props.role.permissions.models?.allowed ?? '*';
  const [served, setServed] = useState<ModelChoice[] | null>(null);
  const [every, setEvery] = useState(current === '*');
  const [picked, setPicked] = useState<string[]>(current === '*' ? [] : current);
  const [error, setError] = useState<string | null>(null);
  const refusal = useRefusal(['permissions.models']);
  useEffect(() => {
    void listModels(true).then((c) => setServed(c.models), (err) => setError(explain(err)));
  }, []);
  // What the role lists beyond the models served now ("<provider>/*", a provider switched off): kept.
  const extra = picked.filter((ref) => !served?.some((m) => m.ref === ref));
  const toggle = (ref: string, on: boolean) => setPicked(on ? [...picked, ref] : picked.filter((x) => x !== ref));
  const save = async (e: Event) => {
    e.preventDefault();
    const ok = await refusal.run(() => api('PATCH', `/admin/roles/${props.role.id}`, { permissions: { models: { allowed: every ? '*' : picked } } }));
    if (ok) props.onDone(true);
  };
  return (
    <form class="setup-form" aria-label={`Models of role ${props.role.name}`} onSubmit={save}>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <fieldset class="perms">
        <legend>Models {props.role.name} may choose</legend>
        <label>
          <input type="radio" name="models-every" checked={every} onChange={() => setEvery(true)} /> Every model (also those added later)
        </label>
        <label>
          <input type="radio" name="models-every" checked={!every} onChange={() => setEvery(false)} /> Only these:
        </label>
        {!every
          ? [...(served ?? []).map((m) => ({ ref: m.ref, label: `${m.name} (${m.ref})` })), ...extra.map((ref) => ({ ref, label: ref }))].map((m) => (
              <label key={m.ref}>
                <input type="checkbox" name={`model:${m.ref}`} checked={picked.includes(m.ref)} onChange={(e) => toggle(m.ref, e.currentTarget.checked)} /> {m.label}
              </label>
            ))
          : null}
        <FieldError message={refusal.at('permissions.models')} />
      </fieldset>
      <p class="hint">The workspace's default model and each template's model are always usable. Cost limits apply as before.</p>
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
      <div class="row">
        <button type="submit" class="primary">
          Save models
        </button>
        <button type="button" onClick={() => props.onDone(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}
