import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Regular files below a directory (symlinks and sockets skipped, never followed), at most `maxBytes`
 * each: what the secret-hunting tests read through looking for a credential.
 */
export function regularFilesUnder(dir: string, maxBytes = 5_000_000): string[] {
  const out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    const p = join(dir, name);
    const s = lstatSync(p);
    if (s.isDirectory()) out.push(...regularFilesUnder(p, maxBytes));
    else if (s.isFile() && s.size < maxBytes) out.push(p);
  }
  return out;
}
