import { mkdirSync, openSync, closeSync, writeSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import net from 'node:net';
import { UnavailableError } from '../kernel/errors.js';
import { isProcessAlive } from '../lib/process-state.js';

/**
 * The embedded database: PGlite (PostgreSQL in WASM) with pgvector, in AGENTWS_DATA_DIR/pglite.
 *
 * PGlite can be opened by one process only. Whichever process opens it first (normally `aws serve`) hosts
 * it behind a Unix socket in AGENTWS_DATA_DIR/run, protected by the directory's 0700 mode, and records its
 * pid in a lock file. Every other process (an admin command while serve runs) connects to that socket
 * with the ordinary pg driver, so the rest of the program never knows which mode it is in. A command run
 * while nothing hosts the database hosts it itself for its own lifetime.
 */
export const EMBEDDED_PORT = 5432;
// One shared backend session serves every connection; this only bounds how many sockets may queue on it.
const MAX_SOCKET_CONNECTIONS = 100;

export interface EmbeddedHandle {
  /** Directory holding the socket; pass as `host` to pg. */
  socketDir: string;
  /** True when this process hosts PGlite; false when it connected to another process's host. */
  hosted: boolean;
  release(): Promise<void>;
}

export function embeddedPaths(dataDir: string) {
  const runDir = join(dataDir, 'run');
  return {
    dbDir: join(dataDir, 'pglite'),
    runDir,
    socket: join(runDir, `.s.PGSQL.${EMBEDDED_PORT}`),
    lock: join(runDir, 'embedded.lock'),
  };
}

/**
 * Hosts this process already runs, by PGlite directory. PGlite must be opened once per directory: a
 * second acquire in the same process (an in-process admin command beside a running app, two cores in
 * one test) shares the host and its socket instead of opening the files again, and the host stops with
 * its last release. (The lock file names this process, which `acquire` below would otherwise read as a
 * host that died and take over: a second PGlite on the same files, and seconds of start-up each time.)
 */
const hostedHere = new Map<string, { host: Promise<EmbeddedHandle>; refs: number }>();
/** A host of this process still closing: the next acquire of its directory waits for it. */
const closingHere = new Map<string, Promise<void>>();

export async function acquireEmbedded(dataDir: string): Promise<EmbeddedHandle> {
  const key = resolve(embeddedPaths(dataDir).dbDir);
  let entry = hostedHere.get(key);
  if (!entry) {
    const closing = closingHere.get(key);
    const started = closing ? closing.catch(() => {}).then(() => acquire(dataDir)) : acquire(dataDir);
    entry = { host: started, refs: 0 };
    hostedHere.set(key, entry);
    const mine = entry;
    started.then(
      (h) => {
        // Another process hosts it: nothing is shared in this one (each connects on its own).
        if (!h.hosted && hostedHere.get(key) === mine) hostedHere.delete(key);
      },
      () => {
        if (hostedHere.get(key) === mine) hostedHere.delete(key);
      },
    );
  }
  const shared = entry;
  shared.refs++;
  let handle: EmbeddedHandle;
  try {
    handle = await shared.host;
  } catch (err) {
    shared.refs--;
    throw err;
  }
  if (!handle.hosted) return handle;
  let released = false;
  return {
    socketDir: handle.socketDir,
    hosted: true,
    async release() {
      if (released) return;
      released = true;
      if (--shared.refs > 0) return;
      if (hostedHere.get(key) === shared) hostedHere.delete(key);
      const closing = handle.release();
      closingHere.set(key, closing);
      try {
        await closing;
      } finally {
        if (closingHere.get(key) === closing) closingHere.delete(key);
      }
    },
  };
}

async function acquire(dataDir: string): Promise<EmbeddedHandle> {
  const paths = embeddedPaths(dataDir);
  mkdirSync(paths.runDir, { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(paths.lock, 'wx', 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = readOwner(paths.lock);
      if (owner !== null && owner !== process.pid && isProcessAlive(owner)) {
        await waitForSocket(paths.socket, 60_000, owner);
        return { socketDir: paths.runDir, hosted: false, release: async () => {} };
      }
      // The previous host died without cleaning up: take over its lock.
      rmSync(paths.lock, { force: true });
      continue;
    }
    writeSync(fd, String(process.pid));
    closeSync(fd);
    try {
      return await host(paths);
    } catch (err) {
      rmSync(paths.lock, { force: true });
      throw err;
    }
  }
  throw new UnavailableError(`cannot take the embedded database lock ${paths.lock}`, {
    hint: 'Another process keeps replacing it; stop other `aws` processes using this data directory.',
  });
}

interface QueuedMessage {
  handlerId: number;
  message: Uint8Array;
  onData(data: Uint8Array): void;
  resolve(bytes: number): void;
  reject(err: unknown): void;
}
interface SocketQueryQueue {
  queue: QueuedMessage[];
  processing: boolean;
  lastHandlerId: number | null;
  processQueue(): Promise<void>;
  clearQueueForHandler(handlerId: number): void;
}
interface ProtocolDb {
  isInTransaction(): boolean;
  runExclusive<T>(fn: () => Promise<T>): Promise<T>;
  execProtocolRawStream(message: Uint8Array, options: { onRawData: (data: Uint8Array) => void }): Promise<unknown>;
}

/** Extended-query messages that leave a cycle open until the client's Sync. */
const CYCLE_MESSAGES = new Set([0x50 /* Parse */, 0x42 /* Bind */, 0x44 /* Describe */, 0x45 /* Execute */, 0x43 /* Close */, 0x48 /* Flush */]);

/**
 * pglite-socket 0.2.17 runs the messages of all connections through one queue, one protocol message at
 * a time, keeping a connection's messages together only inside a transaction. Two connections sending
 * parameterised queries at once (the worker and a request) then interleave Parse/Bind on the one shared
 * session ("bind message supplies 3 parameters, but prepared statement \"\" requires 2"). This replaces
 * its queue loop with one that also keeps an extended-query cycle (Parse ... Sync) of one connection
 * together, as a real server's per-connection session would. Written against pglite-socket 0.2.17
 * (pinned); the patch checks the shape it relies on and fails loudly if a version bump changed it.
 */
function keepProtocolCyclesTogether(server: { queryQueue: SocketQueryQueue }, db: ProtocolDb): void {
  const q = server.queryQueue;
  if (!q || !Array.isArray(q.queue) || typeof q.processQueue !== 'function' || typeof q.clearQueueForHandler !== 'function') {
    throw new Error('pglite-socket internals changed: review keepProtocolCyclesTogether in src/db/embedded-host.ts');
  }
  let openCycle: number | null = null;
  const clear = q.clearQueueForHandler.bind(q);
  q.clearQueueForHandler = (handlerId) => {
    clear(handlerId);
    if (openCycle === handlerId) openCycle = null;
    void q.processQueue();
  };
  q.processQueue = async function processQueue(this: SocketQueryQueue) {
    if (this.processing || this.queue.length === 0) return;
    this.processing = true;
    try {
      while (this.queue.length > 0) {
        const owner = openCycle ?? (db.isInTransaction() ? this.lastHandlerId : null);
        let item: QueuedMessage | undefined;
        if (owner !== null) {
          const at = this.queue.findIndex((m) => m.handlerId === owner);
          // Wait for that connection's next message (enqueue runs this loop again).
          if (at === -1) break;
          item = this.queue.splice(at, 1)[0];
        } else {
          item = this.queue.shift()!;
        }
        let bytes = 0;
        try {
          await db.runExclusive(() => db.execProtocolRawStream(item.message, { onRawData: (d) => ((bytes += d.length), item.onData(d)) }));
        } catch (err) {
          openCycle = null;
          item.reject(err);
          continue;
        }
        openCycle = CYCLE_MESSAGES.has(item.message[0]) ? item.handlerId : null;
        this.lastHandlerId = item.handlerId;
        item.resolve(bytes);
      }
    } finally {
      this.processing = false;
    }
  }.bind(q);
}

async function host(paths: ReturnType<typeof embeddedPaths>): Promise<EmbeddedHandle> {
  // Loaded lazily: PGlite's WASM is large and only the hosting process needs it.
  const [{ PGlite }, { vector }, { PGLiteSocketServer }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('@electric-sql/pglite-pgvector'),
    import('@electric-sql/pglite-socket'),
  ]);
  mkdirSync(paths.dbDir, { recursive: true, mode: 0o700 });
  const db = await PGlite.create({ dataDir: paths.dbDir, extensions: { vector } });
  rmSync(paths.socket, { force: true });
  const server = new PGLiteSocketServer({ db, path: paths.socket, maxConnections: MAX_SOCKET_CONNECTIONS });
  keepProtocolCyclesTogether(server as unknown as { queryQueue: SocketQueryQueue }, db);
  await server.start();
  let released = false;
  return {
    socketDir: paths.runDir,
    hosted: true,
    async release() {
      if (released) return;
      released = true;
      await server.stop();
      await db.close();
      rmSync(paths.socket, { force: true });
      if (readOwner(paths.lock) === process.pid) rmSync(paths.lock, { force: true });
    },
  };
}

function readOwner(lock: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(lock, 'utf8').trim(), 10);
    return Number.isFinite(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** The host may still be starting (PGlite takes a few seconds on first run): wait for its socket. */
async function waitForSocket(socket: string, timeoutMs: number, owner: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (existsSync(socket) && (await canConnect(socket))) return;
    if (!isProcessAlive(owner)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new UnavailableError(`the embedded database is held by process ${owner} but its socket ${socket} does not answer`, {
    hint: `Check that process (it may be stuck); if it is gone, run the command again.`,
  });
}

function canConnect(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const conn = net.connect(socket);
    conn.once('connect', () => {
      conn.destroy();
      resolve(true);
    });
    conn.once('error', () => resolve(false));
  });
}
