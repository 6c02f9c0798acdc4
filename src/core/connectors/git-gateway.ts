import { timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AuditInput } from '../audit/audit.service.js';
import type { Logger } from '../../kernel/logger.js';
import type { RuntimeIdentity } from '../runtime/host/runtime-host.js';
import { canReach, checkPush, defaultRefOf, describeUpdates, GIT_GATEWAY_PREFIX, parseGitRequest, parseReceivePackCommands, pushOptionKey, refusedPushOptions, refusePushResponse, type GitRequest, type RefUpdate } from './git-fns.js';
import type { GitAgentView, GitHostsService } from './git-hosts.service.js';

/** One `git.fetch` audit entry per user and repository in this window (a clone is several requests). */
const FETCH_AUDIT_WINDOW_MS = 10 * 60_000;
/** A person is told once per host in this window that their agent fell back to the service credential. */
const FALLBACK_TELL_WINDOW_MS = 10 * 60_000;
/** The event on the person's session stream saying so. */
const GIT_FALLBACK_EVENT = 'git.credential_fallback';
/** A connection to the git host idle this long is dropped (a clone of a big repository is not idle). */
const IDLE_TIMEOUT_MS = 5 * 60_000;
/** What a refused push may still send (drained so git reads the refusal instead of a broken pipe). */
const MAX_DRAIN_BYTES = 64 * 1024 * 1024;
/** Headers of the agent's request the git host gets: git's own, nothing else (no cookies, no Authorization). */
const REQUEST_HEADERS = ['accept', 'accept-encoding', 'content-type', 'content-encoding', 'content-length', 'git-protocol', 'user-agent'];
/** Headers of the host's answer the agent gets. */
const RESPONSE_HEADERS = ['content-type', 'content-encoding', 'content-length', 'cache-control', 'expires', 'pragma'];

/**
 * The git gateway on the gateway host: `http://llm.agentws.internal/git/<host>/<owner>/<repo>/...`,
 * which the sandbox's git reaches for `https://<host>/<owner>/<repo>` through its git config's insteadOf.
 * For each request: the runtime's own credential (as for model calls), a host of the runtime's tenant,
 * the user's access to the repository (their roles and teams), and for a push the ref updates, read from
 * the start of the body and checked against the host's protected refs and the user's branch prefix
 * before anything is forwarded. Then git's smart HTTP goes to the host as it came, streamed both ways,
 * with the host's credential added here: it never enters the sandbox.
 */
export function createGitGateway(deps: {
  hosts: Pick<GitHostsService, 'forAgent'>;
  /** Records an audit entry of the runtime's tenant (its own transaction: the cause is the git host's). */
  record: (tenantId: string, entry: AuditInput) => Promise<void>;
  /** The session of the user's turn, when one can be told (for the audit entry, and to tell the person). */
  sessionOf?: (owner: { tenantId: string; userId: string }) => Promise<string | null>;
  /** Puts an event on a session's stream (the person watching it sees it). */
  tell?: (sessionId: string, type: string, properties: Record<string, unknown>) => Promise<void>;
  log: Logger;
}) {
  const { log } = deps;
  const fetchAudited = new Map<string, number>();
  const fallbackTold = new Map<string, number>();

  const text = (res: ServerResponse, status: number, message: string) => {
    if (res.headersSent) return void res.destroy();
    const body = `agentws git gateway: ${message}\n`;
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(Buffer.byteLength(body)) });
    res.end(body);
  };
  const audit = (identity: RuntimeIdentity, entry: Omit<AuditInput, 'userId' | 'sessionId'>) => {
    void (async () => {
      const sessionId = deps.sessionOf ? await deps.sessionOf(identity).catch(() => null) : null;
      await deps.record(identity.tenantId, { ...entry, userId: identity.userId, sessionId });
    })().catch((err) => log.error({ err: (err as Error).message }, 'could not audit a git request'));
  };

  /**
   * The person's own connection could not be used (its refresh failed) and the service credential stands
   * in: said on their session's stream and in the audit, once per host in a window (a clone is several
   * requests, and an agent may retry in a loop).
   */
  function fellBack(identity: RuntimeIdentity, host: string, reason: string) {
    const key = `${identity.userId}:${host}`;
    const now = Date.now();
    if ((fallbackTold.get(key) ?? 0) > now - FALLBACK_TELL_WINDOW_MS) return;
    fallbackTold.set(key, now);
    if (fallbackTold.size > 10_000) fallbackTold.clear();
    void (async () => {
      const sessionId = deps.sessionOf ? await deps.sessionOf(identity).catch(() => null) : null;
      await deps.record(identity.tenantId, { action: 'git.credential_fallback', target: `git_host:${host}`, userId: identity.userId, sessionId, details: { host, as: 'service', reason } });
      if (sessionId && deps.tell) {
        const message = `${reason.charAt(0).toUpperCase()}${reason.slice(1)}, so your agent's git requests to ${host} go as the organisation's service account instead. Connect your account again in the dashboard (Connections).`;
        await deps.tell(sessionId, GIT_FALLBACK_EVENT, { host, as: 'service', reason, message });
      }
    })().catch((err) => log.error({ err: (err as Error).message }, 'could not tell of a git credential fallback'));
  }

  function upstreamRequest(view: GitAgentView, gr: GitRequest, method: string, headers: Record<string, string>, service: string = gr.service) {
    const suffix = gr.kind === 'refs' || service !== gr.service ? `info/refs?service=${service}` : service;
    const target = new URL(`${view.host.baseUrl}/${gr.upstreamPath}/${suffix}`);
    const options = { method, headers: { ...headers, authorization: view.authorization }, timeout: IDLE_TIMEOUT_MS };
    const r = target.protocol === 'https:' ? https.request(target, options) : http.request(target, options);
    r.on('timeout', () => r.destroy(new Error('the git host stopped answering')));
    return r;
  }

  /** The host's default branch (its HEAD), from its upload-pack advertisement; null when it does not say. */
  function defaultRef(view: GitAgentView, gr: GitRequest): Promise<string | null> {
    return new Promise((resolve) => {
      const r = upstreamRequest(view, gr, 'GET', { 'user-agent': 'git/agentws-gateway' }, 'git-upload-pack');
      r.on('response', (up) => {
        if (up.statusCode !== 200) {
          up.resume();
          return resolve(null);
        }
        const chunks: Buffer[] = [];
        let size = 0;
        up.on('data', (c: Buffer) => {
          chunks.push(c);
          size += c.length;
          // The symref is among the first ref's capabilities (after a NUL, up to its newline): the rest of
          // a big advertisement is not read.
          const all = Buffer.concat(chunks);
          const nul = all.indexOf(0);
          if (size > 64 * 1024 || (nul >= 0 && all.indexOf(0x0a, nul) >= 0)) {
            resolve(defaultRefOf(all));
            up.destroy();
          }
        });
        up.on('end', () => resolve(defaultRefOf(Buffer.concat(chunks))));
        up.on('error', () => resolve(defaultRefOf(Buffer.concat(chunks))));
      });
      r.on('error', () => resolve(null));
      r.end();
    });
  }

  /** Sends the request (`head`, already read, then the rest of the body) to the host and streams the answer back. */
  function forward(view: GitAgentView, gr: GitRequest, req: IncomingMessage, res: ServerResponse, body: { head: Buffer; ended: boolean } | null, done?: (status: number) => void) {
    const headers: Record<string, string> = {};
    for (const h of REQUEST_HEADERS) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    if (!headers['content-length'] && req.method === 'POST') headers['transfer-encoding'] = 'chunked';
    const upstream = upstreamRequest(view, gr, req.method ?? 'GET', headers);
    upstream.on('response', (up) => {
      const status = up.statusCode ?? 502;
      done?.(status);
      // The host refusing our credential is not the agent's to answer with credentials of its own (a 401
      // would have git look for some): it is the operator's problem, said as such.
      if (status === 401 || status === 403) {
        up.resume();
        return text(
          res,
          502,
          view.as.kind === 'user'
            ? `${view.host.name} refused your account's token (HTTP ${status}): connect it again in the dashboard (Connections), or ask for access to this repository there`
            : `${view.host.name} refused the service credential (HTTP ${status}); ask an admin to check it (aws connector git update ${view.host.name})`,
        );
      }
      if (status >= 300 && status < 400) {
        up.resume();
        return text(res, 502, `${view.host.name} answered with a redirect (HTTP ${status}); check its base URL`);
      }
      const back: Record<string, string> = {};
      for (const h of RESPONSE_HEADERS) {
        const v = up.headers[h];
        if (typeof v === 'string') back[h] = v;
      }
      res.writeHead(status, back);
      up.pipe(res);
      up.on('error', () => res.destroy());
    });
    upstream.on('error', (err) => text(res, 502, `${view.host.name} failed: ${err.message}`));
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (body) {
      upstream.write(body.head);
      if (body.ended) upstream.end();
      else req.pipe(upstream);
    } else if (req.method === 'POST') req.pipe(upstream);
    else {
      req.resume();
      upstream.end();
    }
  }

  /** Reads the start of a push up to its flush: the ref updates, parsed. The rest stays in the request. */
  function readCommands(req: IncomingMessage): Promise<{ head: Buffer; ended: boolean; parse: ReturnType<typeof parseReceivePackCommands> }> {
    return new Promise((resolve) => {
      let head = Buffer.alloc(0);
      let settled = false;
      const finish = (ended: boolean) => {
        if (settled) return;
        settled = true;
        req.pause();
        req.off('data', onData);
        req.off('end', onEnd);
        resolve({ head, ended, parse: parseReceivePackCommands(head) });
      };
      const onData = (c: Buffer) => {
        head = Buffer.concat([head, c]);
        if (parseReceivePackCommands(head).state !== 'more') finish(false);
      };
      const onEnd = () => finish(true);
      req.on('data', onData);
      req.on('end', onEnd);
      req.on('error', () => finish(true));
    });
  }

  /** Answers a refused push in git's protocol, after taking in what the client still sends. */
  function refusePush(req: IncomingMessage, res: ServerResponse, ended: boolean, commands: RefUpdate[], refused: Array<{ ref: string; reason: string }>, capabilities: string[], hint = '') {
    const answer = refusePushResponse(commands, refused, capabilities, `${refused.map((r) => `${r.ref}: ${r.reason}`).join('; ')}${hint}`);
    const send = () => {
      if (res.headersSent) return;
      res.writeHead(200, { 'content-type': 'application/x-git-receive-pack-result', 'cache-control': 'no-cache', 'content-length': String(answer.length) });
      res.end(answer);
    };
    // The body may have ended meanwhile (its 'end' came while nobody listened): nothing left to take in.
    if (ended || req.readableEnded) return send();
    let drained = 0;
    req.on('data', (c: Buffer) => {
      drained += c.length;
      if (drained > MAX_DRAIN_BYTES) req.destroy();
    });
    req.on('end', send);
    req.on('close', send);
    req.resume();
  }

  async function serve(identity: RuntimeIdentity, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const given = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    if (!given || !identity.credential || !sameSecret(given, identity.credential)) {
      req.resume();
      return text(res, 403, "this request does not carry the runtime's credential (git is configured for it in the sandbox's git config)");
    }
    const rest = url.pathname.slice(GIT_GATEWAY_PREFIX.length);
    const slash = rest.indexOf('/');
    const name = slash > 0 ? rest.slice(0, slash) : rest;
    const view = await deps.hosts.forAgent(identity, name);
    if (!view) {
      req.resume();
      return text(res, 404, `"${name.slice(0, 60)}" is not a git host of your organisation`);
    }
    const gr = parseGitRequest(rest.slice(slash + 1), req.method ?? 'GET', url.searchParams);
    if ('error' in gr) {
      req.resume();
      return text(res, 400, gr.error);
    }
    const target = `git:${view.host.name}/${gr.repo}`;
    if ('refused' in view) {
      req.resume();
      audit(identity, { action: 'git.denied', target, details: { service: gr.service, reason: view.refused } });
      return text(res, 403, view.refused);
    }
    const as = view.as.kind === 'user' ? `user:${view.as.account}` : 'service';
    const fallback = view.as.kind === 'service' && view.as.fallback ? { fallback: view.as.fallback } : {};
    if (!canReach(view.host.access, view.user, gr.repo)) {
      req.resume();
      audit(identity, { action: 'git.denied', target, details: { service: gr.service, reason: 'no access' } });
      return text(res, 403, `you have no access to ${gr.repo} on ${view.host.name}: ask an admin to grant your role or team (aws connector git update ${view.host.name} --access ...)`);
    }
    if (fallback.fallback) fellBack(identity, view.host.name, fallback.fallback);
    if (gr.service === 'git-upload-pack' && gr.kind === 'rpc') {
      // Per identity: a fetch as the service after one as the person (a failed refresh) is audited on its own.
      const key = `${identity.userId}:${target}:${as}`;
      const now = Date.now();
      if ((fetchAudited.get(key) ?? 0) <= now - FETCH_AUDIT_WINDOW_MS) {
        fetchAudited.set(key, now);
        if (fetchAudited.size > 10_000) fetchAudited.clear();
        audit(identity, { action: 'git.fetch', target, details: { host: view.host.name, repository: gr.repo, as, ...fallback } });
      }
    }
    if (gr.service !== 'git-receive-pack' || gr.kind !== 'rpc') return forward(view, gr, req, res, null);

    // A push: its ref updates are checked before a byte of it reaches the host.
    const encoding = req.headers['content-encoding'];
    if (encoding && encoding !== 'identity') {
      req.resume();
      return text(res, 415, `pushes with Content-Encoding ${encoding} are not accepted`);
    }
    const { head, ended, parse } = await readCommands(req);
    if (parse.state !== 'done') {
      req.resume();
      return text(res, 400, parse.state === 'error' ? parse.error : 'the push ended before its ref updates did');
    }
    const defaultBranch = view.host.protectDefault && parse.commands.length ? await defaultRef(view, gr) : null;
    const refused = checkPush(parse.commands, { protectedRefs: view.host.protectedRefs, defaultRef: defaultBranch, branchPrefix: view.host.branchPrefix, handle: view.user.handle });
    // Push options are the host's instructions (open or merge a request, skip or feed a pipeline): only
    // those the admin listed pass, and a push carrying another is refused whole, before it is forwarded.
    const options = parse.options ?? [];
    const badOptions = refusedPushOptions(options, view.host.pushOptions);
    if (badOptions.length) {
      const keys = [...new Set(badOptions.map(pushOptionKey))];
      const named = keys.slice(0, 5).map((k) => `"${k.slice(0, 100)}"`).join(', ') + (keys.length > 5 ? ` and ${keys.length - 5} more` : '');
      const reason = `push option${keys.length > 1 ? 's' : ''} ${named} not allowed on ${view.host.name}`;
      for (const c of parse.commands) if (!refused.some((r) => r.ref === c.ref)) refused.push({ ref: c.ref, reason });
    }
    const refs = describeUpdates(parse.commands);
    // Keys only: values (a ci.variable's, say) may be anything the agent chose to carry.
    const optionKeys = options.length ? { options: options.map((o) => pushOptionKey(o).slice(0, 100)) } : {};
    if (refused.length) {
      audit(identity, { action: 'git.push_refused', target, details: { host: view.host.name, repository: gr.repo, refs, refused, ...optionKeys } });
      const hint = badOptions.length ? ` (an admin allows push options: aws connector git update ${view.host.name} --push-option <key>)` : '';
      return refusePush(req, res, ended, parse.commands, refused, parse.capabilities, hint);
    }
    const started = Date.now();
    // No ref updates: git's probe before a large push (it updates nothing), not a push of its own.
    forward(view, gr, req, res, { head, ended }, (status) =>
      parse.commands.length ? audit(identity, { action: 'git.push', target, details: { host: view.host.name, repository: gr.repo, refs, ...optionKeys, as, ...fallback, status, durationMs: Date.now() - started } }) : undefined,
    );
  }

  return {
    /** Whether a gateway-host path is the git gateway's. */
    owns: (url: URL) => url.pathname.startsWith(GIT_GATEWAY_PREFIX),
    handle(identity: RuntimeIdentity, req: IncomingMessage, res: ServerResponse, url: URL): void {
      serve(identity, req, res, url).catch((err) => {
        log.error({ err: (err as Error).message }, 'git gateway failed');
        text(res, 500, 'the git gateway failed');
      });
    },
  };
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
