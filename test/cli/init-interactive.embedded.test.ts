import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

// util-linux's `script` provides the terminal (Debian ships it in an essential package).
const hasScript = spawnSync('script', ['--version']).status === 0;

// The interactive path is the same on both databases; it runs once, on the embedded one.
describe.runIf(DB_MODE === 'embedded' && hasScript)('aws init in a terminal', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv({ initialiseEmbedded: false });
  });
  afterAll(() => env?.cleanup());

  it('asks for each setting, takes the answers, and sets everything up', async () => {
    const config = join(env.dir, 'interactive', 'config.env');
    // `script` gives the command a real pseudo-terminal, as a sysadmin's shell would.
    const cmd = `${process.execPath} ${BIN} init --config ${config} --data-dir ${join(env.dir, 'interactive-data')}`;
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'], env: cleanEnv({ TERM: 'xterm' }) });
    const answers: Array<[RegExp, string]> = [
      [/Data directory/, '\r'],
      [/Database/, '\r'],
      [/Public URL/, '\u0015https://agents.interactive.example\r'],
      [/Entra ID tenant id/, '\r'],
      [/Other OpenID Connect issuer/, '\r'],
      [/demo mode/, 'n\r'],
      [/First tenant name/, '\u0015Interactive Co\r'],
      [/Operator \(first owner\) email/, '\u0015ops@interactive.example\r'],
    ];
    let out = '';
    let next = 0;
    const asked: string[] = [];
    child.stdout.on('data', (d) => {
      out += d;
      if (next < answers.length && answers[next][0].test(out.slice(-4000))) {
        const [question, keys] = answers[next++];
        asked.push(question.source);
        setTimeout(() => child.stdin.write(keys), 150);
      }
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    expect(code, out).toBe(0);
    expect(asked).toHaveLength(answers.length);
    const text = readFileSync(config, 'utf8');
    expect(text).toMatch(/^AGENTWS_PUBLIC_URL=https:\/\/agents.interactive.example$/m);
    expect(text).toMatch(/^AGENTWS_ALLOW_ANONYMOUS=false$/m);
    expect(text).toMatch(/^AGENTWS_OPERATOR_EMAIL=ops@interactive.example$/m);
    expect(out).toMatch(/create tenant "Interactive Co"/);
    expect(out).toMatch(/Ready\. Config:/);
  });
});
