const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Parses a window like `30m`, `24h`, `7d`, `2w` into milliseconds; null if malformed. */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,6})([mhdw])$/.exec(text.trim());
  if (!m) return null;
  const ms = Number(m[1]) * UNITS[m[2]];
  return ms > 0 ? ms : null;
}
