import { Listr, ListrLogger, ProcessOutput, type ListrTask } from 'listr2';

/**
 * Runs tasks with listr2 progress on stderr (so stdout stays clean for --json). Without a TTY it falls
 * back to one plain line per step; with --json it is silent.
 */
export async function runTasks<C extends object>(tasks: ListrTask<C>[], options: { quiet?: boolean; ctx?: C } = {}): Promise<C> {
  const logger = new ListrLogger({ processOutput: new ProcessOutput(process.stderr, process.stderr) });
  const list = new Listr<C, 'default', 'simple'>(tasks, {
    concurrent: false,
    exitOnError: true,
    registerSignalListeners: false,
    silentRendererCondition: Boolean(options.quiet),
    // A terminal that reports no width (some PTYs) would make the live renderer wrap every character.
    fallbackRendererCondition: !process.stderr.isTTY || !process.stderr.columns || Boolean(process.env.CI),
    rendererOptions: { logger },
    fallbackRendererOptions: { logger, timestamp: undefined },
    ctx: options.ctx,
  });
  return list.run();
}
