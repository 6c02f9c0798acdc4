import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote, SettingText, usd, when } from '../components';
import type { PlanDetail, PlanItem } from '../wire';

const FINAL = new Set(['completed', 'failed']);

/** Your plans; one plan's subtask graph, refreshed every second while it runs; cancel. */
export function PlansScreen(props: { planId?: string }) {
  const [plans, setPlans] = useState<PlanItem[] | null>(null);
  const [detail, setDetail] = useState<PlanDetail | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let live = true;
    const tick = async () => {
      try {
        if (props.planId) {
          const d = await api<PlanDetail>('GET', `/orchestrate/${props.planId}`);
          if (!live) return;
          setDetail(d);
          if (!FINAL.has(d.plan.status)) timer = setTimeout(tick, 1000);
        } else {
          const r = await api<{ plans: PlanItem[] }>('GET', '/orchestrate/plans');
          if (!live) return;
          setPlans(r.plans);
          // A plan is created by a job a moment after it is asked for: look again while any runs.
          if (!r.plans.length || r.plans.some((p) => !FINAL.has(p.status))) timer = setTimeout(tick, 1500);
        }
      } catch (err) {
        if (live) setError(explain(err));
      }
    };
    void tick();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [props.planId]);

  const cancel = async (id: string) => {
    try {
      await api('POST', `/orchestrate/${id}/cancel`);
    } catch (err) {
      setError(explain(err));
    }
  };

  if (props.planId) {
    return (
      <section class="plans">
        <a href="#/plans">← Plans</a>
        <ErrorNote error={error} onClose={() => setError(null)} />
        {!detail ? <p class="boot">Loading…</p> : null}
        {detail ? (
          <>
            <h1>{detail.plan.taskDescription}</h1>
            <p>
              <span class={`badge ${detail.plan.status}`} data-testid="plan-status">
                {detail.plan.status}
              </span>{' '}
              {detail.plan.costUsd ? usd(detail.plan.costUsd) : null} {detail.plan.error ? <span class="error">
                  <SettingText text={detail.plan.error} />
                </span> : null}
              {!FINAL.has(detail.plan.status) ? (
                <button type="button" class="danger" onClick={() => cancel(detail.plan.id)}>
                  Cancel plan
                </button>
              ) : null}
            </p>
            <ol class="graph" aria-label="Subtasks">
              {detail.subtasks.map((s) => (
                <li key={s.index} class={`badge-row ${s.status}`} data-testid="subtask">
                  <span class={`badge ${s.status}`}>{s.status}</span> {s.description}
                  {s.dependencies?.length ? <small> after {s.dependencies.map((d) => `#${d + 1}`).join(', ')}</small> : null}
                  {s.sessionId ? (
                    <>
                      {' '}
                      <a href={`#/sessions/${s.sessionId}`}>transcript</a>
                    </>
                  ) : null}
                  {s.error ? <div class="error">
                      <SettingText text={s.error} />
                    </div> : null}
                </li>
              ))}
            </ol>
          </>
        ) : null}
      </section>
    );
  }
  return (
    <section class="plans">
      <h1>Plans</h1>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {plans === null ? <p class="boot">Loading…</p> : null}
      {plans?.length === 0 ? <p class="empty">No plans yet. Start one from a session with “Plan a task…”.</p> : null}
      <ul class="list">
        {plans?.map((p) => (
          <li key={p.id}>
            <a href={`#/plans/${p.id}`}>{p.taskDescription}</a> <span class={`badge ${p.status}`}>{p.status}</span>
            {p.subtasks ? (
              <small>
                {p.subtasks.completed}/{p.subtasks.total} done
              </small>
            ) : null}
            <small>{when(p.createdAt)}</small>
          </li>
        ))}
      </ul>
    </section>
  );
}
