import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote, usd, when } from '../components';
import { Markdown } from '../markdown';
import type { Me } from '../types';

interface Skill {
  id: string;
  name: string;
  description: string;
  status: 'proposed' | 'promoted' | 'deprecated';
  version: number;
  createdAt: string;
}
interface SkillDetail extends Skill {
  content: string;
  loads: number;
  promotedVersion: number | null;
  versions: Array<{ version: number; description: string; createdAt: string }>;
  sourceTrajectories: Array<{ id: string; sessionId?: string; request?: string; answer?: string; tools?: string[]; outcome?: string; costUsd?: number; createdAt?: string }>;
}

/** Learned skills: the review queue (proposed first), one skill's SKILL.md, sources and versions; promote / deprecate. */
export function SkillsScreen(props: { me: Me; skillId?: string }) {
  const reviewer = props.me.permissions.admin.manage_templates;
  const [status, setStatus] = useState(reviewer ? 'proposed' : 'promoted');
  const [skills, setSkills] = useState<Skill[] | null>(null);
  const [detail, setDetail] = useState<SkillDetail | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (props.skillId) api<SkillDetail>('GET', `/skills/${props.skillId}`).then(setDetail, (err) => setError(explain(err)));
    else api<{ skills: Skill[] }>('GET', `/skills${status ? `?status=${status}` : ''}`).then((r) => setSkills(r.skills), (err) => setError(explain(err)));
  }, [props.skillId, status]);

  const move = async (to: 'promote' | 'deprecate') => {
    if (!detail) return;
    try {
      await api('PATCH', `/skills/${detail.id}/${to}`);
      setDetail(await api<SkillDetail>('GET', `/skills/${detail.id}`));
    } catch (err) {
      setError(explain(err));
    }
  };

  if (props.skillId) {
    return (
      <section class="skills">
        <a href="#/skills">← Skills</a>
        <ErrorNote error={error} onClose={() => setError(null)} />
        {detail ? (
          <>
            <h1>
              {detail.name} <span class={`badge ${detail.status}`}>{detail.status}</span> <small>v{detail.version}</small>
            </h1>
            <p>{detail.description}</p>
            {reviewer ? (
              <p class="row">
                {detail.status !== 'promoted' || detail.promotedVersion !== detail.version ? (
                  <button type="button" class="primary" onClick={() => move('promote')}>
                    Promote v{detail.version}: every agent of the organisation may load it
                  </button>
                ) : null}
                {detail.status !== 'deprecated' ? (
                  <button type="button" class="danger" onClick={() => move('deprecate')}>
                    Deprecate
                  </button>
                ) : null}
              </p>
            ) : null}
            {detail.status === 'promoted' ? <p class="hint">Loaded {detail.loads} times since it was promoted.</p> : null}
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
                <li>
                  v{v.version} <span class="grow">{v.description}</span> <small>{when(v.createdAt)}</small>
                </li>
              ))}
            </ul>
          </>
        ) : null}
      </section>
    );
  }
  return (
    <section class="skills">
      <h1>Skills</h1>
      <nav class="tabs" aria-label="Skill status">
        {(['proposed', 'promoted', 'deprecated'] as const).map((s) => (
          <a href="#/skills" aria-current={status === s ? 'page' : undefined} onClick={(e) => (e.preventDefault(), setStatus(s))}>
            {s === 'proposed' ? 'Review queue' : s}
          </a>
        ))}
      </nav>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {skills?.length === 0 ? <p class="empty">{status === 'proposed' ? 'Nothing to review: skills are proposed after three similar successful sessions.' : `No ${status} skills.`}</p> : null}
      <ul class="list">
        {skills?.map((s) => (
          <li key={s.id} data-testid="skill">
            <a href={`#/skills/${s.id}`}>{s.name}</a> <span class="grow">{s.description}</span> <small>v{s.version}</small>
          </li>
        ))}
      </ul>
    </section>
  );
}
