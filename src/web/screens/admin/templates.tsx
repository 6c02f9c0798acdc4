import { useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, Table, when } from '../../components';
import { FieldError, useRefusal } from './fields';
import type { Template } from '../../wire';

const blank = { slug: '', name: '', systemPrompt: '', model: '' };

/** Templates (admin.manage_templates): what sessions start from. Create, edit, delete, as /v1/admin/templates. */
export function TemplatesTab() {
  // The slug being edited; '' for a new template, null when the form is closed.
  const [editing, setEditing] = useState<string | null>(null);
  const [form, setForm] = useState(blank);
  const refusal = useRefusal(['slug', 'name', 'model', 'systemPrompt'], { conflictAt: 'slug' });
  // The models to suggest, when the editor may read the providers (admin.manage_providers); else typed.
  const models =
    useLoad(() =>
      api<{ providers: Array<{ name: string; enabled: boolean; models: Array<{ id: string }> }> }>('GET', '/admin/runtime').then((r) =>
        r.providers.filter((p) => p.enabled).flatMap((p) => p.models.map((m) => `${p.name}/${m.id}`)),
      ),
    ).data ?? [];
  const { data: templates, error, setError, reload: load } = useLoad(() => api<{ templates: Template[] }>('GET', '/admin/templates').then((r) => r.templates));

  const open = (t?: Template) => {
    refusal.clear();
    setEditing(t ? t.slug : '');
    setForm(t ? { slug: t.slug, name: t.name, systemPrompt: t.systemPrompt, model: t.model ?? '' } : blank);
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const body = { name: form.name.trim(), systemPrompt: form.systemPrompt, model: form.model.trim() || null };
    const ok = await refusal.run(() => (editing ? api('PATCH', `/admin/templates/${encodeURIComponent(editing)}`, body) : api('POST', '/admin/templates', { slug: form.slug.trim(), ...body })));
    if (ok) {
      setEditing(null);
      await load();
    }
  };
  const remove = async (t: Template) => {
    if (!confirm(`Delete the template ${t.name}? Sessions started from it keep their copy.`)) return;
    try {
      await api('DELETE', `/admin/templates/${encodeURIComponent(t.slug)}`);
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  const set = (name: keyof typeof blank) => (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) => setForm({ ...form, [name]: e.currentTarget.value });

  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {editing === null ? (
        <button type="button" class="primary" onClick={() => open()}>
          New template
        </button>
      ) : (
        <form class="setup-form" aria-label={editing ? `Edit template ${editing}` : 'New template'} onSubmit={save}>
          <div class="row">
            <label>
              Slug
              <input name="slug" value={form.slug} disabled={Boolean(editing)} required pattern="[a-z0-9][a-z0-9\-]{0,62}" onInput={set('slug')} placeholder="e.g. code-review" />
              <FieldError message={refusal.at('slug')} />
            </label>
            <label>
              Name
              <input name="name" value={form.name} required maxLength={200} onInput={set('name')} />
              <FieldError message={refusal.at('name')} />
            </label>
            <label>
              Model (optional)
              <input name="model" list="template-models" value={form.model} onInput={set('model')} placeholder="provider/model; empty: the default" />
              <datalist id="template-models">
                {models.map((m) => (
                  <option value={m} />
                ))}
              </datalist>
              <FieldError message={refusal.at('model')} />
            </label>
          </div>
          <label class="block">
            System prompt
            <textarea name="systemPrompt" rows={6} value={form.systemPrompt} onInput={set('systemPrompt')} />
            <FieldError message={refusal.at('systemPrompt')} />
          </label>
          <ErrorNote error={refusal.general} onClose={refusal.clear} />
          <div class="row">
            <button type="submit" class="primary">
              {editing ? 'Save template' : 'Create template'}
            </button>
            <button type="button" onClick={() => setEditing(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
      {templates?.length === 0 ? <p class="empty">No templates. Sessions start from the default model and no system prompt.</p> : null}
      {templates?.length ? (
        <Table
          items={templates}
          id={(t) => t.slug}
          testId={(t) => `template-${t.slug}`}
          columns={[
            { title: 'Template', cell: (t) => t.name },
            { title: 'Slug', cell: (t) => <code>{t.slug}</code> },
            { title: 'Model', cell: (t) => t.model ?? 'default' },
            { title: 'Changed', cell: (t) => when(t.updatedAt) },
            {
              title: '',
              cell: (t) => (
                <>
                  <button type="button" class="link" onClick={() => open(t)}>
                    Edit
                  </button>{' '}
                  <button type="button" class="link danger" onClick={() => remove(t)}>
                    Delete
                  </button>
                </>
              ),
            },
          ]}
        />
      ) : null}
    </div>
  );
}
