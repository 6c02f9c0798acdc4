import chalk, { Chalk } from 'chalk';

/** stdout is for results (one JSON document with --json); everything else goes to stderr. */
export function printJson(doc: unknown): void {
  process.stdout.write(JSON.stringify(doc, null, 2) + '\n');
}

export function info(line: string): void {
  process.stderr.write(line + '\n');
}

// chalk already honours NO_COLOR, FORCE_COLOR and a non-TTY stream; this is its stderr instance.
const errChalk = new Chalk({ level: process.stderr.isTTY && !process.env.NO_COLOR ? chalk.level : 0 });
const outChalk = new Chalk({ level: process.stdout.isTTY && !process.env.NO_COLOR ? chalk.level : 0 });
export const colors = { err: errChalk, out: outChalk };

/** One line of at most `max` characters (a cell of a table). */
export function clip(s: string, max: number): string {
  const line = s.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** Renders rows as an aligned plain-text table (no colours, so it is safe to pipe). */
export function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const cell = (v: unknown) => (v === null || v === undefined ? '' : v instanceof Date ? v.toISOString() : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}

/** RFC 4180 CSV: a header line, then one line per row; fields quoted when they need it. */
export function csv(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const field = (v: unknown) => {
    const s = v === null || v === undefined ? '' : v instanceof Date ? v.toISOString() : String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [columns.join(','), ...rows.map((r) => columns.map((c) => field(r[c])).join(','))].join('\n') + '\n';
}
