import { useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote, usd, when } from '../components';
import { Markdown } from '../markdown';
import type { Me } from '../types';
import { useLoad } from '../use-load';
import type { Skill, SkillDetail } from '../wire';

type Tab = 'review' | 'promoted' | 'deprecated';

/**
 * Learned skills. Reviewers (admin.manage_templates): the review queue (versions waiting, new skills and
 * new versions of promoted ones), a version's SKILL.md with its flagged lines, promote (a flagged version
 * only once the reviewer says they read the flagged lines) or reject it, and deprecate a skill. Others:
 * the skills agents load, as they load them.
 */
export function SkillsScreen(props: { me: Me; skillId?: string }) {
  const reviewer = props.me.permissions.admin.manage_templates;
  const [tab, setTab] = useState<Tab>(reviewer ? 'review' : 'promoted');
  const [read, setRead] = useState(false);
  // One skill (its address names it; read again after each review action, its box unticked), or the tab's list.
  const one = useLoad(
    () =>
      props.skillId
        ? api<{ skill: SkillDetail }>('GET', `/skills/${props.skillId}`).then((r) => {
            setRead(false);
            return r.skill;
          })
        : Promise.resolve(null),
    [props.skillId],
  );
  const list = useLoad(
    () =>
      props.skillId ? Promise.resolve(null) : api<{ skills: Skill[] }>('GET', tab === 'review' ? '/skills' : `/skills?status=${tab}`).then((r) => (tab === 'review' ? r.skills.filter((s) => s.pendingVersion !== null) : r.skills)),
    [props.skillId, tab],
  );
  const detail = one.data;
  const skills = list.data;
  const error = one.error ?? list.error;
  const setError = (e: string | null) => {
    one.setError(e);
    list.setError(e);
  };

  const act = async (path: string, body?: unknown) => {
    if (!detail) return;
    try {
      await api('PATCH', `/skills/${detail.id}/${path}`, body);
      await one.reload();
    } catch (err) {
      setError(explain(err));
    }
  };

  if (props.skillId) {
    const pending = detail?.pendingVersion ?? null;
    const flagged = detail && pending !== null && detail.contentVersion === pending ? detail.flags : [];
    return (
      <section class="skills">
        <a href="#/skills">← Skills</a>
        <ErrorNote error={error} onClose={() => setError(null)} />
        {detail ? (
          <>
            <h1>
              {detail.name} <span class={`badge ${detail.status}`}>{detail.status}</span> <small>v{detail.contentVersion}</small>
            </h1>
            <p>{detail.description}</p>
            <p class="hint" data-testid="skill-state">
              {detail.promotedVersion ? `Agents load v${detail.promotedVersion}.` : 'No agent loads it.'}
              {pending !== null ? ` v${pending} waits for review.` : ''}
              {detail.status === 'promoted' ? ` Loaded ${detail.loads} times since it was promoted.` : ''}
            </p>
            {reviewer && pending !== null ? (
              <div class="review">
                {flagged.length ? (
                  <>
                    <h2>Read these lines before promoting v{pending}</h2>
                    <ul class="list flags">
                      {flagged.map((f) => (
                        <li data-testid="skill-flag">
                          <small>line {f.line}</small> <code class="grow">{f.text}</code> <span class="warn">{f.reason}</span>
                        </li>
                      ))}
                    </ul>
                    <label>
                      <input type="checkbox" checked={read} onChange={(e) => setRead((e.target as HTMLInputElement).checked)} /> I have read the {flagged.length} flagged line
                      {flagged.length === 1 ? '' : 's'} and accept them
                    </label>
                  </>
                ) : (
                  <p class="hint">The screening flagged no line of v{pending}.</p>
                )}
                <p class="row">
                  <button type="button" class="primary" disabled={flagged.length > 0 && !read} onClick={() => act(`versions/${pending}/promote`, flagged.length ? { acknowledgeFlags: true } : undefined)}>
                    Promote v{pending}: every agent of the organisation may load it
                  </button>
                  <button type="button" onClick={() => act(`versions/${pending}/reject`)}>
                    Reject v{pending}
                    {detail.promotedVersion ? ` (agents keep v${detail.promotedVersion})` : ''}
                  </button>
                </p>
              </div>
            ) : null}
            {reviewer && detail.status !== 'deprecated' ? (
              <p class="row">
                <button type="button" class="danger" onClick={() => confirm(`Deprecate ${detail.name}? No agent will load it any more.`) && act('deprecate')}>
                  Deprecate the skill
                </button>
              </p>
            ) : null}
            <h2>SKILL.md of v{detail.contentVersion}</h2>
            <Markdown text={detail.content} />
            <h2>Learnt from</h2>
            {detail.sourceTrajectories.map((t) => (
              <details class="tool">
                <summary>
                  {t.request ? t.request.slice(0, 120) : t.id} <small>{t.outcome}</small> {t.costUsd ? <small>{usd(t.costUsd)}</small> : null}
                </summary>
                {t.tools?.length ? <pre>{t.tools.join('\n')}</pre> : null}
                {t.answer ? <pre>{t.answer}</pre> : null}
                {t.sessionId ? <a href={`#/sessions/${t.sessionId}`}>session</a> : null}
              </details>
            ))}
            <h2>Versions</h2>
            <ul class="list">
              {detail.versions.map((v) => (
                <li data-testid="skill-version">
                  v{v.version} <span class={`badge ${v.status}`}>{v.status}</span> <span class="grow">{v.description}</span> <small>{when(v.createdAt)}</small>
                </li>
              ))}
            </ul>
          </>
        ) : null}
      </section>
    );
  }
  const tabs: Array<[Tab, string]> = reviewer
    ? [
        ['review', 'Review queue'],
        ['promoted', 'promoted'],
        ['deprecated', 'deprecated'],
      ]
    : [['promoted', 'promoted']];
  return (
    <section class="skills">
      <h1>Skills</h1>
      <nav class="tabs" aria-label="Skill status">
        {tabs.map(([s, label]) => (
          <a href="#/skills" aria-current={tab === s ? 'page' : undefined} onClick={(e) => (e.preventDefault(), setTab(s))}>
            {label}
          </a>
        ))}
      </nav>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {skills?.length === 0 ? (
        <p class="empty">{tab === 'review' ? 'Nothing to review: skills are proposed after similar successful work of several people.' : `No ${tab} skills.`}</p>
      ) : null}
      <ul class="list">
        {skills?.map((s) => (
          <li key={s.id} data-testid="skill">
            <a href={`#/skills/${s.id}`}>{s.name}</a> <span class="grow">{s.description}</span>{' '}
            <small>
              {s.pendingVersion !== null ? `v${s.pendingVersion} waits${s.promotedVersion ? `, agents load v${s.promotedVersion}` : ''}` : `v${s.version}`}
            </small>
          </li>
        ))}
      </ul>
    </section>
  );
}
