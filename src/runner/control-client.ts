import http from 'node:http';
import https from 'node:https';
import { RUNNER_HEADERS, type RunnerInfo } from '../core/runtime/host/runner-protocol.js';
import type { RuntimeOwner } from '../core/runtime/host/runtime-host.js';

/**
 * A runner's requests to the control plane, each with its runner token (and, for a user's, the user and
 * the fence of their lease here): JSON calls, the gateway relay and the channel's dial share it.
 */
export function createControlClient(o: { controlUrl: string; token: string; info: RunnerInfo; fenceOf: (userId: string) => number }) {
  const control = new URL(o.controlUrl);
  const client = control.protocol === 'https:' ? https : http;
  const agent = new client.Agent({ keepAlive: true, maxSockets: 256 });

  const tokenHeaders = (owner?: RuntimeOwner): Record<string, string> => {
    const h: Record<string, string> = { [RUNNER_HEADERS.token]: o.token, [RUNNER_HEADERS.runner]: o.info.name };
    if (owner) {
      h[RUNNER_HEADERS.tenant] = owner.tenantId;
      h[RUNNER_HEADERS.user] = owner.userId;
      h[RUNNER_HEADERS.fence] = String(o.fenceOf(owner.userId));
    }
    return h;
  };

  /** One JSON request to the control plane. */
  function call<T>(method: string, path: string, body: unknown, owner?: RuntimeOwner): Promise<T> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
      const req = client.request(new URL(path, control), {
        method,
        agent,
        timeout: 60_000,
        headers: { ...tokenHeaders(owner), ...(data ? { 'content-type': 'application/json', 'content-length': String(data.length) } : {}) },
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any = null;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            json = { message: text.slice(0, 200) };
          }
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`the control plane answered ${res.statusCode}: ${json?.message ?? ''}`));
          else resolve(json as T);
        });
      });
      req.end(data ?? undefined);
    });
  }

  return {
    /** The control plane's address. */
    control,
    /** http or https, as the control plane's address says. */
    client,
    /** The kept-alive connections of calls and relays. */
    agent,
    tokenHeaders,
    call,
    destroy: () => agent.destroy(),
  };
}

export type ControlClient = ReturnType<typeof createControlClient>;
