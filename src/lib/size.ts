/**
 * Sizes as people write them in settings: `512MiB`, `4GiB`, `10G`, `1.5GB`, or a number of bytes. Binary
 * units either way (a "GB" of memory or disk here is a GiB, as the kernel and `df -h` count them): one rule,
 * no surprise of 7 % between two spellings.
 */
const UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3, t: 1024 ** 4, tb: 1024 ** 4, tib: 1024 ** 4 };

/** Bytes, or null when the text is not a size. */
export function parseSize(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  if (!m) return null;
  const unit = UNITS[m[2].toLowerCase()];
  if (unit === undefined) return null;
  const bytes = Math.floor(Number(m[1]) * unit);
  return Number.isFinite(bytes) ? bytes : null;
}

/** A size for people: `4.0 GiB`, `512 MiB`, `900 KiB`, `12 B`. */
export function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes;
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n >= 100 || Number.isInteger(n) ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

/**
 * A size setting: `auto` (when allowed), `off` (when allowed), or a size within [min, max]. The value, or a
 * problem naming what was expected.
 */
export function parseSizeSetting(
  text: string,
  o: { auto?: boolean; off?: boolean; min: number; max?: number },
): { ok: true; value: number | 'auto' | null } | { ok: false; message: string } {
  const t = text.trim().toLowerCase();
  if (o.auto && t === 'auto') return { ok: true, value: 'auto' };
  if (o.off && (t === 'off' || t === '0')) return { ok: true, value: null };
  const bytes = parseSize(t);
  const range = `from ${formatSize(o.min)}${o.max ? ` to ${formatSize(o.max)}` : ''}`;
  const alternatives = [o.auto ? 'auto' : '', o.off ? 'off' : ''].filter(Boolean).join(', ');
  if (bytes === null || bytes < o.min || (o.max !== undefined && bytes > o.max)) {
    return { ok: false, message: `must be a size ${range} (e.g. 4GiB, 512MiB)${alternatives ? ` or ${alternatives}` : ''}, got "${text}"` };
  }
  return { ok: true, value: bytes };
}
