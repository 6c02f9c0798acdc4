/**
 * `aws --help` without oclif: the help of the root, a topic or a command, rendered from oclif's manifest
 * (oclif.manifest.json, written by `npm run build`) by a port of @oclif/core's Help, so that it prints
 * what oclif prints, in a fraction of the start-up (loading @oclif/core and its dependencies was most of
 * the time `aws --help` took). bin/run.js asks this first; whatever it is not sure to answer exactly as
 * oclif would (a command or topic it does not know, --version, any real command, a help theme, a command
 * whose help is computed at run time) it declines, and oclif handles it as before.
 *
 * This file is all the CLI loads to print help, and it takes Node's built-ins with getBuiltinModule, not
 * `import`: importing node:fs as a module, or touching process.stdout, loads Node's streams (several ms
 * of a start-up that takes tens). It writes with fs.writeSync instead.
 */
const { existsSync, fstatSync, readFileSync, statSync, writeSync } = process.getBuiltinModule('node:fs');
const { createRequire } = process.getBuiltinModule('node:module');
const { arch, homedir, platform, release } = process.getBuiltinModule('node:os');
const { dirname, join } = process.getBuiltinModule('node:path');

interface ManifestFlag {
  name: string;
  type: 'option' | 'boolean';
  char?: string;
  summary?: string;
  description?: string;
  helpGroup?: string;
  helpLabel?: string;
  helpValue?: string | string[];
  hidden?: boolean;
  required?: boolean;
  multiple?: boolean;
  allowNo?: boolean;
  default?: unknown;
  env?: string;
  options?: string[];
  exclusive?: string[];
  dependsOn?: string[];
  combinable?: string[];
}

interface ManifestArg {
  name: string;
  description?: string;
  required?: boolean;
  hidden?: boolean;
  multiple?: boolean;
  default?: unknown;
  options?: string[];
}

interface ManifestCommand {
  id: string;
  summary?: string;
  description?: string;
  usage?: string | string[];
  examples?: Array<string | { description: string; command: string }>;
  flags: Record<string, ManifestFlag>;
  args: Record<string, ManifestArg>;
  strict?: boolean;
  hidden?: boolean;
  aliases?: string[];
  hiddenAliases?: string[];
  state?: string;
  deprecationOptions?: unknown;
  deprecateAliases?: boolean;
  hasDynamicHelp?: boolean;
}

interface Topic {
  name: string;
  description?: string;
  hidden?: boolean;
}

interface Pjson {
  name: string;
  version: string;
  description?: string;
  oclif: {
    bin: string;
    dirname?: string;
    description?: string;
    topicSeparator?: string;
    topics?: Record<string, { description?: string; hidden?: boolean; subtopics?: unknown }>;
    helpOptions?: HelpOptions;
    helpClass?: unknown;
    theme?: unknown;
    state?: string;
    flexibleTaxonomy?: boolean;
    additionalHelpFlags?: string[];
    additionalVersionFlags?: string[];
  };
}

interface HelpOptions {
  all?: boolean;
  [option: string]: unknown;
}

export interface FastHelpOptions {
  /** The package root: package.json, oclif.manifest.json and node_modules. */
  root: string;
  /** Terminal width; by default oclif's (OCLIF_COLUMNS, else the terminal's, else 80). */
  columns?: number;
  /** Bold headers and underlined flag values, as oclif prints on a colour terminal; by default oclif's rule. */
  color?: boolean;
}

/** Thrown inside the renderer when the help would differ from oclif's: the caller lets oclif answer. */
class Decline extends Error {}

const TEMPLATE = /<%[-=_]?\s*(config\.bin|command\.id)\s*[-_]?%>/g;
const LINE_FEED = /\r\n|\n/;

/**
 * The help oclif would print for `aws <argv>`, or undefined when oclif must handle `argv` itself (not a
 * help request, or one this renderer does not reproduce exactly).
 */
export function renderFastHelp(argv: string[], options: FastHelpOptions): string | undefined {
  try {
    return render(argv, options);
  } catch (err) {
    if (err instanceof Decline || err instanceof SyntaxError || (err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** bin/run.js's fast path: prints the help and says true, or says false and oclif runs as before. */
export function fastHelp(argv: string[], root: string): boolean {
  const text = renderFastHelp(argv, { root });
  if (text === undefined) return false;
  writeAll(1, Buffer.from(text));
  return true;
}

/** Every byte to fd 1, as console.log would: a full pipe is waited for, a closed one (`| head`) ends it quietly. */
function writeAll(fd: number, data: Buffer): void {
  let offset = 0;
  while (offset < data.length) {
    try {
      offset += writeSync(fd, data, offset);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        continue;
      }
      if ((err as NodeJS.ErrnoException).code === 'EPIPE') return;
      throw err;
    }
  }
}

/**
 * Whether fd is a terminal, without loading node:tty (and with it the streams, some 15 ms) when it cannot
 * be one: a file, a pipe, or /dev/null (a character device, as terminals are).
 */
function isTty(fd: 1 | 2): boolean {
  try {
    const stat = fstatSync(fd);
    if (!stat.isCharacterDevice() || stat.rdev === statSync('/dev/null').rdev) return false;
  } catch {
    return false;
  }
  return fd === 1 ? Boolean(process.stdout.isTTY) : Boolean(process.stderr.isTTY);
}

function render(argv: string[], options: FastHelpOptions): string {
  const pjson = JSON.parse(readFileSync(join(options.root, 'package.json'), 'utf8')) as Pjson;
  const oclif = pjson.oclif;
  if (!oclif || (oclif.topicSeparator ?? ':') !== ' ' || oclif.flexibleTaxonomy || oclif.helpClass || oclif.state) throw new Decline();
  if ([...new Set(['--version', ...(oclif.additionalVersionFlags ?? [])])].includes(argv[0])) throw new Decline();
  // A user's help theme (oclif reads it at every start) colours what this does not.
  const configDir = process.env.AWS_CONFIG_DIR || join(process.env.XDG_CONFIG_HOME || join(homedir(), '.config'), oclif.dirname ?? pjson.name);
  if (oclif.theme || existsSync(join(configDir, 'theme.json'))) throw new Decline();

  const cli = loadCli(options.root, pjson);
  const help = new Help(cli, {
    maxWidth: options.columns ?? termWidth(),
    color: options.color ?? colorWanted(),
  });

  // As oclif's main: --version first (declined above), then the help flags, then a topic named alone.
  if (wantsHelp(argv, cli.helpFlags)) return help.showHelp(argv, oclif.helpOptions ?? {});
  if (argv[0]?.includes(':')) throw new Decline();
  const [id, ...rest] = standardizeIdFromArgv(argv, cli);
  if (id === 'help' && cli.commands.get('help')?.pluginName === '@oclif/plugin-help') {
    // The help plugin's command: `aws help [COMMAND...]`, nested commands only with its -n.
    if (rest.some((a) => a.startsWith('-'))) throw new Decline();
    return help.showHelp(rest, { all: false });
  }
  if (cli.commands.has(id)) throw new Decline();
  if (cli.topics.has(id)) return help.showHelp([id], oclif.helpOptions ?? {});
  throw new Decline();
}

function wantsHelp(argv: string[], helpFlags: string[]): boolean {
  if (argv.length === 0) return true;
  for (const arg of argv) {
    if (helpFlags.includes(arg)) return true;
    if (arg === '--') return false;
  }
  return false;
}

interface Cli {
  pjson: Pjson;
  bin: string;
  userAgent: string;
  helpFlags: string[];
  /** Every command, this package's then the help plugin's, as oclif lists them. */
  commands: Map<string, ManifestCommand & { pluginName?: string }>;
  /** oclif's topics: the declared ones, then every prefix of a command id (commands included). */
  topics: Map<string, Topic>;
}

function loadCli(root: string, pjson: Pjson): Cli {
  const manifest = JSON.parse(readFileSync(join(root, 'oclif.manifest.json'), 'utf8')) as { version: string; commands: Record<string, ManifestCommand> };
  // oclif reads a manifest of another version as stale.
  if (manifest.version !== pjson.version) throw new Decline();
  const commands = new Map<string, ManifestCommand & { pluginName?: string }>();
  const plugins: Array<Array<ManifestCommand & { pluginName?: string }>> = [Object.values(manifest.commands)];
  for (const plugin of (pjson.oclif as { plugins?: string[] }).plugins ?? []) {
    // Only the help plugin is known here: another one could add hooks or commands this cannot reproduce.
    if (plugin !== '@oclif/plugin-help') throw new Decline();
    // Where npm puts it, else wherever Node's resolution finds it (its package exports lib/index.js).
    let manifestPath = join(root, 'node_modules', plugin, 'oclif.manifest.json');
    if (!existsSync(manifestPath)) manifestPath = join(dirname(dirname(createRequire(join(root, 'package.json')).resolve(plugin))), 'oclif.manifest.json');
    const pluginManifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { commands: Record<string, ManifestCommand> };
    plugins.push(Object.values(pluginManifest.commands).map((c) => ({ ...c, pluginName: plugin })));
  }
  const topics = new Map<string, Topic>();
  const declared = pjson.oclif.topics ?? {};
  for (const [name, t] of Object.entries(declared)) {
    if (t.subtopics) throw new Decline();
    topics.set(name, { name, description: t.description, hidden: t.hidden });
  }
  for (const list of plugins) {
    for (const c of list) if (!commands.has(c.id)) commands.set(c.id, c);
    for (const c of list.filter((c) => !c.hidden)) {
      const parts = c.id.split(':');
      while (parts.length > 0) {
        const name = parts.join(':');
        if (name && !topics.has(name)) topics.set(name, { name, description: c.summary || c.description });
        parts.pop();
      }
    }
  }
  const os = platform() === 'linux' && release().toLowerCase().includes('microsoft') ? 'wsl' : platform();
  const cpu = arch() === 'ia32' ? 'x86' : arch();
  return {
    pjson,
    bin: pjson.oclif.bin,
    userAgent: `${pjson.name}/${pjson.version} ${os}-${cpu} node-${process.version}`,
    helpFlags: [...new Set([...(pjson.oclif.additionalHelpFlags ?? []), '--help'])],
    commands,
    topics,
  };
}

/** oclif's reading of a spaced command id out of argv (`user sign-in-link x` -> `user:sign-in-link`, `x`). */
function standardizeIdFromArgv(argv: string[], cli: Cli): string[] {
  if (argv.length <= 1) return argv;
  const ids = new Set([...cli.commands.keys()].flatMap((id) => id.split(':').map((_, i, a) => a.slice(0, i + 1).join(':'))));
  const final: string[] = [];
  const finalize = (s?: string) => (s ? [...final, s] : final).filter(Boolean).join(':');
  const hasArgs = () => {
    const id = finalize();
    if (!id) return false;
    const cmd = cli.commands.get(id);
    return Boolean(cmd && (cmd.strict === false || Object.keys(cmd.args ?? {}).length > 0));
  };
  for (const arg of argv) {
    if (ids.has(finalize(arg))) final.push(arg);
    else if (arg.includes('=') || arg.startsWith('-') || hasArgs()) break;
    else final.push(arg);
  }
  const id = finalize();
  return id ? [id, ...argv.slice(id.split(':').length)] : argv;
}

function termWidth(): number {
  const columns = Number.parseInt(process.env.OCLIF_COLUMNS ?? '', 10);
  if (columns) return columns;
  if (!isTty(1)) return 80;
  const width = process.stdout.getWindowSize()[0];
  if (width < 1) return 80;
  return Math.max(width, 40);
}

/** oclif colours when both supports-color (for stdout and stderr) and ansis say so; this is their common ground. */
function colorWanted(): boolean {
  const argv = process.argv;
  if (['--no-color', '--no-colors', '--color=false', '--color=never'].some((f) => argv.includes(f))) return false;
  if ('NO_COLOR' in process.env || process.env.TERM === 'dumb') return false;
  const force = process.env.FORCE_COLOR;
  if (force !== undefined) return force !== '0' && force !== 'false';
  return isTty(1) && isTty(2) && Boolean(process.stdout.hasColors?.());
}

const stripAnsi = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, '');
/** Columns a string takes: the help is ASCII but for a few one-column symbols (and colour codes, none wide). */
const width = (s: string) => (/[^\x20-\x7e]/.test(s) ? [...stripAnsi(s)].length : s.length);
const compact = <T>(a: Array<T | undefined | null | false | ''>): T[] => a.filter(Boolean) as T[];

/** JavaScript's comparison as oclif's sortBy does it (arrays element by element, undefined as 0). */
function compare(a: unknown, b: unknown): number {
  a = a === undefined ? 0 : a;
  b = b === undefined ? 0 : b;
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length === 0 && b.length === 0) return 0;
    const diff = compare(a[0], b[0]);
    return diff !== 0 ? diff : compare(a.slice(1), b.slice(1));
  }
  if ((a as string) < (b as string)) return -1;
  if ((a as string) > (b as string)) return 1;
  return 0;
}
const sortBy = <T>(arr: T[], fn: (t: T) => unknown) => arr.sort((a, b) => compare(fn(a), fn(b)));
/** The same order for string keys, without compare's generality (the root help sorts every command). */
const sortByName = <T>(arr: T[], fn: (t: T) => string) => arr.sort((a, b) => (fn(a) < fn(b) ? -1 : fn(a) > fn(b) ? 1 : 0));

/** indent-string: every line that is not blank. */
const indent = (body: string, spacing = 2) => body.replace(/^(?!\s*$)/gm, ' '.repeat(spacing));

/** wrap-ansi 7 with { hard: true } (trimming, word wrap), as oclif calls it; the help holds no colour where it wraps. */
function wrapAnsi(text: string, columns: number): string {
  return (/[^\x00-\x7f]/.test(text) ? text.normalize() : text)
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => wrapLine(line, columns))
    .join('\n');
}

function wrapLine(line: string, columns: number): string {
  if (line.trim() === '') return '';
  const words = line.split(' ');
  const lengths = words.map(width);
  let rows = [''];
  // The width of the last row, kept as it grows rather than measured again for each word.
  let rowLength = 0;
  for (const [index, word] of words.entries()) {
    const row = rows[rows.length - 1];
    if (row.startsWith(' ')) {
      rows[rows.length - 1] = row.trimStart();
      rowLength = width(rows[rows.length - 1]);
    }
    if (index !== 0 && rowLength > 0) {
      rows[rows.length - 1] += ' ';
      rowLength++;
    }
    if (lengths[index] > columns) {
      const remaining = columns - rowLength;
      const breaksStartingThisLine = 1 + Math.floor((lengths[index] - remaining - 1) / columns);
      const breaksStartingNextLine = Math.floor((lengths[index] - 1) / columns);
      if (breaksStartingNextLine < breaksStartingThisLine) rows.push('');
      wrapWord(rows, word, columns);
      rowLength = width(rows[rows.length - 1]);
      continue;
    }
    if (rowLength + lengths[index] > columns && rowLength > 0 && lengths[index] > 0) {
      rows.push('');
      rowLength = 0;
    }
    rows[rows.length - 1] += word;
    rowLength += lengths[index];
  }
  rows = rows.map(trimSpacesRight);
  return rows.join('\n');
}

function wrapWord(rows: string[], word: string, columns: number): void {
  const characters = [...word];
  let visible = width(rows[rows.length - 1]);
  for (const [index, character] of characters.entries()) {
    if (visible + 1 <= columns) rows[rows.length - 1] += character;
    else {
      rows.push(character);
      visible = 0;
    }
    visible += 1;
    if (visible === columns && index < characters.length - 1) {
      rows.push('');
      visible = 0;
    }
  }
  if (!visible && rows[rows.length - 1].length > 0 && rows.length > 1) rows[rows.length - 2] += rows.pop();
}

function trimSpacesRight(s: string): string {
  const words = s.split(' ');
  let last = words.length;
  while (last > 0 && width(words[last - 1]) === 0) last--;
  return last === words.length ? s : words.slice(0, last).join(' ') + words.slice(last).join('');
}

interface Style {
  maxWidth: number;
  color: boolean;
}

/** A port of @oclif/core's HelpFormatter, Help, RootHelp, CommandHelp and DocOpts, for what the manifest holds. */
class Help {
  private readonly indentSpacing = 2;
  private readonly lines: string[] = [];
  private opts: HelpOptions = {};
  private command?: ManifestCommand;

  constructor(
    private readonly cli: Cli,
    private readonly style: Style,
  ) {}

  showHelp(argv: string[], opts: HelpOptions): string {
    for (const key of Object.keys(opts)) if (key !== 'all') throw new Decline();
    this.opts = opts;
    argv = argv.filter((a) => !this.cli.helpFlags.includes(a));
    argv = standardizeIdFromArgv(argv, this.cli);
    const subject = helpSubject(argv, this.cli.helpFlags);
    if (!subject) this.showRootHelp();
    else if (this.cli.commands.has(subject)) this.showCommandHelp(this.cli.commands.get(subject)!);
    else if (this.cli.topics.has(subject)) this.showTopicHelp(this.cli.topics.get(subject)!);
    else throw new Decline(); // oclif's "Command … not found."
    return this.lines.map((l) => l + '\n').join('');
  }

  private log(text: string): void {
    this.lines.push(text);
  }

  private renderTemplate(text: string): string {
    if (text.includes('<%') && text.replace(TEMPLATE, '').includes('<%')) throw new Decline();
    return text.replace(TEMPLATE, (_, name: string) => (name === 'config.bin' ? this.cli.bin : (this.command?.id ?? '')));
  }

  private wrap(body: string, spacing = this.indentSpacing): string {
    return wrapAnsi(this.renderTemplate(body), this.style.maxWidth - spacing);
  }

  private bold(text: string): string {
    return this.style.color ? `\u001b[1m${text}\u001b[22m` : text;
  }

  private underline(text: string): string {
    return this.style.color ? `\u001b[4m${text}\u001b[24m` : text;
  }

  private renderList(input: Array<[string, string | undefined]>, indentation: number): string {
    if (input.length === 0) return '';
    const multiline = () => {
      let output = '';
      for (const [left, right] of input) {
        if (!left && !right) continue;
        if (left) output += this.wrap(left.trim(), indentation);
        if (right) output += '\n' + indent(this.wrap(right.trim(), indentation + 2), 4);
        output += '\n\n';
      }
      return output.trim();
    };
    const maxLength = Math.max(0, ...input.flatMap(([left]) => left.split('\n').map(width)));
    let output = '';
    let cur = '';
    for (const [left, r] of input) {
      if (cur) output += '\n' + cur;
      cur = left || '';
      if (!r) {
        cur = cur.trim();
        continue;
      }
      const [first, ...lines] = this.wrap(r.trim(), indentation + maxLength + 2)
        .split('\n')
        .map((s) => s.trim());
      cur += ' '.repeat(maxLength - width(cur) + 2) + first;
      if (lines.length === 0) continue;
      if (lines.length > 4) return multiline();
      cur += '\n' + indent(lines.join('\n'), maxLength + 2);
    }
    if (cur) output += '\n' + cur;
    return output.trim();
  }

  private section(header: string, body: string | Array<[string, string | undefined]>): string {
    const text =
      typeof body === 'string'
        ? this.renderTemplate(body)
        : this.renderList(
            body.map(([l, r]) => [this.renderTemplate(l), r && this.renderTemplate(r)]),
            2,
          );
    return [this.bold(header), indent(text)].join('\n');
  }

  private get sortedCommands(): ManifestCommand[] {
    const commands = [...this.cli.commands.values()].filter((c) => this.opts.all || !c.hidden);
    // oclif also drops repeated ids here; these come from a Map, one each.
    return sortByName(commands, (c) => c.id);
  }

  private get sortedTopics(): Topic[] {
    const all = [...this.cli.topics.values()];
    // Topics with children only (oclif's list also holds every command): those whose name and a colon occur
    // in another topic's name, anywhere in it, as oclif checks.
    const parents = new Set<string>();
    for (const { name } of all) {
      for (let colon = name.indexOf(':'); colon !== -1; colon = name.indexOf(':', colon + 1)) {
        for (let start = 0; start < colon; start++) parents.add(name.slice(start, colon));
      }
    }
    const topics = all.filter((t) => parents.has(t.name)).filter((t) => this.opts.all || !t.hidden);
    return sortByName(topics, (t) => t.name);
  }

  private summary(c: ManifestCommand): string | undefined {
    if (c.summary) return this.renderTemplate(c.summary.split('\n', 1)[0]);
    return c.description && this.renderTemplate(c.description).split('\n', 1)[0];
  }

  private showRootHelp(): void {
    let rootTopics = this.sortedTopics;
    let rootCommands = this.sortedCommands;
    this.log(this.formatRoot());
    this.log('');
    if (!this.opts.all) {
      rootTopics = rootTopics.filter((t) => !t.name.includes(':'));
      rootCommands = rootCommands.filter((c) => !c.id.includes(':'));
    }
    if (rootTopics.length > 0) {
      this.log(this.formatTopics(rootTopics));
      this.log('');
    }
    rootCommands = rootCommands.filter((c) => c.id);
    if (rootCommands.length > 0) {
      this.log(this.formatCommands(rootCommands));
      this.log('');
    }
  }

  private formatRoot(): string {
    const all = this.renderTemplate(this.cli.pjson.oclif.description || this.cli.pjson.description || '');
    const rest = all.split('\n').slice(1).join('\n');
    return compact([
      all.split('\n', 1)[0],
      this.section('VERSION', this.wrap(this.cli.userAgent)),
      this.section('USAGE', this.wrap(`$ ${this.cli.bin} [COMMAND]`)),
      rest && this.section('DESCRIPTION', this.wrap(rest)),
    ]).join('\n\n');
  }

  private showTopicHelp(topic: Topic): void {
    const depth = topic.name.split(':').length;
    const subTopics = this.sortedTopics.filter((t) => t.name.startsWith(topic.name + ':') && t.name.split(':').length === depth + 1);
    const commands = this.sortedCommands.filter((c) => c.id.startsWith(topic.name + ':') && c.id.split(':').length === depth + 1);
    this.log(this.formatTopic(topic));
    if (subTopics.length > 0) {
      this.log(this.formatTopics(subTopics));
      this.log('');
    }
    if (commands.length > 0) {
      this.log(this.formatCommands(commands));
      this.log('');
    }
  }

  private formatTopic(topic: Topic): string {
    const description = this.renderTemplate(topic.description || '');
    const summary = description.split('\n', 1)[0];
    const rest = description.split('\n').slice(1).join('\n');
    return (
      compact([
        summary,
        this.section('USAGE', `$ ${this.cli.bin} ${topic.name.replaceAll(':', ' ')} COMMAND`),
        rest && this.section('DESCRIPTION', this.wrap(rest)),
      ]).join('\n\n') + '\n'
    );
  }

  private formatTopics(topics: Topic[]): string {
    const body = this.renderList(
      topics.map((t) => [t.name.replaceAll(':', ' '), t.description && this.renderTemplate(t.description.split('\n', 1)[0])]),
      2,
    );
    return this.section('TOPICS', body);
  }

  private formatCommands(commands: ManifestCommand[]): string {
    if (commands.length === 0) return '';
    const body = this.renderList(
      commands.map((c) => {
        const summary = this.summary(c);
        return [c.id.replaceAll(':', ' '), summary && stripAnsi(summary)];
      }),
      2,
    );
    return this.section('COMMANDS', body);
  }

  private showCommandHelp(command: ManifestCommand): void {
    // Defaults computed when the command loads, deprecations and aliases: oclif's own business.
    if (command.hasDynamicHelp || command.state || command.deprecationOptions || command.aliases?.length || command.hiddenAliases?.length) throw new Decline();
    const name = command.id;
    const depth = name.split(':').length;
    const subTopics = this.sortedTopics.filter((t) => t.name.startsWith(name + ':') && t.name.split(':').length === depth + 1);
    const subCommands = this.sortedCommands.filter((c) => c.id.startsWith(name + ':') && c.id.split(':').length === depth + 1);
    const summary = this.summary(command);
    if (summary) this.log(summary + '\n');
    this.command = { ...command, id: command.id.replaceAll(':', ' ') };
    this.log(this.generate(this.command));
    this.log('');
    if (subTopics.length > 0) {
      this.log(this.formatTopics(subTopics));
      this.log('');
    }
    if (subCommands.length > 0) {
      this.log(this.formatCommands(subCommands));
      this.log('');
    }
  }

  private generate(cmd: ManifestCommand): string {
    const unsorted = Object.entries(cmd.flags ?? {})
      .filter(([, f]) => !f.hidden)
      .map(([name, f]) => ({ ...f, name }));
    for (const f of unsorted) if (f.helpLabel || f.env) throw new Decline();
    const flags = sortBy(unsorted, (f) => [!f.char, f.char, f.name]);
    const args = Object.values(cmd.args ?? {}).filter((a) => !a.hidden);
    const flagSections = (): string => {
      const main: ManifestFlag[] = [];
      const groups = new Map<string, ManifestFlag[]>();
      for (const f of flags) {
        if (f.helpGroup) groups.set(f.helpGroup, [...(groups.get(f.helpGroup) ?? []), f]);
        else main.push(f);
      }
      const sections: string[] = [];
      const mainBody = this.flags(main);
      if (mainBody) sections.push(this.section('FLAGS', mainBody));
      for (const [group, groupFlags] of groups) {
        const body = this.flags(groupFlags);
        if (body) sections.push(this.section(`${group.toUpperCase()} FLAGS`, body));
      }
      return sections.join('\n\n');
    };
    const argsBody = this.args(cmd, args);
    const description = this.description(cmd);
    const examples = this.examples(cmd.examples);
    const flagDescriptions = this.flagsDescriptions(flags);
    return compact([
      this.section('USAGE', this.usage(cmd)),
      argsBody && this.section('ARGUMENTS', argsBody),
      flagSections(),
      description && this.section('DESCRIPTION', description),
      examples && this.section('EXAMPLES', examples),
      flagDescriptions && this.section('FLAG DESCRIPTIONS', flagDescriptions),
    ]).join('\n\n');
  }

  private args(cmd: ManifestCommand, args: ManifestArg[]): Array<[string, string | undefined]> | undefined {
    if (args.filter((a) => a.description).length === 0) return undefined;
    return args.map((a) => {
      const suffix = a.multiple || cmd.strict === false ? '...' : '';
      let name = `${a.name.toUpperCase()}${suffix}`;
      name = a.required ? name : `[${name}]`;
      let description = a.description || '';
      if (a.default) description = `[default: ${a.default}] ${description}`;
      if (a.options) description = `(${a.options.join('|')}) ${description}`;
      return [name, description || undefined];
    });
  }

  private usage(cmd: ManifestCommand): string {
    const id = cmd.id;
    const usages = cmd.usage ? (Array.isArray(cmd.usage) ? cmd.usage : [cmd.usage]) : [docopts(cmd)];
    return usages
      .map((u) => {
        const allowedSpacing = this.style.maxWidth - this.indentSpacing;
        const rest = u
          .replace('<%= command.id %>', '')
          .replace(new RegExp(`^${id.replaceAll(' ', ':')}`), '')
          .replace(new RegExp(`^${id}`), '')
          .trim();
        // oclif measures the line with the template still in it.
        const line = `$ ${this.cli.bin} <%= command.id %> ${rest}`.trim();
        if (line.length > allowedSpacing) {
          const splitIndex = line.slice(0, Math.max(0, allowedSpacing)).lastIndexOf(' ');
          return line.slice(0, Math.max(0, splitIndex)) + '\n' + indent(this.wrap(line.slice(Math.max(0, splitIndex)), this.indentSpacing * 2));
        }
        return this.wrap(line);
      })
      .join('\n');
  }

  private description(cmd: ManifestCommand): string | undefined {
    if (!cmd.description) return undefined;
    const lines = cmd.summary ? [...`${cmd.summary}\n`.split(LINE_FEED), ...cmd.description.split(LINE_FEED)] : cmd.description.split(LINE_FEED);
    return this.wrap(lines.join('\n'));
  }

  private formatIfCommand(example: string): string {
    example = this.renderTemplate(example);
    if (example.startsWith(this.cli.bin)) return `$ ${example}`;
    if (example.startsWith(`$ ${this.cli.bin}`)) return `$${example.replace('$', '')}`;
    return example;
  }

  private isCommand(example: string): boolean {
    return stripAnsi(this.formatIfCommand(example)).startsWith(`$ ${this.cli.bin}`);
  }

  private examples(examples: ManifestCommand['examples']): string | undefined {
    if (!examples || (Array.isArray(examples) && examples.length === 0)) return undefined;
    const list = Array.isArray(examples) ? examples : [examples];
    return list
      .map((a) => {
        let description: string;
        let commands: string[];
        if (typeof a === 'string') {
          const lines = a.split(LINE_FEED).filter(Boolean);
          if (lines.length >= 2 && !this.isCommand(lines[0]) && lines.slice(1).every((l) => this.isCommand(l))) {
            description = lines[0];
            commands = lines.slice(1);
          } else {
            return lines.map((l) => this.formatIfCommand(l)).join('\n');
          }
        } else {
          description = a.description;
          commands = [a.command];
        }
        const spacing = this.indentSpacing * 2;
        const multiline = commands.map((c) => indent(this.wrap(this.formatIfCommand(c), spacing + 4)).split(LINE_FEED).join(' \\\n  ')).join('\n');
        return `${this.wrap(description, spacing)}\n\n${multiline}`;
      })
      .join('\n\n');
  }

  private flagLabel(flag: ManifestFlag, showOptions = false): string {
    let label = [flag.char ? `-${flag.char[0]}` : '  ', flag.type === 'boolean' && flag.allowNo ? `--[no-]${flag.name.trim()}` : `--${flag.name.trim()}`].join(
      flag.char ? ', ' : '  ',
    );
    if (flag.type === 'option') {
      let value = usageType(flag, showOptions);
      if (!value.includes('|')) value = this.underline(value);
      label += `=${value}`;
    }
    return label;
  }

  private flags(flags: ManifestFlag[]): Array<[string, string | undefined]> | undefined {
    if (flags.length === 0) return undefined;
    const noChar = flags.every((f) => f.char === undefined);
    return flags.map((flag) => {
      let left = this.flagLabel(flag);
      if (noChar) left = left.replace(' '.repeat(4), '');
      let right = flag.summary || flag.description || '';
      const metadata: string[] = [];
      if (flag.type === 'option') {
        if (flag.default) metadata.push(`default: ${flag.default}`);
      }
      if (metadata.length > 0) right = `[${metadata.join(', ')}] ${right}`;
      if (flag.required) right = `(required) ${right}`;
      if (flag.type === 'option' && flag.options && !flag.helpValue) right += `\n<options: ${flag.options.join('|')}>`;
      return [left, right.trim()];
    });
  }

  private flagsDescriptions(flags: ManifestFlag[]): string | undefined {
    const extended = flags.filter((f) => f.summary && f.description);
    if (extended.length === 0) return undefined;
    return extended
      .map((flag) => {
        const summary = flag.summary || '';
        let label = this.flagLabel(flag, true);
        if (!flag.char) label = label.replace(' '.repeat(4), '');
        // oclif compares the length with the colour codes in it.
        label += label.length + summary.length + 2 < this.style.maxWidth ? '  ' + summary : '\n\n' + indent(this.wrap(summary, this.indentSpacing * 2));
        return `${label}\n\n${indent(this.wrap(flag.description || '', this.indentSpacing * 2))}`;
      })
      .join('\n\n');
  }
}

function helpSubject(argv: string[], helpFlags: string[]): string | undefined {
  for (const arg of argv) {
    if (arg === '--') return undefined;
    if (helpFlags.includes(arg) || arg === 'help') continue;
    if (arg.startsWith('-')) return undefined;
    return arg;
  }
  return undefined;
}

function usageType(flag: ManifestFlag, showOptions: boolean): string {
  if (flag.type !== 'option') return '';
  let values: string[];
  if (flag.helpValue) values = typeof flag.helpValue === 'string' ? [flag.helpValue] : flag.helpValue;
  else if (flag.options) values = [showOptions ? flag.options.join('|') : '<option>'];
  else values = ['<value>'];
  return values.map((v) => `${v}${flag.multiple ? '...' : ''}`).join(' ');
}

/** oclif's DocOpts: the usage line, with required, optional, exclusive and dependent flags grouped. */
function docopts(cmd: ManifestCommand): string {
  const flagMap: Record<string, ManifestFlag> = {};
  const flagList = Object.entries(cmd.flags ?? {})
    .filter(([, f]) => !f.hidden)
    .map(([name, f]) => {
      const flag = { ...f, name };
      flagMap[name] = flag;
      return flag;
    });
  const opts = ['<%= command.id %>'];
  for (const arg of Object.values(cmd.args ?? {}).filter((a) => !a.hidden)) {
    const suffix = arg.multiple || cmd.strict === false ? '...' : '';
    opts.push(arg.required ? `${arg.name.toUpperCase()}${suffix}` : `[${arg.name.toUpperCase()}${suffix}]`);
  }
  const elements: Record<string, string> = {};
  const generate = (list: ManifestFlag[]) => {
    for (const flag of list) {
      const name = flag.char ? `-${flag.char}` : `--${flag.name}`;
      elements[flag.name] = flag.type === 'option' ? `${name} ${usageType(flag, true)}` : name;
    }
  };
  const combine = (flagName: string, names: string[], union: string) => {
    if (!flagMap[flagName]) return;
    let required = flagMap[flagName]?.required;
    if (typeof required !== 'boolean' || !required) required = names.reduce((r, n) => r || flagMap[n]?.required || false, false);
    for (const n of names) {
      elements[flagName] = `${elements[flagName] || ''}${union}${elements[n] || ''}`;
      delete elements[n];
      delete flagMap[n];
    }
    elements[flagName] = required ? `(${elements[flagName] || ''})` : `[${elements[flagName] || ''}]`;
    delete flagMap[flagName];
  };
  generate(flagList.filter((f) => f.required));
  generate(flagList.filter((f) => !f.required));
  for (const flag of flagList) {
    if (Array.isArray(flag.dependsOn)) combine(flag.name, flag.dependsOn, ' ');
    let exclusive: Set<string> | undefined;
    if (Array.isArray(flag.exclusive)) exclusive = new Set(flag.exclusive);
    if (Array.isArray(flag.combinable)) {
      const combinable = new Set(flag.combinable);
      exclusive ??= new Set();
      for (const item of flagList) if (flag !== item && !combinable.has(item.name)) exclusive.add(item.name);
    }
    if (exclusive !== undefined && exclusive.size > 0) combine(flag.name, [...exclusive], ' | ');
  }
  for (const name of Object.keys(flagMap)) {
    const flag = flagMap[name];
    if (!flag.required) elements[flag.name] = `[${elements[flag.name] || ''}]`;
  }
  opts.push(...Object.values(elements));
  return opts.join(' ');
}
