import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { homedir, networkInterfaces, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { controlPlaneForbidden, createEgressDecider } from './egress-decider.js';
import { parsePrivateAllow } from './egress-policy.js';
import { createEgressProxy } from './egress-proxy.js';
import { silentLogger } from '../../../kernel/logger.js';
import { opencodeBinary } from './opencode-process.js';
import { INNER_PROXY_PORT, probeSandbox, SANDBOX_PATHS, sandboxEtcFiles, sandboxPath, spawnSandbox, type SandboxProbe, type SandboxSpec } from './sandbox.js';
import { workspaceDir } from '../../../lib/data-paths.js';
import { authority, CONTAINMENT_PROBES, excerpt, PROBE_TMP_BYTES, type ProbeResult, type ProbeRun, type ProbeTargets } from './containment-probes.js';

/**
 * The runner of the containment probes (containment-probes.ts): it starts a real sandbox for each (built
 * by bwrapArgs exactly as a runtime's is, with the real egress proxy behind it), after planting the
 * secrets outside it, and judges what came out.
 */
export interface ContainmentOptions {
  /** The installed appliance's config file and data dir (probed as extra targets, their secrets as markers). */
  installed?: { configPath?: string; dataDir?: string; secrets?: string[] };
  /** The API's loopback port, when one runs. */
  apiPort?: number;
  /**
   * On a runner host: the control plane's URL. Its addresses are forbidden to the probes' proxy as the
   * runner's are (controlPlaneForbidden) and allowed by its private list, as an operator may allow the
   * internal network: the probes then show that the runner's own rule is what keeps agents off it.
   */
  controlUrl?: string;
  /** Only these probes (ids); default all. */
  only?: string[];
  /** Per probe; default 30 s. */
  timeoutMs?: number;
  /** Called as each probe ends (progress). */
  onResult?(r: ProbeResult): void;
}

export interface ContainmentReport {
  /** Whether a sandbox could start at all (probeSandbox); results are empty when not. */
  sandbox: SandboxProbe;
  results: ProbeResult[];
  /** Every contain probe contained and every legit probe worked. */
  ok: boolean;
}

const secretValue = () => `aws-secret-${randomBytes(12).toString('hex')}`;

/**
 * Plants the secrets, starts the proxy and the loopback servers, runs each probe in a fresh sandbox of
 * its own (so a probe that breaks its sandbox does not spoil the next), and cleans up.
 */
export async function runContainmentProbes(options: ContainmentOptions = {}): Promise<ContainmentReport> {
  const sandbox = probeSandbox();
  if (!sandbox.ok) return { sandbox, results: [], ok: false };

  const markers = { config: secretValue(), apiKey: secretValue(), otherUser: secretValue(), otherTenant: secretValue(), env: secretValue(), server: secretValue() };
  const root = mkdtempSync(join(tmpdir(), 'aws-probe-'));
  const cleanups: Array<() => unknown> = [() => rmSync(root, { recursive: true, force: true })];
  try {
    // The planted world: a data dir laid out like the real one, with the sandbox's user as one of its users.
    const dataDir = join(root, 'data');
    const fakeConfig = join(dataDir, 'config.env');
    const workspace = workspaceDir(dataDir, { tenantId: 'tenant-a', userId: 'user-a' });
    const otherUserWorkspace = workspaceDir(dataDir, { tenantId: 'tenant-a', userId: 'user-b' });
    const otherTenantDir = join(dataDir, 'tenants', 'tenant-b');
    const runtimeDir = join(dataDir, 'runtimes', 'user-a');
    const dirs = { workspace, home: join(runtimeDir, 'home'), tmp: join(runtimeDir, 'tmp'), tenant: join(dataDir, 'tenants', 'tenant-a'), run: join(root, 'run'), etc: join(root, 'etc'), plugin: join(root, 'plugin'), managed: join(runtimeDir, 'managed') };
    for (const d of [...Object.values(dirs), otherUserWorkspace, otherTenantDir, join(dirs.plugin, 'node_modules'), join(dirs.home, '.config')]) mkdirSync(d, { recursive: true, mode: 0o700 });
    writeFileSync(fakeConfig, `AGENTWS_JWT_SECRET=${markers.config}\nAGENTWS_API_KEY=${markers.apiKey}\n`, { mode: 0o600 });
    writeFileSync(join(otherUserWorkspace, 'agentws-probe-secret-user.txt'), `${markers.otherUser}\n`);
    writeFileSync(join(otherTenantDir, 'agentws-probe-secret-tenant.txt'), `${markers.otherTenant}\n`);
    writeFileSync(join(dirs.tenant, 'shared.md'), 'a file the tenant shares\n');
    for (const [name, text] of Object.entries(sandboxEtcFiles())) writeFileSync(join(dirs.etc, name), text);
    writeFileSync(join(dirs.plugin, 'package.json'), '{}\n');
    writeFileSync(join(dirs.plugin, 'package-lock.json'), '{}\n');
    writeFileSync(join(dirs.managed, 'opencode.json'), '{}\n');

    const secrets = [...Object.values(markers), ...installedSecrets(options.installed?.configPath), ...(options.installed?.secrets ?? []).filter((v) => v.length >= 8)];

    // Loopback servers on the host: one holding a secret (must stay out of reach), one the operator allows.
    const secretServer = await serve((_req, res) => res.end(`${markers.server}\n`));
    cleanups.push(() => secretServer.close());
    const allowedServer = await serve((_req, res) => res.end('allowed page\n'));
    cleanups.push(() => allowedServer.close());

    // The agents' decision (the host's own addresses read from its interfaces), with the planted server's
    // port open as an operator may open one: what must refuse it is the address rule, not the port rule.
    const control = options.controlUrl ? new URL(options.controlUrl) : null;
    const controlPlane = control ? { host: control.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(control.port || (control.protocol === 'https:' ? 443 : 80)) } : undefined;
    const allowed = [`127.0.0.1:${allowedServer.port}`, ...(controlPlane ? [authority(controlPlane)] : [])].join(',');
    const decider = createEgressDecider({
      privateAllow: parsePrivateAllow(allowed).entries,
      ports: [secretServer.port, ...(controlPlane ? [controlPlane.port] : [])],
      forbidden: options.controlUrl ? controlPlaneForbidden(options.controlUrl) : undefined,
    });
    const proxy = createEgressProxy<string>({
      decide: (_id, host, port) => decider.decide(host, port, { allow: [], deny: [] }),
      gateway: (_id, _req, res) => void res.writeHead(404, { 'content-type': 'text/plain' }).end('no gateway in the probes\n'),
      refused: () => {},
      log: silentLogger,
    });

    // A host process of the service's user that nothing in a sandbox may signal.
    const sentinel = spawn('sleep', ['3600'], { stdio: 'ignore' });
    cleanups.push(() => sentinel.kill('SIGKILL'));
    const targets: ProbeTargets = {
      fakeConfig,
      fakeDataDir: dataDir,
      otherUserWorkspace,
      otherTenantDir,
      hostHome: homedir(),
      secretPort: secretServer.port,
      allowedPort: allowedServer.port,
      hostAddresses: Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((i) => !i.internal && !i.address.startsWith('fe80')).map((i) => i.address),
      hostRunDir: dirs.run,
      installedConfig: options.installed?.configPath,
      installedDataDir: options.installed?.dataDir,
      apiPort: options.apiPort,
      controlPlane,
      sentinelAlive: () => sentinel.exitCode === null && sentinel.signalCode === null,
    };

    const nodeBinDir = dirname(process.execPath);
    const baseSpec: Omit<SandboxSpec, 'command'> = {
      workspace: dirs.workspace,
      home: dirs.home,
      tenant: dirs.tenant,
      run: dirs.run,
      tmpBytes: PROBE_TMP_BYTES,
      etcDir: dirs.etc,
      opencode: opencodeBinary(),
      nodeBinDir,
      pluginDir: dirs.plugin,
      managedConfig: dirs.managed,
      env: {
        PATH: sandboxPath(true),
        HOME: SANDBOX_PATHS.home,
        USER: 'agent',
        LANG: 'C.UTF-8',
        HTTP_PROXY: `http://127.0.0.1:${INNER_PROXY_PORT}`,
        HTTPS_PROXY: `http://127.0.0.1:${INNER_PROXY_PORT}`,
        http_proxy: `http://127.0.0.1:${INNER_PROXY_PORT}`,
        https_proxy: `http://127.0.0.1:${INNER_PROXY_PORT}`,
      },
    };

    const results: ProbeResult[] = [];
    for (const probe of CONTAINMENT_PROBES) {
      if (options.only && !options.only.includes(probe.id)) continue;
      if (probe.needs && targets[probe.needs] === undefined) continue;
      // A fresh proxy listener per probe: a probe that removes proxy.sock must not cut the next one off.
      const listener = await proxy.listen(probe.id, { path: join(dirs.run, 'proxy.sock') });
      let run: ProbeRun;
      let verdict: string | null;
      try {
        run = await runInSandbox(sandbox.bwrap!, { ...baseSpec, command: ['/bin/sh', '-c', withProxyBridge(probe.script(targets))] }, markers.env, options.timeoutMs ?? 30_000);
        // Judged before anything on the host changes (some judges look at the run dir).
        const leaked = secrets.find((s) => run.out.includes(s));
        verdict = leaked ? `a planted secret appeared in the output: ${excerpt(run.out)}` : probe.judge(run, targets);
      } finally {
        await listener.close();
      }
      const result: ProbeResult = {
        id: probe.id,
        kind: probe.kind,
        tries: probe.tries,
        passed: verdict === null,
        detail: verdict ?? (probe.kind === 'legit' ? 'worked' : `contained (exit ${run.code}): ${excerpt(run.out, 160)}`),
      };
      results.push(result);
      options.onResult?.(result);
      if (!targets.sentinelAlive()) break; // the runner itself is no longer trustworthy
    }
    return { sandbox, results, ok: results.every((r) => r.passed) };
  } finally {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
  }
}

/**
 * The proxy bridge inside, as the runtime has it (innerCommand), then the probe; waits until the bridge
 * listens by reading /proc/net/tcp (connecting to it would already be traffic).
 */
function withProxyBridge(script: string): string {
  const portHex = INNER_PROXY_PORT.toString(16).toUpperCase().padStart(4, '0');
  return [
    `socat TCP-LISTEN:${INNER_PROXY_PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${SANDBOX_PATHS.run}/proxy.sock 2>/dev/null &`,
    `i=0; while ! grep -q ':${portHex} 00000000:0000 0A' /proc/net/tcp && [ $i -lt 100 ]; do i=$((i+1)); sleep 0.05; done`,
    script,
  ].join('\n');
}

/** Starts bwrap with the spec; the runner's own environment carries a marker the sandbox must not inherit. */
function runInSandbox(bwrap: string, spec: SandboxSpec, envMarker: string, timeoutMs: number): Promise<ProbeRun> {
  // The marker goes into this process's own environment while bwrap starts: a spawner that passed it on
  // (Node's default) would show it at /proc/1/environ inside.
  const saved = process.env.AGENTWS_PROBE_ENV_SECRET;
  process.env.AGENTWS_PROBE_ENV_SECRET = envMarker;
  let child: ChildProcess;
  try {
    child = spawnSandbox(bwrap, spec);
  } finally {
    if (saved === undefined) delete process.env.AGENTWS_PROBE_ENV_SECRET;
    else process.env.AGENTWS_PROBE_ENV_SECRET = saved;
  }
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      resolve({ code: null, out: `${out}\n${err.message}` });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out: out.slice(0, 64_000) });
    });
  });
}

/** The installed config's values long enough to be secrets (keys, passwords, URLs with credentials). */
function installedSecrets(configPath: string | undefined): string[] {
  if (!configPath) return [];
  try {
    return readFileSync(configPath, 'utf8')
      .split('\n')
      .map((l) => /^\s*[A-Z0-9_]+\s*=\s*['"]?(.*?)['"]?\s*$/.exec(l)?.[1] ?? '')
      .filter((v) => v.length >= 16 && !v.startsWith('/'));
  } catch {
    return [];
  }
}

async function serve(handler: http.RequestListener): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
