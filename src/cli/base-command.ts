import { Command, Errors, Flags, type Interfaces } from '@oclif/core';
import type { Config } from '../config/config.schema.js';
import { loadConfig } from '../config/load-config.js';
import { systemCtx, type Ctx } from '../kernel/context.js';
import type { Core } from '../core/create-core.js';
import { ConfigError, isAppError, ValidationError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { createLogger } from '../lib/logger.js';
import type { OpenedCore } from './open-core.js';
import { colors, info, printJson } from './output.js';
import { canPrompt } from './secret-input.js';

export type BaseFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof BaseCommand)['baseFlags'] & T['flags']>;
export type BaseArgs<T extends typeof Command> = Interfaces.InferredArgs<T['args']>;

/**
 * The lifecycle every command shares: parse flags, load the config, open the database and build the
 * core (only for commands that need it), run, close cleanly. Errors are mapped here, the CLI's half of the
 * error hierarchy: known errors print a message and a hint and exit 1; unexpected ones a stack, exit 70.
 */
export abstract class BaseCommand<T extends typeof Command> extends Command {
  /** Shared by the tenant-scoped commands. */
  static tenantFlag = Flags.string({ summary: 'Tenant slug or id (default: the only tenant, when there is one).' });
  /** For destructive commands, with confirmOrExit: skips its question. */
  static yesFlag = Flags.boolean({ char: 'y', summary: 'Do not ask for confirmation.' });

  static override baseFlags = {
    config: Flags.string({
      helpGroup: 'GLOBAL',
      summary: 'Config file to use (default: $AGENTWS_CONFIG, else ./.agentws/config.env).',
    }),
    json: Flags.boolean({ helpGroup: 'GLOBAL', summary: 'Print exactly one JSON document on stdout.', default: false }),
  };

  /** Set false on commands that work without a config (init). */
  protected static needsConfig = true;
  /** Set false on commands that only need the config, not the database. */
  protected static needsCore = true;

  protected flags!: BaseFlags<T>;
  protected args!: BaseArgs<T>;
  protected appConfig!: Config;
  protected log_!: Logger;
  private opened?: OpenedCore;

  public override async init(): Promise<void> {
    await super.init();
    const { flags, args } = await this.parse({
      flags: this.ctor.flags,
      baseFlags: (super.ctor as typeof BaseCommand).baseFlags,
      args: this.ctor.args,
      strict: this.ctor.strict,
    });
    this.flags = flags as BaseFlags<T>;
    this.args = args as BaseArgs<T>;
    const ctor = this.constructor as typeof BaseCommand;
    if (ctor.needsConfig) this.appConfig = loadConfig({ configPath: this.flags.config });
    // Commands keep stderr readable: only warnings and errors, as JSON lines, unless serve/worker say otherwise.
    this.log_ = createLogger(process.env.AGENTWS_CLI_LOG_LEVEL ?? 'warn', 2);
  }

  /** Opens database, event bus and job queue, and builds the core. Closed automatically when the command ends. */
  protected async core(options: { supervise?: boolean } = {}): Promise<Core> {
    // The core's modules (every service, the database drivers, the job queue) load here, when a command
    // first needs them: a command that only reads the config never does.
    const { openCore } = await import('./open-core.js');
    this.opened ??= await openCore(this.appConfig, this.log_, options);
    return this.opened.core;
  }

  protected get opening(): OpenedCore | undefined {
    return this.opened;
  }

  /**
   * The context for a tenant-scoped action: the tenant named by --tenant (slug or id), or the only
   * tenant when there is exactly one.
   */
  protected async tenantCtx(ref: string | undefined): Promise<Ctx> {
    const core = await this.core();
    if (ref) return this.ctx((await core.tenants.findTenant(this.ctx(), ref)).id);
    const all = await core.tenants.listTenants(this.ctx());
    if (all.length === 1) return this.ctx(all[0].id);
    throw new ValidationError(all.length ? `there are ${all.length} tenants: name one with --tenant` : 'there are no tenants yet', {
      hint: all.length ? `Tenants: ${all.map((t) => t.slug).join(', ')}` : 'Create one with `npx aws tenant seed`.',
    });
  }

  /** The context the CLI acts in: the operator, audited as `system:cli`. */
  protected ctx(tenantId: string | null = null): Ctx {
    return systemCtx(this.log_, { name: 'cli', tenantId, channel: 'cli' });
  }

  protected get jsonMode(): boolean {
    return Boolean(this.flags?.json);
  }

  protected output(doc: unknown, human: () => void): void {
    if (this.jsonMode) printJson(doc);
    else human();
  }

  /**
   * Asks before a destructive command goes on, in a terminal only: `yes` (--yes), --json or no terminal
   * never ask (cron and scripts run as they did). A "no" (or Ctrl-C) says `declined` and exits 1.
   */
  protected async confirmOrExit(message: string, o: { yes?: boolean; declined?: string } = {}): Promise<void> {
    if (o.yes || this.jsonMode || !canPrompt()) return;
    const { confirm } = await import('@inquirer/prompts');
    const sure = await confirm({ message, default: false }, { output: process.stderr }).catch((err: Error) => {
      if (err.name === 'ExitPromptError') return false;
      throw err;
    });
    if (!sure) {
      info(o.declined ?? 'Nothing was removed.');
      this.exit(1);
    }
  }

  protected override async catch(err: Error & { exitCode?: number; oclif?: { exit?: number } }): Promise<unknown> {
    const json = this.jsonMode || process.argv.includes('--json');
    if (isAppError(err)) {
      if (json) printJson({ error: err.code, message: err.message, ...(err.hint ? { hint: err.hint } : {}), ...(err instanceof ConfigError ? { problems: err.problems } : {}) });
      process.stderr.write(`${colors.err.red('Error:')} ${err.message}\n`);
      if (err.hint) process.stderr.write(`${colors.err.dim('Hint:')} ${err.hint}\n`);
      return this.exit(1);
    }
    // Flag and argument mistakes, and this.error() calls: a clear message, exit 1 (not oclif's 2).
    if (err instanceof Errors.CLIError && !(err instanceof Errors.ExitError)) {
      if (json) printJson({ error: 'usage', message: stripAnsi(err.message) });
      process.stderr.write(`${colors.err.red('Error:')} ${stripAnsi(err.message)}\n`);
      const hint = (err as Errors.CLIError & { suggestions?: string[] }).suggestions?.join('\n');
      process.stderr.write(`${colors.err.dim('Hint:')} ${hint || `see \`npx aws ${this.id?.replaceAll(':', ' ') ?? ''} --help\``}\n`);
      return this.exit(1);
    }
    if (err instanceof Errors.ExitError) throw err;
    if ((err as { code?: string }).code === '42P01') {
      // A missing table: the code is newer than the database schema.
      if (json) printJson({ error: 'schema_outdated', message: err.message });
      process.stderr.write(`${colors.err.red('Error:')} the database schema is older than this version (${err.message})\n`);
      process.stderr.write(`${colors.err.dim('Hint:')} run \`npx aws migrate\`\n`);
      return this.exit(1);
    }
    if (json) printJson({ error: 'internal_error', message: err.message });
    process.stderr.write(`${colors.err.red('Unexpected error:')} ${err.stack ?? err.message}\n`);
    return this.exit(70);
  }

  protected override async finally(err: Error | undefined): Promise<unknown> {
    await this.opened?.close().catch(() => {});
    return super.finally(err);
  }
}

function stripAnsi(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/\u001b\[[0-9;]*m/g, '');
}
