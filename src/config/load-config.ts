import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parseEnv } from 'node:util';
import { ConfigError, type ConfigProblem } from '../kernel/errors.js';
import { deepFreeze } from '../lib/freeze.js';
import { parsePorts, parsePrivateAllow } from '../lib/net-lists.js';
import { isLoopback } from '../lib/loopback.js';
import { parseSizeSetting } from '../lib/size.js';
import { CONFIG_VARS, type Config, type ConfigVarName, type VarSpec } from './config.schema.js';

/** Where the config file lives when neither --config nor AGENTWS_CONFIG says otherwise. */
const DEFAULT_CONFIG_PATH = './.agentws/config.env';

export interface LoadConfigOptions {
  /** Explicit path (the --config flag); wins over AGENTWS_CONFIG. */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Resolves which config file applies and whether the caller named it explicitly. */
export function resolveConfigPath(options: LoadConfigOptions = {}): { path: string; explicit: boolean } {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const named = options.configPath ?? env.AGENTWS_CONFIG;
  return { path: resolve(cwd, named ?? DEFAULT_CONFIG_PATH), explicit: Boolean(named) };
}

/** Reads a KEY=value config file (comments and quotes allowed, same syntax as dotenv). */
export function readConfigFile(path: string): Record<string, string> {
  return parseEnv(readFileSync(path, 'utf8')) as Record<string, string>;
}

/**
 * Parses the configuration once: config file, then environment variables on top. Every problem is
 * collected and reported together, each with the variable's name, so a sysadmin fixes them in one go.
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const { path, explicit } = resolveConfigPath(options);
  const problems: ConfigProblem[] = [];

  let fileValues: Record<string, string> = {};
  let configFile: string | null = null;
  if (existsSync(path)) {
    try {
      fileValues = readConfigFile(path);
      configFile = path;
    } catch (err) {
      problems.push({ variable: 'AGENTWS_CONFIG', message: `cannot read ${path}: ${(err as Error).message}` });
    }
  } else if (explicit) {
    problems.push({ variable: 'AGENTWS_CONFIG', message: `config file ${path} does not exist` });
  }
  return parseConfigValues({ fileValues, configFile, env, cwd, problems });
}

/**
 * Builds the Config from config-file values and the environment (which wins). Exported for `aws init`,
 * which validates what it is about to write before writing it.
 */
export function parseConfigValues(input: {
  fileValues: Record<string, string>;
  configFile: string | null;
  env: NodeJS.ProcessEnv;
  cwd: string;
  problems?: ConfigProblem[];
}): Config {
  const { fileValues, configFile, env, cwd } = input;
  const path = configFile ?? 'the config file';
  const problems = input.problems ?? [];
  const known = new Set<string>(CONFIG_VARS.map((v) => v.name));
  for (const key of Object.keys(fileValues)) {
    if (!known.has(key)) problems.push({ variable: key, message: `unknown variable in ${path}` });
  }

  const raw = (name: ConfigVarName): string => {
    const fromEnv = env[name];
    if (fromEnv !== undefined) return fromEnv.trim();
    if (fileValues[name] !== undefined) return fileValues[name].trim();
    return (CONFIG_VARS.find((v) => v.name === name) as VarSpec).default ?? '';
  };
  const values = {} as Record<ConfigVarName, string | number | boolean>;
  for (const spec of CONFIG_VARS as readonly VarSpec[]) {
    values[spec.name as ConfigVarName] = parseVar(spec, raw(spec.name as ConfigVarName), problems, configFile);
  }

  const base = configFile ? dirname(configFile) : cwd;
  const str = (n: ConfigVarName) => values[n] as string;
  const orNull = (n: ConfigVarName) => (str(n) === '' ? null : str(n));
  const databaseUrl = orNull('DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:$/.test(new URL(databaseUrl).protocol)) {
    problems.push({ variable: 'DATABASE_URL', message: 'must be a postgres:// or postgresql:// URL' });
  }
  const encryptionKey = str('AGENTWS_ENCRYPTION_KEY');
  if (encryptionKey && !problems.some((p) => p.variable === 'AGENTWS_ENCRYPTION_KEY') && Buffer.from(encryptionKey, 'base64url').length !== 32) {
    problems.push({ variable: 'AGENTWS_ENCRYPTION_KEY', message: 'must be 32 bytes, base64url-encoded (43 characters); generate one with `npx aws init`' });
  }
  const allowAnonymous = values.AGENTWS_ALLOW_ANONYMOUS as boolean;
  if (allowAnonymous && !orNull('AGENTWS_OPERATOR_EMAIL')) {
    problems.push({ variable: 'AGENTWS_OPERATOR_EMAIL', message: 'required when AGENTWS_ALLOW_ANONYMOUS=true (demo requests act as this user)' });
  }
  // Demo mode makes every request without a token the operator (an owner): only for one machine.
  if (allowAnonymous) problems.push(...demoModeProblems({ host: str('AGENTWS_HOST'), identityProvider: Boolean((orNull('AGENTWS_OIDC_ISSUER_URL') || orNull('AGENTWS_ENTRA_TENANT_ID')) && orNull('AGENTWS_OIDC_CLIENT_ID')) }));

  const previousKeys = str('AGENTWS_PREVIOUS_ENCRYPTION_KEYS').split(',').map((x) => x.trim()).filter(Boolean);
  if (previousKeys.some((k) => Buffer.from(k, 'base64url').length !== 32)) {
    problems.push({ variable: 'AGENTWS_PREVIOUS_ENCRYPTION_KEYS', message: 'every key must be 32 bytes, base64url-encoded (43 characters)' });
  }
  // The external runtime mode is gone (one runtime for every user cannot be contained): say so rather
  // than silently ignoring a setting an operator relies on.
  for (const v of ['AGENTWS_RUNTIME_URL', 'AGENTWS_RUNTIME_PASSWORD'] as const) {
    if (orNull(v)) {
      problems.push({ variable: v, message: 'is no longer supported: an external runtime shared by every user cannot be contained. `aws serve` now runs one sandboxed runtime per user itself; remove this setting' });
    }
  }
  // A scrape token sits in Prometheus's configuration in clear: a guessable one would open /metrics.
  const metricsToken = str('AGENTWS_METRICS_TOKEN');
  if (metricsToken && metricsToken.length < 24) {
    problems.push({ variable: 'AGENTWS_METRICS_TOKEN', message: `is too short (${metricsToken.length} characters, need at least 24); generate one with \`openssl rand -base64 32\`` });
  }
  const privateAllow = parsePrivateAllow(str('AGENTWS_EGRESS_PRIVATE_ALLOW'));
  if (privateAllow.invalid.length) {
    problems.push({ variable: 'AGENTWS_EGRESS_PRIVATE_ALLOW', message: `not a host, host:port or CIDR: ${privateAllow.invalid.join(', ')}` });
  }
  const runtimeMaxText = str('AGENTWS_RUNTIME_MAX').trim().toLowerCase() || 'auto';
  const runtimeMax = runtimeMaxText === 'auto' ? null : /^\d+$/.test(runtimeMaxText) ? Number(runtimeMaxText) : NaN;
  if (runtimeMax !== null && !(runtimeMax >= 1 && runtimeMax <= 500)) {
    problems.push({ variable: 'AGENTWS_RUNTIME_MAX', message: `must be auto or a whole number from 1 to 500, got "${str('AGENTWS_RUNTIME_MAX')}"` });
  }
  // Limits of each runtime and the workspace quota: sizes people write (4GiB, 512MiB), auto or off.
  const sizeSetting = <T extends number | 'auto' | null>(name: ConfigVarName, dflt: T, o: Parameters<typeof parseSizeSetting>[1]): T => {
    const text = str(name).trim();
    if (!text) return dflt;
    const r = parseSizeSetting(text, o);
    if (r.ok) return r.value as T;
    problems.push({ variable: name, message: r.message });
    return dflt;
  };
  const memoryMax = sizeSetting<number | 'auto' | null>('AGENTWS_RUNTIME_MEMORY_MAX', 'auto', { auto: true, off: true, min: 512 * 1024 ** 2 });
  const tmpBytes = sizeSetting<number>('AGENTWS_RUNTIME_TMP_SIZE', 1024 ** 3, { min: 16 * 1024 ** 2 });
  const workspaceQuotaBytes = sizeSetting<number | null>('AGENTWS_WORKSPACE_QUOTA', 10 * 1024 ** 3, { off: true, min: 100 * 1024 ** 2 });
  const workspaceQuotaMaxBytes = sizeSetting<number>('AGENTWS_WORKSPACE_QUOTA_MAX', 100 * 1024 ** 3, { min: 100 * 1024 ** 2 });
  if (workspaceQuotaBytes !== null && workspaceQuotaBytes > workspaceQuotaMaxBytes) problems.push({ variable: 'AGENTWS_WORKSPACE_QUOTA_MAX', message: `must not be under AGENTWS_WORKSPACE_QUOTA (the default a tenant may always keep)` });
  const uploadFileMax = sizeSetting<number>('AGENTWS_UPLOAD_FILE_MAX', 1024 ** 3, { min: 64 * 1024 });
  const pidsText = str('AGENTWS_RUNTIME_PIDS_MAX').trim().toLowerCase() || '1024';
  const pidsMax = pidsText === 'off' ? null : /^\d+$/.test(pidsText) ? Number(pidsText) : NaN;
  if (pidsMax !== null && !(pidsMax >= 64 && pidsMax <= 4_194_304)) problems.push({ variable: 'AGENTWS_RUNTIME_PIDS_MAX', message: `must be a whole number from 64 to 4194304, or off, got "${str('AGENTWS_RUNTIME_PIDS_MAX')}"` });
  const relayUrl = str('AGENTWS_RELAY_URL');
  if (relayUrl && !/^https?:\/\/[^/@\s]+(\/.*)?$/.test(relayUrl)) problems.push({ variable: 'AGENTWS_RELAY_URL', message: `not an http(s) URL: "${relayUrl}"` });
  const egressPorts = parsePorts(str('AGENTWS_EGRESS_PORTS'));
  if (egressPorts.invalid.length) problems.push({ variable: 'AGENTWS_EGRESS_PORTS', message: `not a port (1-65535): ${egressPorts.invalid.join(', ')}` });
  // Which names a runtime's tools ask under is the runtime's fact: the runtime service checks them when it is made.
  const askTools = str('AGENTWS_RUNTIME_ASK_TOOLS').split(',').map((x) => x.trim()).filter(Boolean);

  const redirectOrigins: string[] = [];
  for (const item of str('AGENTWS_AUTH_REDIRECT_ORIGINS').split(',').map((x) => x.trim()).filter(Boolean)) {
    try {
      const u = new URL(item);
      if (!['http:', 'https:'].includes(u.protocol) || u.origin !== item.replace(/\/+$/, '')) throw new Error();
      redirectOrigins.push(u.origin);
    } catch {
      problems.push({ variable: 'AGENTWS_AUTH_REDIRECT_ORIGINS', message: `"${item}" is not an origin like https://app.example.com` });
    }
  }
  const issuer = str('AGENTWS_OIDC_ISSUER_URL');
  if (issuer && new URL(issuer).protocol !== 'https:' && !isLoopback(new URL(issuer).hostname)) {
    problems.push({ variable: 'AGENTWS_OIDC_ISSUER_URL', message: 'must be https (plain http is accepted only for a loopback issuer, in development)' });
  }

  if (problems.length > 0) {
    throw new ConfigError(problems, {
      hint: configFile
        ? `Fix the variables above in ${configFile} or the environment.`
        : 'No config file found: run `npx aws init` to create one, or set the variables in the environment.',
    });
  }

  const mode = databaseUrl ? 'postgres' : 'embedded';
  const runsWorker = str('AGENTWS_SERVE_RUNS_WORKER');
  const entraTenantId = orNull('AGENTWS_ENTRA_TENANT_ID');
  const config: Config = {
    configFile,
    dataDir: isAbsolute(str('AGENTWS_DATA_DIR')) ? str('AGENTWS_DATA_DIR') : resolve(base, str('AGENTWS_DATA_DIR')),
    database: { mode, url: databaseUrl, poolMax: values.AGENTWS_DATABASE_POOL_MAX as number },
    server: {
      host: str('AGENTWS_HOST'),
      port: values.AGENTWS_PORT as number,
      publicUrl: str('AGENTWS_PUBLIC_URL').replace(/\/+$/, ''),
      trustProxy: values.AGENTWS_TRUST_PROXY as boolean,
      shutdownTimeoutMs: values.AGENTWS_SHUTDOWN_TIMEOUT_MS as number,
      shutdownTurnGraceMs: (values.AGENTWS_SHUTDOWN_TURN_GRACE_SECONDS as number) * 1000,
    },
    logLevel: str('AGENTWS_LOG_LEVEL'),
    accessLog: str('AGENTWS_ACCESS_LOG') as Config['accessLog'],
    secrets: {
      jwtSecret: str('AGENTWS_JWT_SECRET'),
      encryptionKey: str('AGENTWS_ENCRYPTION_KEY'),
      apiKey: orNull('AGENTWS_API_KEY'),
      metricsToken: orNull('AGENTWS_METRICS_TOKEN'),
      previousEncryptionKeys: previousKeys,
    },
    auth: {
      allowAnonymous,
      operatorEmail: orNull('AGENTWS_OPERATOR_EMAIL'),
      operatorTenant: orNull('AGENTWS_OPERATOR_TENANT'),
      oidc: {
        issuerUrl:
          orNull('AGENTWS_OIDC_ISSUER_URL') ??
          (entraTenantId ? `https://login.microsoftonline.com/${entraTenantId}/v2.0` : null),
        clientId: orNull('AGENTWS_OIDC_CLIENT_ID'),
        clientSecret: orNull('AGENTWS_OIDC_CLIENT_SECRET'),
        entraTenantId,
        tenantClaim: str('AGENTWS_OIDC_TENANT_CLAIM') || 'tid',
      },
      autoProvisionTenants: values.AGENTWS_AUTO_PROVISION_TENANTS as boolean,
      defaultRole: str('AGENTWS_DEFAULT_ROLE') || 'member',
      redirectOrigins,
    },
    worker: {
      // Embedded mode has one database session in one process, so the worker must live in serve.
      inServe: mode === 'embedded' ? true : runsWorker === 'true',
      concurrency: values.AGENTWS_WORKER_CONCURRENCY as number,
    },
    runtime: {
      sandbox: values.AGENTWS_RUNTIME_SANDBOX === 'on',
      idleMs: (values.AGENTWS_RUNTIME_IDLE_MINUTES as number) * 60_000,
      max: runtimeMax,
      freezeAfterMs: (values.AGENTWS_RUNTIME_FREEZE_SECONDS as number) * 1000,
      pageOutAfterMs: (values.AGENTWS_RUNTIME_PAGEOUT_SECONDS as number) * 1000,
      terminalIdleMs: (values.AGENTWS_TERMINAL_IDLE_SECONDS as number) * 1000,
      egressPrivateAllow: str('AGENTWS_EGRESS_PRIVATE_ALLOW'),
      egressPorts: egressPorts.ports,
      askTools,
      snapshots: values.AGENTWS_RUNTIME_SNAPSHOTS === 'on',
      nice: values.AGENTWS_RUNTIME_NICE as number,
      memoryMax,
      pidsMax: pidsMax !== null && Number.isFinite(pidsMax) ? pidsMax : pidsMax === null ? null : 1024,
      tmpBytes,
      workspaceQuotaBytes,
      workspaceQuotaMaxBytes,
      localRunner: values.AGENTWS_LOCAL_RUNNER === 'on',
      relayUrl: str('AGENTWS_RELAY_URL').replace(/\/+$/, '') || null,
      runnerHeartbeatTimeoutMs: values.AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS as number,
    },
    gateways: {
      botChatApiUrl: str('AGENTWS_BOT_CHAT_API_URL').replace(/\/+$/, ''),
      teamChatApiUrl: str('AGENTWS_TEAM_CHAT_API_URL').replace(/\/+$/, ''),
    },
    uploads: { fileMaxBytes: uploadFileMax, maxFiles: values.AGENTWS_UPLOAD_MAX_FILES as number },
    prompts: {
      maxFiles: values.AGENTWS_PROMPT_MAX_FILES as number,
      maxFileBytes: (values.AGENTWS_PROMPT_MAX_FILE_MB as number) * 1024 * 1024,
    },
    retention: {
      auditFloorDays: values.AGENTWS_AUDIT_RETENTION_FLOOR_DAYS as number,
    },
    memories: {
      writesPerMinute: values.AGENTWS_MEMORY_WRITES_PER_MINUTE as number,
      quota: values.AGENTWS_MEMORY_QUOTA as number,
    },
  };
  return deepFreeze(config);
}

/**
 * Why local demo mode cannot be on with these settings: on an address other machines reach, anyone who
 * can connect would act as the operator; with an identity provider, anyone would skip signing in.
 * Shared with `aws serve --host` and `aws init`, which apply the same rule to their flags.
 */
export function demoModeProblems(input: { host: string; identityProvider: boolean }): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  if (!isLoopback(input.host)) {
    problems.push({
      variable: 'AGENTWS_ALLOW_ANONYMOUS',
      message: `demo mode (requests without a token act as the operator) runs only on a loopback address, and the listen address is "${input.host}"; turn demo mode off, or listen on 127.0.0.1 (AGENTWS_HOST) behind a reverse proxy`,
    });
  }
  if (input.identityProvider) {
    problems.push({
      variable: 'AGENTWS_ALLOW_ANONYMOUS',
      message: 'demo mode cannot be on with an identity provider configured (AGENTWS_OIDC_ISSUER_URL or AGENTWS_ENTRA_TENANT_ID, and AGENTWS_OIDC_CLIENT_ID): anyone could skip signing in and act as the operator; turn demo mode off',
    });
  }
  return problems;
}

function parseVar(spec: VarSpec, value: string, problems: ConfigProblem[], file: string | null): string | number | boolean {
  const fail = (message: string) => {
    problems.push({ variable: spec.name, message });
    return spec.kind === 'int' ? 0 : spec.kind === 'bool' ? false : '';
  };
  if (value === '') {
    if (spec.required) {
      return fail(file ? `is required (not set in ${file} nor the environment)` : 'is required (run `npx aws init` to generate it)');
    }
    if (spec.kind === 'int' || spec.kind === 'bool' || spec.kind === 'enum') return fail('must not be empty');
    return '';
  }
  switch (spec.kind) {
    case 'int': {
      if (!/^-?\d+$/.test(value)) return fail(`must be a whole number, got "${value}"`);
      const n = Number(value);
      if (spec.min !== undefined && n < spec.min) return fail(`must be at least ${spec.min}, got ${n}`);
      if (spec.max !== undefined && n > spec.max) return fail(`must be at most ${spec.max}, got ${n}`);
      return n;
    }
    case 'bool': {
      const v = value.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      return fail(`must be true or false, got "${value}"`);
    }
    case 'enum':
      if (!spec.values!.includes(value)) return fail(`must be one of ${spec.values!.join(', ')}, got "${value}"`);
      return value;
    case 'url':
      try {
        const url = new URL(value);
        if (!url.protocol || !url.host) return fail(`must be an absolute URL, got "${value}"`);
      } catch {
        // Never echo a URL that may carry a password.
        return fail('must be an absolute URL');
      }
      return value;
    case 'secret':
      if (spec.minLength && value.length < spec.minLength) {
        return fail(`is too short (${value.length} characters, need at least ${spec.minLength}); generate one with \`npx aws init\``);
      }
      return value;
    default:
      return value;
  }
}
