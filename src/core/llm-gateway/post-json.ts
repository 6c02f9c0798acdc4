import http from 'node:http';
import https from 'node:https';

/**
 * One POST with a JSON body to a tenant's provider, made by the service itself (embeddings, a chat
 * completion), with a bounded wait and a bounded answer. Node's http client, as the LLM gateway uses:
 * fetch refuses some ports outright (the WHATWG "bad ports"), where a self-hosted model server may well
 * listen. No retries here: each caller decides what a failure means.
 */

/** The answer was larger than the caller allows (the request is aborted as soon as it is). */
class ResponseTooLargeError extends Error {
  constructor(
    readonly limit: number,
    /** The status the provider had answered with before the answer grew too large. */
    readonly status: number | null,
  ) {
    super(`the answer is larger than ${limit} bytes`);
    this.name = 'ResponseTooLargeError';
  }
}

export interface PostJsonOptions {
  /** The whole exchange (connecting, sending, the answer's last byte) must end within this. */
  timeoutMs: number;
  /** An answer larger than this is refused. */
  maxBytes: number;
  /** The error to fail with on an oversized answer (default: ResponseTooLargeError). */
  tooLarge?: (limit: number, status: number | null) => Error;
}

export interface PostJsonAnswer {
  status: number;
  /** The answer's content-type, lower-cased ('' without one). */
  contentType: string;
  text: string;
}

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/**
 * Posts `body` to `target`: resolves with the status, content-type and text of the answer, whatever the
 * status. Rejects with an error named 'TimeoutError' when the wait runs out, the `tooLarge` error on an
 * oversized answer, or the socket's error (ECONNREFUSED...) when the provider cannot be reached.
 */
export function postJson(target: URL, headers: Record<string, string>, body: string, options: PostJsonOptions): Promise<PostJsonAnswer> {
  return new Promise((resolve, reject) => {
    const lib = target.protocol === 'https:' ? https : http;
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    };
    const req = lib.request(target, {
      method: 'POST',
      headers: { ...headers, 'content-length': Buffer.byteLength(body) },
      agent: target.protocol === 'https:' ? agents.https : agents.http,
    });
    // Settled first, then destroyed: the errors the teardown raises on the request and the answer
    // ("socket hang up", "aborted") do not replace the real reason.
    const abort = (err: Error) => {
      fail(err);
      req.destroy();
    };
    const timer = setTimeout(() => abort(Object.assign(new Error('timeout'), { name: 'TimeoutError' })), options.timeoutMs);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        if (settled) return;
        size += c.length;
        if (size > options.maxBytes) abort((options.tooLarge ?? ((limit, status) => new ResponseTooLargeError(limit, status)))(options.maxBytes, res.statusCode ?? null));
        else chunks.push(c);
      });
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? '').toLowerCase(), text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(body);
  });
}

/** What a provider says went wrong, short (its error body may be HTML or long): OpenAI's and Anthropic's `error.message`, and the usual others. */
export function providerMessage(text: string): string {
  try {
    const j = JSON.parse(text);
    const m = j?.error?.message ?? j?.message ?? j?.error ?? j?.detail;
    if (typeof m === 'string' && m) return m.slice(0, 300);
  } catch {
    // not JSON
  }
  return text.replace(/\s+/g, ' ').trim().slice(0, 200) || '(empty answer)';
}
