import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGitGateway } from '../../src/core/connectors/git-gateway.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createGitServer } from '../fixtures/git-server.js';
import { median, report } from './bench-utils.js';
import { NO_WEBHOOK } from '../../src/core/connectors/git-hosts.repo.js';

const AUTH = `Basic ${Buffer.from('x-access-token:bench-token').toString('base64')}`;
const SIZE_MB = 50;
const ROUNDS = 3;


const listen = (s: http.Server) => new Promise<string>((resolve) => s.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(s.address() as AddressInfo).port}`)));

/**
 * A clone of a 50 MB repository (incompressible files) through the git gateway against a
 * direct clone from the same server (with the credential given to git directly), alternating, median of
 * three each. Target: ≤ 1.2× the direct clone.
 */
export async function gitGatewayBench(): Promise<boolean> {
  const root = mkdtempSync(join(tmpdir(), 'aws-bench-git-'));
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', GIT_AUTHOR_NAME: 'b', GIT_AUTHOR_EMAIL: 'b@b', GIT_COMMITTER_NAME: 'b', GIT_COMMITTER_EMAIL: 'b@b' };
  const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const upstream = createGitServer({ root, authorization: AUTH });
  let front: http.Server | undefined;
  try {
    const bare = join(root, 'org', 'big.git');
    git(['init', '-q', '--bare', '-b', 'main', bare]);
    const seed = join(root, 'seed');
    git(['init', '-q', '-b', 'main', seed]);
    for (let i = 0; i < SIZE_MB; i++) writeFileSync(join(seed, `blob-${i}.bin`), randomBytes(1024 * 1024));
    git(['add', '.'], seed);
    git(['commit', '-q', '-m', 'big'], seed);
    git(['push', '-q', bare, 'main'], seed);
    const base = await listen(upstream);
    const gateway = createGitGateway({
      hosts: {
        forAgent: async () => ({
          host: { id: 'h', tenantId: 't', name: 'corp', baseUrl: base, username: '', credentialKind: 'token', app: null, oauth: null, oauthSecretSealed: null, userConnections: 'off', secretSealed: '', access: [{ who: '*', repos: ['org/*'] }], protectedRefs: [], protectDefault: true, branchPrefix: 'agent/{handle}/', pushOptions: [], ...NO_WEBHOOK, createdAt: new Date(), updatedAt: new Date() },
          authorization: AUTH,
          as: { kind: 'service' as const },
          user: { handle: 'bench', roles: [], teams: [] },
        }),
      },
      record: async () => {},
      log: silentLogger,
    });
    front = http.createServer((req, res) => gateway.handle({ tenantId: 't', userId: 'u', credential: 'cred' }, req, res, new URL(req.url ?? '/', 'http://llm.agentws.internal')));
    const gw = await listen(front);
    // Not execFileSync: the gateway answers in this process, whose event loop must keep running.
    const clone = async (url: string, header: string) => {
      const dir = join(root, `clone-${randomBytes(4).toString('hex')}`);
      const started = performance.now();
      const code = await new Promise<number | null>((resolve) => spawn('git', ['-c', `http.extraHeader=${header}`, 'clone', '-q', '--no-checkout', url, dir], { env, stdio: 'ignore' }).on('close', resolve));
      if (code !== 0) throw new Error(`git clone ${url} failed (${code})`);
      const ms = performance.now() - started;
      rmSync(dir, { recursive: true, force: true });
      return ms;
    };
    const direct: number[] = [];
    const through: number[] = [];
    await clone(`${base}/org/big.git`, `Authorization: ${AUTH}`); // warm the page cache
    for (let i = 0; i < ROUNDS; i++) {
      direct.push(await clone(`${base}/org/big.git`, `Authorization: ${AUTH}`));
      through.push(await clone(`${gw}/git/corp/org/big.git`, 'Authorization: Bearer cred'));
    }
    const ratio = median(through) / median(direct);
    return report(`git gateway: clone of a ${SIZE_MB} MB repository`, {
      'direct clone (median ms)': Math.round(median(direct)),
      'through the gateway (median ms)': Math.round(median(through)),
      ratio: ratio.toFixed(2),
    }, { ok: ratio <= 1.2, target: '≤ 1.2× the direct clone' });
  } finally {
    front?.close();
    upstream.close();
    rmSync(root, { recursive: true, force: true });
  }
}
