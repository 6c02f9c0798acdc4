import type { ConfigProblem } from '../kernel/errors.js';
import { parseSizeSetting } from '../lib/size.js';

/**
 * A runner host's settings: from its environment and flags only (never the control plane's config file,
 * which holds the appliance's secrets). Pure: the command passes the environment and file reader in.
 */
export interface RunnerSettings {
  controlUrl: string;
  token: string;
  name: string;
  address: string | null;
  labels: Record<string, string>;
  dataDir: string;
  sharedStorage: boolean;
  sandbox: boolean;
  /** Most resident runtimes; null: from the host's memory, as serve does. */
  max: number | null;
  idleMs: number;
  freezeAfterMs: number;
  pageOutAfterMs: number;
  nice: number;
  /** Each runtime's memory limit: bytes, auto (from the host's memory), or null (off). */
  memoryMax: number | 'auto' | null;
  /** Each runtime's process limit; null: off. */
  pidsMax: number | null;
  /** Size of each sandbox's /tmp (a tmpfs), bytes. */
  tmpBytes: number;
  logLevel: string;
}

/**
 * Variables that carry a secret of the appliance: a runner runs agents an attacker may steer, so it
 * refuses to start with any of them in its environment rather than hold one in reach of a sandbox escape.
 */
const CONTROL_PLANE_SECRETS = [
  'DATABASE_URL',
  'AGENTWS_DATABASE_URL',
  'AGENTWS_ENCRYPTION_KEY',
  'AGENTWS_PREVIOUS_ENCRYPTION_KEYS',
  'AGENTWS_JWT_SECRET',
  'AGENTWS_API_KEY',
  'AGENTWS_OIDC_CLIENT_SECRET',
  'AGENTWS_METRICS_TOKEN',
] as const;

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const LABEL = /^[a-z0-9][a-z0-9._/-]{0,62}=[A-Za-z0-9._-]{0,63}$/;

export function readRunnerSettings(
  env: Record<string, string | undefined>,
  flags: { controlUrl?: string; name?: string; labels?: string; dataDir?: string },
  host: { hostname: string; readFile: (path: string) => string; resolvePath: (path: string) => string },
): { ok: true; value: RunnerSettings } | { ok: false; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = [];
  const get = (k: string) => (env[k] ?? '').trim();
  for (const k of CONTROL_PLANE_SECRETS) {
    if (get(k)) problems.push({ variable: k, message: 'is a secret of the control plane: a runner host must not hold it (unset it here; the runner reaches the control plane with its runner token only)' });
  }
  const controlUrl = (flags.controlUrl ?? get('AGENTWS_CONTROL_URL')).replace(/\/+$/, '');
  try {
    const u = new URL(controlUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
    if (u.username || u.password) problems.push({ variable: 'AGENTWS_CONTROL_URL', message: 'must not carry credentials (the runner token is AGENTWS_RUNNER_TOKEN)' });
  } catch {
    problems.push({ variable: 'AGENTWS_CONTROL_URL', message: controlUrl ? `not an http(s) URL: "${controlUrl}"` : 'required: the control plane\'s URL (the one its API answers on)' });
  }
  let token = get('AGENTWS_RUNNER_TOKEN');
  const tokenFile = get('AGENTWS_RUNNER_TOKEN_FILE');
  if (!token && tokenFile) {
    try {
      token = host.readFile(tokenFile).trim();
    } catch (err) {
      problems.push({ variable: 'AGENTWS_RUNNER_TOKEN_FILE', message: `cannot be read: ${(err as Error).message}` });
    }
  }
  if (!token && !tokenFile) problems.push({ variable: 'AGENTWS_RUNNER_TOKEN', message: 'required (or AGENTWS_RUNNER_TOKEN_FILE): create one on the control plane with `aws runner token create <name>`' });
  else if (token && !/^agwr_[A-Za-z0-9_-]{20,}$/.test(token)) problems.push({ variable: 'AGENTWS_RUNNER_TOKEN', message: 'is not a runner token (they start with agwr_)' });
  const name = (flags.name ?? (get('AGENTWS_RUNNER_NAME') || host.hostname)).toLowerCase();
  if (!NAME.test(name)) problems.push({ variable: 'AGENTWS_RUNNER_NAME', message: `"${name}" is not a valid name (lower-case letters, digits, dot, dash, underscore; at most 63)` });
  const labels: Record<string, string> = {};
  for (const l of (flags.labels ?? get('AGENTWS_RUNNER_LABELS')).split(',').map((x) => x.trim()).filter(Boolean)) {
    if (!LABEL.test(l)) problems.push({ variable: 'AGENTWS_RUNNER_LABELS', message: `"${l}" is not key=value` });
    else labels[l.slice(0, l.indexOf('='))] = l.slice(l.indexOf('=') + 1);
  }
  const onOff = (k: string, dflt: boolean) => {
    const v = get(k).toLowerCase();
    if (!v) return dflt;
    if (v === 'on' || v === 'true') return true;
    if (v === 'off' || v === 'false') return false;
    problems.push({ variable: k, message: `must be on or off, got "${get(k)}"` });
    return dflt;
  };
  const int = (k: string, dflt: number, min: number, max: number) => {
    const v = get(k);
    if (!v) return dflt;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push({ variable: k, message: `must be a whole number from ${min} to ${max}, got "${v}"` });
      return dflt;
    }
    return n;
  };
  // The limits of each runtime, as serve reads them (config.schema.ts). The workspace quota is the
  // tenant's: the control plane sends it with each start.
  const size = <T extends number | 'auto' | null>(k: string, dflt: T, opts: Parameters<typeof parseSizeSetting>[1]): T => {
    const v = get(k);
    if (!v) return dflt;
    const r = parseSizeSetting(v, opts);
    if (r.ok) return r.value as T;
    problems.push({ variable: k, message: r.message });
    return dflt;
  };
  const pidsText = get('AGENTWS_RUNTIME_PIDS_MAX').toLowerCase();
  const pidsMax = pidsText === 'off' ? null : int('AGENTWS_RUNTIME_PIDS_MAX', 1024, 64, 4_194_304);
  const maxText = get('AGENTWS_RUNTIME_MAX').toLowerCase() || 'auto';
  const max = maxText === 'auto' ? null : int('AGENTWS_RUNTIME_MAX', 10, 1, 500);
  const value: RunnerSettings = {
    controlUrl,
    token,
    name,
    address: get('AGENTWS_RUNNER_ADDRESS') || null,
    labels,
    dataDir: host.resolvePath(flags.dataDir ?? (get('AGENTWS_DATA_DIR') || './data')),
    sharedStorage: onOff('AGENTWS_SHARED_STORAGE', false),
    sandbox: onOff('AGENTWS_RUNTIME_SANDBOX', true),
    max,
    idleMs: int('AGENTWS_RUNTIME_IDLE_MINUTES', 240, 1, 10080) * 60_000,
    freezeAfterMs: int('AGENTWS_RUNTIME_FREEZE_SECONDS', 10, 0, 86400) * 1000,
    pageOutAfterMs: int('AGENTWS_RUNTIME_PAGEOUT_SECONDS', 300, 0, 86400) * 1000,
    nice: int('AGENTWS_RUNTIME_NICE', 10, 0, 19),
    memoryMax: size<number | 'auto' | null>('AGENTWS_RUNTIME_MEMORY_MAX', 'auto', { auto: true, off: true, min: 512 * 1024 ** 2 }),
    pidsMax,
    tmpBytes: size<number>('AGENTWS_RUNTIME_TMP_SIZE', 1024 ** 3, { min: 16 * 1024 ** 2 }),
    logLevel: get('AGENTWS_LOG_LEVEL') || 'info',
  };
  if (!value.sandbox) problems.push({ variable: 'AGENTWS_RUNTIME_SANDBOX', message: 'must be on for a runner: a runner exists to run agents contained' });
  return problems.length ? { ok: false, problems } : { ok: true, value };
}
