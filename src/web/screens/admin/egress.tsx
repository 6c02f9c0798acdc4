import { useState } from 'preact/hooks';
import { api } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote } from '../../components';
import { FieldError, useRefusal } from './fields';

interface Egress {
  allow?: string[];
  deny?: string[];
  ports?: number[];
}

const lines = (s: string) => s.split(/[\s,]+/).filter(Boolean);

/**
 * Egress rules (admin.manage_tenant): tenant settings `egress`, read by the egress proxy on every
 * connection, so a change applies to running agents at once. The API checks every entry; a refused one
 * is named under its list.
 */
export function EgressTab() {
  const [form, setForm] = useState<{ allow: string; deny: string; ports: string } | null>(null);
  const [saved, setSaved] = useState(false);
  const refusal = useRefusal(['settings.egress.allow', 'settings.egress.deny', 'settings.egress.ports']);
  const show = (e: Egress | undefined) => setForm({ allow: (e?.allow ?? []).join('\n'), deny: (e?.deny ?? []).join('\n'), ports: (e?.ports ?? []).join(', ') });
  const { error, setError } = useLoad(() => api<{ tenant: { settings: { egress?: Egress } } }>('GET', '/admin/tenant').then((r) => show(r.tenant.settings.egress)));
  if (!form) return <ErrorNote error={error} />;
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    // A port that is not a number goes as typed: the API's refusal names it.
    const ports = lines(form.ports).map((p) => (/^\d+$/.test(p) ? Number(p) : p));
    const egress = { allow: lines(form.allow), deny: lines(form.deny), ports };
    await refusal.run(async () => {
      const r = await api<{ tenant: { settings: { egress?: Egress } } }>('PATCH', '/admin/tenant', { settings: { egress } });
      show(r.tenant.settings.egress);
      setSaved(true);
    });
  };
  const set = (name: 'allow' | 'deny' | 'ports') => (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) => setForm({ ...form, [name]: e.currentTarget.value });
  return (
    <form class="setup-form" aria-label="Egress rules" onSubmit={save}>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        Where the agents may connect. Domains cover their subdomains; addresses and CIDR ranges are allowed too. An empty allow list means anywhere public that is not denied; a deny entry always
        wins.
      </p>
      <div class="row">
        <label class="grow">
          Allow (one a line; set: only these)
          <textarea name="allow" rows={6} value={form.allow} onInput={set('allow')} placeholder="github.com" aria-describedby="egress-allow-error" />
          <FieldError id="egress-allow-error" message={refusal.at('settings.egress.allow')} />
        </label>
        <label class="grow">
          Deny (one a line)
          <textarea name="deny" rows={6} value={form.deny} onInput={set('deny')} placeholder="10.0.0.0/8" aria-describedby="egress-deny-error" />
          <FieldError id="egress-deny-error" message={refusal.at('settings.egress.deny')} />
        </label>
      </div>
      <div class="row">
        <label>
          Ports besides 80 and 443
          <input name="ports" value={form.ports} onInput={set('ports')} placeholder="e.g. 22, 5432" aria-describedby="egress-ports-error" />
          <FieldError id="egress-ports-error" message={refusal.at('settings.egress.ports')} />
        </label>
      </div>
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
      <div class="row">
        <button type="submit" class="primary">
          Save egress rules
        </button>
        {saved ? <small class="hint">Saved: running agents follow the new rules at once.</small> : null}
      </div>
    </form>
  );
}
