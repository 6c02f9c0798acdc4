import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import type { Core } from '../../../core/create-core.js';
import type { Terminal } from '../../../core/terminal/terminal.service.js';
import { ForbiddenError } from '../../../kernel/errors.js';
import type { App } from '../../app-type.js';
import { ownOrigins, websocketRefusal } from '../../csrf.js';
import { credentialOf, ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The terminal opened for this WebSocket request before its upgrade (terminal.routes.ts). */
    terminal?: Terminal;
  }
}

const Size = Type.Object(
  {
    cols: Type.Optional(Type.Integer({ minimum: 2, maximum: 1000, description: 'Columns of the terminal at open' })),
    rows: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Rows of the terminal at open' })),
  },
  { additionalProperties: false },
);
/** A control message (a binary WebSocket message, JSON): the terminal's new size. */
const RESIZE_MAX_BYTES = 256;

/**
 * The workspace terminal: one WebSocket per terminal (docs/using/workspace.md, "The terminal"). The terminal is opened
 * before the upgrade, so every refusal is an HTTP status with the usual error body (401, 403 without
 * agents.terminal or from another origin, 409/503 when the runtime cannot start); then text messages
 * are keystrokes in and output out, a binary message `{"type":"resize","cols":…,"rows":…}` resizes it,
 * and the close says why it ended (code and reason, terminal.service.ts TERMINAL_CLOSE_CODES).
 */
export async function terminalRoutes(app: App, opts: { core: Core }) {
  const { core } = opts;
  const configured = ownOrigins(core.config.server.publicUrl);

  app.get(
    '/workspace/terminal',
    {
      websocket: true,
      schema: {
        tags: ['workspace'],
        summary: 'Open a terminal in your own sandbox (WebSocket)',
        querystring: Size,
        response: errorResponses(400, 401, 403, 409, 503),
      },
      onRequest: (req, _reply, done) => {
        const credential = credentialOf(req);
        const why = websocketRefusal(req.headers, credential.bearer !== undefined ? 'bearer' : credential.cookie !== undefined ? 'cookie' : 'none', req.headers.origin ? ownOrigins(core.config.server.publicUrl, `${req.protocol}://${req.host}`) : configured);
        done(why ? new ForbiddenError(why, { code: 'origin_refused', hint: 'Open the terminal from the dashboard, or send Authorization: Bearer <token>.' }) : undefined);
      },
      preHandler: async (req: FastifyRequest) => {
        const credential = credentialOf(req);
        const q = req.query as { cols?: number; rows?: number };
        const terminal = await core.terminals.open(ctxOf(req), { recheckOf: (actor) => core.auth.recheckOf(credential, actor), cols: q.cols, rows: q.rows });
        req.terminal = terminal;
        // The connection ends (before or after its upgrade): so does the terminal.
        req.raw.socket.once('close', () => void terminal.close('client'));
      },
    },
    (socket: WebSocket, req: FastifyRequest) => {
      const terminal = req.terminal!;
      (socket as unknown as { _socket?: { setNoDelay?: (on: boolean) => void } })._socket?.setNoDelay?.(true);
      terminal.attach({
        output: (text) => socket.readyState === socket.OPEN && socket.send(text),
        closed: (code, reason, text) => {
          if (socket.readyState === socket.OPEN) socket.close(code, `${reason}: ${text}`);
        },
      });
      socket.on('message', (data, isBinary) => {
        if (!isBinary) return terminal.input(data.toString());
        const raw = data as Buffer;
        if (raw.length > RESIZE_MAX_BYTES) return;
        try {
          const m = JSON.parse(raw.toString('utf8')) as { type?: unknown; cols?: unknown; rows?: unknown };
          const ok = (n: unknown, min: number) => Number.isInteger(n) && (n as number) >= min && (n as number) <= 1000;
          if (m.type === 'resize' && ok(m.cols, 2) && ok(m.rows, 1)) void terminal.resize(m.cols as number, m.rows as number);
        } catch {
          // not a control message: ignored
        }
      });
      socket.on('close', () => void terminal.close('client'));
    },
  );
}
