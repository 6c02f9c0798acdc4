import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import { AppError } from '../kernel/errors.js';

/** The JSON body of an order from the control plane ({} when empty). */
export const readJson = async (req: Http2ServerRequest): Promise<any> => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
};

export const json = (res: Http2ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

/** An order that failed, answered as the control plane reads errors (an AppError keeps its status, hint and details). */
export const fail = (res: Http2ServerResponse, err: unknown) => {
  const e = err as AppError;
  const status = e instanceof AppError ? e.status : 500;
  json(res, status, { error: e.code ?? 'runner_error', message: e.message, ...(e instanceof AppError ? { hint: e.hint, details: e.details } : {}) });
};
