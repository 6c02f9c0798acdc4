import { useState } from 'preact/hooks';
import { api } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, usd } from '../../components';
import type { Usage, UsageSeries, User } from '../../wire';

/** Tokens and cost of one model or person over the window. */
type Totals = Usage['byModel'][string];

/** "input 12 · cache read 40,000 · cache write 3,000 · output 300": the kinds that saw use. */
function splitText(t: Totals | Usage): string {
  const kinds: Array<[string, number]> = [
    ['input', t.inputTokens],
    ['cache read', t.cacheReadTokens],
    ['cache write', t.cacheWriteTokens],
    ['output', t.outputTokens],
    ['reasoning', t.reasoningTokens],
  ];
  return kinds
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n.toLocaleString()}`)
    .join(' · ');
}

const COLOURS = ['#1f5fbf', '#e07b00', '#1a7f37', '#8250df', '#b42318', '#0a7ea4', '#6e7781'];

/** Spending over the window as stacked columns per hour or day, one colour per model. */
function UsageChart(props: { series: UsageSeries }) {
  const { bucket, window, points } = props.series;
  const step = bucket === 'hour' ? 3_600_000 : 86_400_000;
  const first = Math.floor(new Date(window.from).getTime() / step) * step;
  const last = Math.floor(new Date(window.to).getTime() / step) * step;
  const slots = Math.max(1, Math.round((last - first) / step) + 1);
  const models = [...new Set(points.map((p) => p.model))].sort();
  const columns = Array.from({ length: slots }, () => new Map<string, number>());
  for (const p of points) {
    const i = Math.round((new Date(p.at).getTime() - first) / step);
    if (i >= 0 && i < slots) columns[i].set(p.model, (columns[i].get(p.model) ?? 0) + p.tokens);
  }
  const max = Math.max(1, ...columns.map((c) => [...c.values()].reduce((n, v) => n + v, 0)));
  const W = 720;
  const H = 160;
  const w = W / slots;
  return (
    <figure class="chart">
      <figcaption>Tokens per {bucket}, by model</figcaption>
      <svg viewBox={`0 0 ${W} ${H + 18}`} role="img" aria-label={`Tokens per ${bucket} by model`}>
        {columns.map((c, i) => {
          let y = H;
          return models.map((m, k) => {
            const v = c.get(m) ?? 0;
            if (!v) return null;
            const h = (v / max) * H;
            y -= h;
            return (
              <rect x={i * w + 1} y={y} width={Math.max(1, w - 2)} height={h} fill={COLOURS[k % COLOURS.length]}>
                <title>{`${new Date(first + i * step).toLocaleString()}: ${m} ${v.toLocaleString()} tokens`}</title>
              </rect>
            );
          });
        })}
        <line x1="0" y1={H} x2={W} y2={H} stroke="#d9dee4" />
        <text x="0" y={H + 14} font-size="11" fill="#5b6470">
          {new Date(first).toLocaleString()}
        </text>
        <text x={W} y={H + 14} font-size="11" fill="#5b6470" text-anchor="end">
          {new Date(last).toLocaleString()}
        </text>
      </svg>
      <div class="legend">
        {models.map((m, k) => (
          <span>
            <svg width="10" height="10" aria-hidden="true">
              <rect width="10" height="10" fill={COLOURS[k % COLOURS.length]} />
            </svg>{' '}
            {m}
          </span>
        ))}
      </div>
    </figure>
  );
}

/** Tokens and spending over a window: totals, a chart per hour or day, by model and by user. */
export function UsageTab(props: { canUsers: boolean }) {
  const [since, setSince] = useState('7d');
  const totals = useLoad(() => api<Usage>('GET', `/admin/usage?since=${since}`), [since]);
  const chart = useLoad(() => api<UsageSeries>('GET', `/admin/usage/series?since=${since}`), [since]);
  const usage = totals.data;
  const series = chart.data;
  const error = totals.error ?? chart.error;
  const setError = (e: string | null) => {
    totals.setError(e);
    chart.setError(e);
  };
  // Names for the user ids, where the viewer may list people (else the ids); a refusal is not shown.
  const names =
    useLoad(() => (props.canUsers ? api<{ users: User[] }>('GET', '/admin/users').then((r) => Object.fromEntries(r.users.map((u) => [u.id, u.displayName || u.handle]))) : Promise.resolve({} as Record<string, string>)))
      .data ?? {};
  const bars = (title: string, rows: Record<string, Totals>, label = (k: string) => k) => {
    const list = Object.entries(rows).sort((x, y) => y[1].cost - x[1].cost || y[1].tokens - x[1].tokens);
    const max = Math.max(...list.map(([, v]) => v.tokens), 1);
    return (
      <figure class="bars">
        <figcaption>{title}</figcaption>
        {list.length === 0 ? <p class="empty">Nothing spent in this window.</p> : null}
        {list.map(([k, v]) => (
          <div class="bar" key={k}>
            <span class="label">{label(k)}</span>
            <span class="fill" style={{ width: `${Math.max(1, (v.tokens / max) * 100)}%` }} />
            <span class="value" title={splitText(v)}>
              {v.tokens.toLocaleString()} tokens · {usd(v.cost)}
            </span>
            <small class="split" data-testid="usage-split">
              {splitText(v)}
            </small>
          </div>
        ))}
      </figure>
    );
  };
  return (
    <div>
      <label>
        Window{' '}
        <select value={since} onChange={(e) => setSince(e.currentTarget.value)}>
          <option value="24h">24 hours</option>
          <option value="7d">7 days</option>
          <option value="30d">30 days</option>
        </select>
      </label>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {usage ? (
        <>
          <p data-testid="usage-total">
            {usage.totalTokens.toLocaleString()} tokens, {usd(usage.totalCostUsd)}
            {usage.totalTokens ? <small> ({splitText(usage)})</small> : null}
          </p>
          {series?.points.length ? <UsageChart series={series} /> : null}
          {bars('By model', usage.byModel)}
          {bars('By user', usage.byUser, (id) => names[id] ?? id)}
        </>
      ) : null}
    </div>
  );
}
