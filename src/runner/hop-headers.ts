/** Headers that belong to one connection, not to the request or answer relayed over the next one. */
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'proxy-connection', 'proxy-authorization', 'te', 'trailer']);

/** The end-to-end headers of a request or answer being relayed: no hop-by-hop header, no HTTP/2 pseudo-header. */
export function endToEndHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !k.startsWith(':') && !HOP.has(k)) out[k] = v;
  return out;
}
