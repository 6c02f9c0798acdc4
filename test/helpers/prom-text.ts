/**
 * A strict reader of the Prometheus text exposition format (0.0.4), for tests: it throws on anything a
 * Prometheus server would refuse or misread (a sample before its TYPE, a family split in two, a
 * duplicate series, a bad label escape, a value that is not a number, histogram buckets that shrink).
 */
interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface PromFamily {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help: string;
  samples: PromSample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export function parsePromText(text: string): Map<string, PromFamily> {
  const families = new Map<string, PromFamily>();
  const series = new Set<string>();
  let current: PromFamily | null = null;
  const fail = (n: number, why: string, line: string): never => {
    throw new Error(`line ${n + 1}: ${why}: ${JSON.stringify(line)}`);
  };
  const lines = text.split('\n');
  if (lines.at(-1) !== '') throw new Error('the text must end with a newline');
  lines.pop();
  lines.forEach((line, n) => {
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a plain comment
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) fail(n, 'bad metric name', line);
      let f = families.get(name);
      if (!f) {
        f = { name, type: 'untyped', help: '', samples: [] };
        families.set(name, f);
      } else if (current !== f) fail(n, `family ${name} split in two`, line);
      if (f.samples.length) fail(n, `${kind} after samples of ${name}`, line);
      current = f;
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) fail(n, 'unknown type', line);
        f.type = rest as PromFamily['type'];
      } else {
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) fail(n, 'bad escape in HELP', line);
        f.help = rest;
      }
      return;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
    if (!m) fail(n, 'not a sample line', line);
    const [, name, , labelText, valueText] = m!;
    const labels = parseLabels(labelText ?? '', (why) => fail(n, why, line));
    const value = parseValue(valueText);
    if (value === null) return fail(n, 'value is not a number', line);
    const f = current as PromFamily | null;
    if (!f) return fail(n, 'sample before any TYPE', line);
    const suffixes = f.type === 'histogram' ? ['_bucket', '_sum', '_count'] : f.type === 'summary' ? ['', '_sum', '_count'] : [''];
    if (!suffixes.some((s) => name === f.name + s)) fail(n, `sample ${name} is not of family ${f.name} (${f.type})`, line);
    if (name.endsWith('_bucket') && f.type === 'histogram' && labels.le === undefined) fail(n, 'bucket without le', line);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (series.has(key)) fail(n, 'duplicate series', line);
    series.add(key);
    f.samples.push({ name, labels, value });
  });
  for (const f of families.values()) {
    if (f.type === 'untyped') throw new Error(`family ${f.name} has no TYPE`);
    if (f.type === 'counter' && f.samples.some((s) => s.value < 0)) throw new Error(`counter ${f.name} is negative`);
    if (f.type === 'histogram') checkHistogram(f);
  }
  return families;
}

/** A sample value as Prometheus reads it (Go's ParseFloat: NaN and Inf in any case; prom-client writes "Nan"). */
function parseValue(text: string): number | null {
  if (/^nan$/i.test(text)) return NaN;
  const inf = /^([+-]?)inf(inity)?$/i.exec(text);
  if (inf) return inf[1] === '-' ? -Infinity : Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) return null;
  return Number(text);
}

function parseLabels(text: string, fail: (why: string) => never): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const eq = text.indexOf('=', i);
    if (eq < 0) fail('label without =');
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name)) fail(`bad label name ${name}`);
    if (name in labels) fail(`label ${name} twice`);
    if (text[eq + 1] !== '"') fail('label value not quoted');
    let value = '';
    let j = eq + 2;
    for (;;) {
      if (j >= text.length) fail('unterminated label value');
      const c = text[j];
      if (c === '"') break;
      if (c === '\\') {
        const next = text[j + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else fail('bad escape in label value');
        j += 2;
      } else {
        value += c;
        j++;
      }
    }
    labels[name] = value;
    i = j + 1;
    if (i < text.length) {
      if (text[i] !== ',') fail('labels not separated by ,');
      i++;
    }
  }
  return labels;
}

/** Per series (labels without le): buckets never shrink, +Inf is there and equals _count. */
function checkHistogram(f: PromFamily): void {
  const groups = new Map<string, { buckets: Array<[number, number]>; count?: number }>();
  const keyOf = (labels: Record<string, string>) => JSON.stringify(Object.entries(labels).filter(([k]) => k !== 'le').sort());
  for (const s of f.samples) {
    const g = groups.get(keyOf(s.labels)) ?? { buckets: [] };
    groups.set(keyOf(s.labels), g);
    if (s.name.endsWith('_bucket')) g.buckets.push([s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value]);
    if (s.name.endsWith('_count')) g.count = s.value;
  }
  for (const [key, g] of groups) {
    const sorted = [...g.buckets].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < sorted.length; i++) if (sorted[i][1] < sorted[i - 1][1]) throw new Error(`histogram ${f.name}${key}: buckets shrink`);
    const inf = sorted.at(-1);
    if (!inf || inf[0] !== Infinity || inf[1] !== g.count) throw new Error(`histogram ${f.name}${key}: +Inf bucket missing or not _count`);
  }
}

/** The value of one series of a family (labels matched exactly); undefined when absent. */
export function promValue(families: Map<string, PromFamily>, name: string, labels: Record<string, string> = {}, family = name): number | undefined {
  const f = families.get(family);
  const want = Object.entries(labels);
  const s = f?.samples.find((x) => x.name === name && want.every(([k, v]) => x.labels[k] === v) && Object.keys(x.labels).length === want.length);
  return s?.value;
}
