import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RuntimeIdentity } from '../core/runtime/host/runtime-host.js';
import { RUNNER_PATHS } from '../core/runtime/host/runner-protocol.js';
import type { ControlClient } from './control-client.js';
import { endToEndHeaders } from './hop-headers.js';

/** The runtime's model calls and memory tools: passed to the control plane's gateway as they stream. */
export function relayGateway(c: ControlClient, identity: RuntimeIdentity, req: IncomingMessage, res: ServerResponse, url: URL): void {
  const headers = endToEndHeaders(req.headers);
  Object.assign(headers, c.tokenHeaders(identity));
  const up = c.client.request(new URL(`${RUNNER_PATHS.gateway}${url.pathname}${url.search}`, c.control), { method: req.method, agent: c.agent, headers });
  up.on('response', (r) => {
    res.writeHead(r.statusCode ?? 502, endToEndHeaders(r.headers));
    res.flushHeaders();
    r.pipe(res);
  });
  up.on('error', (err) => {
    if (res.headersSent) return void res.destroy();
    res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `agentws: the control plane cannot be reached: ${err.message}` } }));
  });
  res.on('close', () => up.destroy());
  req.pipe(up);
}
