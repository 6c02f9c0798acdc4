import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { untilSignal } from '../../src/cli/signals.js';
import { ConfigError } from '../../src/kernel/errors.js';
import { runtimeCapacity } from '../../src/core/runtime/host/runtime-capacity.js';
import { runtimeMemoryDefault } from '../../src/core/runtime/host/runtime-limits-fns.js';
import { readHostMemory, readSwap } from '../../src/lib/host-memory.js';
import { createLogger } from '../../src/lib/logger.js';
import { createRunnerAgent } from '../../src/runner/runner-agent.js';
import { readRunnerSettings } from '../../src/runner/runner-settings.js';

export default class Runner extends BaseCommand<typeof Runner> {
  static override summary = 'Run a runner host: this machine hosts sandboxed agent runtimes for the control plane.';
  static override description =
    'Dials the control plane (AGENTWS_CONTROL_URL) with a runner token (`aws runner token create` on the control plane) and hosts the runtimes of the users it places here: the same sandbox, egress rules and containment as `aws serve`. A runner holds no secret of the appliance: no database URL, encryption key, JWT secret, API key or provider key (it refuses to start when its environment has one). Stops gracefully on SIGTERM or SIGINT; drain it first (`aws runner drain <name>`) so that its users move.';
  static override examples = [
    'AGENTWS_CONTROL_URL=https://agents.example.com AGENTWS_RUNNER_TOKEN_FILE=/etc/agentws/runner-token <%= config.bin %> runner',
    '<%= config.bin %> runner --control-url http://10.0.0.1:8080 --name runner-2 --labels zone=a',
  ];
  static override flags = {
    'control-url': Flags.string({ summary: 'The control plane\'s URL (overrides AGENTWS_CONTROL_URL).' }),
    name: Flags.string({ summary: 'This runner\'s name (overrides AGENTWS_RUNNER_NAME; default: the host name).' }),
    labels: Flags.string({ summary: 'Labels, key=value,... (overrides AGENTWS_RUNNER_LABELS).' }),
    'data-dir': Flags.string({ summary: 'Where workspaces and runtime homes live (overrides AGENTWS_DATA_DIR).' }),
  };
  protected static override needsConfig = false;
  protected static override needsCore = false;

  async run(): Promise<void> {
    const settings = readRunnerSettings(process.env, {
      controlUrl: this.flags['control-url'],
      name: this.flags.name,
      labels: this.flags.labels,
      dataDir: this.flags['data-dir'],
    }, { hostname: hostname(), readFile: (p) => readFileSync(p, 'utf8'), resolvePath: (p) => resolve(p) });
    if (!settings.ok) throw new ConfigError(settings.problems, { hint: 'See `aws runner --help` and docs/operating/runner-hosts.md.' });
    const s = settings.value;
    const log = createLogger(s.logLevel, 1);
    const hostMemory = readHostMemory();
    const capacity = s.max ?? runtimeCapacity({ ...hostMemory, swapBytes: s.pageOutAfterMs > 0 && s.freezeAfterMs > 0 ? readSwap().totalBytes : 0 });
    const agent = createRunnerAgent({
      controlUrl: s.controlUrl,
      token: s.token,
      info: { name: s.name, address: s.address, capacity, labels: s.labels, version: this.config.version, sharedStorage: s.sharedStorage },
      dataDir: s.dataDir,
      sandbox: s.sandbox,
      nice: s.nice,
      idleMs: s.idleMs,
      freezeAfterMs: s.freezeAfterMs,
      pageOutAfterMs: s.pageOutAfterMs,
      limits: { memoryMaxBytes: s.memoryMax === 'auto' ? runtimeMemoryDefault(hostMemory.totalBytes) : s.memoryMax, pidsMax: s.pidsMax, tmpBytes: s.tmpBytes },
      log,
    });
    const signal = untilSignal(() => process.exit(1));
    await agent.start();
    log.info({ name: s.name, capacity, control: new URL(s.controlUrl).origin, sharedStorage: s.sharedStorage }, 'agentws runner ready');
    const received = await signal;
    log.info({ signal: received }, 'runner shutting down: stopping its runtimes');
    await agent.stop();
    log.info('stopped');
  }
}
