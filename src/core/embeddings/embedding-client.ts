import { postJson, providerMessage, type PostJsonAnswer } from '../llm-gateway/post-json.js';
import { isModelPath, providerAuthHeaders, providerBaseUrl } from '../llm-gateway/provider-endpoint.js';
import { createUsageTap, type CallUsage } from '../llm-gateway/usage-tap.js';
import type { ProviderRow } from '../providers/providers.repo.js';

/**
 * One call to a provider's OpenAI-compatible `POST {baseUrl}/embeddings` (OpenAI, Azure OpenAI's v1 API,
 * Ollama, text-embeddings-inference, vLLM all answer it): a batch of texts in, one vector per text out.
 * The tenant's key is opened here, for this request only (the same header as the LLM gateway sends), and
 * never leaves the process except to the provider. No retries: the caller's job queue retries a failed
 * job with back-off, and a search falls back to full text.
 */
export class EmbeddingCallError extends Error {
  constructor(
    message: string,
    /** The provider's HTTP status; null when it could not be reached or answered nonsense. */
    readonly status: number | null,
  ) {
    super(message);
    this.name = 'EmbeddingCallError';
  }
}

export interface EmbeddingResult {
  vectors: number[][];
  /** The provider's own usage report (input tokens), when it gave one. */
  usage: CallUsage | null;
}

/** A provider's answer larger than this is refused (64 texts of 4,000 dimensions fit several times). */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** Each text is cut to this many characters: memories are short, and every model has an input limit. */
export const MAX_INPUT_CHARS = 8000;

/** Whether this kind of provider has an OpenAI-compatible `/embeddings` endpoint (Anthropic has none). */
export const hasEmbeddings = (kind: ProviderRow['kind']) => isModelPath(kind, '/embeddings');

// The request goes out through postJson (Node's http client, as the LLM gateway uses: fetch refuses some
// ports outright, the WHATWG "bad ports", where a self-hosted embeddings server may well listen).
export function createEmbeddingClient(deps: { openKey(sealed: string): string }) {
  return {
    /**
     * Embeds `texts` (one request, in order) with `model` on `provider`. Throws EmbeddingCallError on a
     * refusal, a timeout, an unreachable provider or an answer that is not one finite vector per text,
     * all of one length (`dimensions` when given).
     */
    async embed(provider: ProviderRow, model: string, texts: string[], options: { timeoutMs: number; dimensions?: number }): Promise<EmbeddingResult> {
      if (!hasEmbeddings(provider.kind)) throw new EmbeddingCallError(`${provider.kind} providers have no /embeddings endpoint`, null);
      const base = providerBaseUrl(provider);
      if (!base) throw new EmbeddingCallError(`provider "${provider.name}" has no base URL`, null);
      const key = provider.apiKeySealed ? deps.openKey(provider.apiKeySealed) : '';
      // OpenAI refuses an empty string in `input`: a blank text is sent as one space.
      const input = texts.map((t) => (t.length > MAX_INPUT_CHARS ? t.slice(0, MAX_INPUT_CHARS) : t || ' '));
      let res: PostJsonAnswer;
      try {
        res = await postJson(
          new URL(`${base}/embeddings`),
          { 'content-type': 'application/json', accept: 'application/json', 'accept-encoding': 'identity', ...providerAuthHeaders(provider.kind, key) },
          // `encoding_format: float`: some SDKs default to base64; every server named above takes float.
          JSON.stringify({ model, input, encoding_format: 'float' }),
          { timeoutMs: options.timeoutMs, maxBytes: MAX_RESPONSE_BYTES, tooLarge: (limit, status) => new EmbeddingCallError(`the answer is larger than ${limit} bytes`, status) },
        );
      } catch (err) {
        if (err instanceof EmbeddingCallError) throw err;
        const e = err as Error & { code?: string };
        if (e.name === 'TimeoutError') throw new EmbeddingCallError(`provider "${provider.name}" did not answer within ${options.timeoutMs / 1000} s`, null);
        throw new EmbeddingCallError(`provider "${provider.name}" cannot be reached: ${e.message}`, null);
      }
      const { text } = res;
      if (res.status < 200 || res.status >= 300) throw new EmbeddingCallError(`provider "${provider.name}" answered ${res.status}: ${providerMessage(text)}`, res.status);
      let body: { data?: Array<{ index?: number; embedding?: unknown }>; usage?: unknown; model?: unknown };
      try {
        body = JSON.parse(text);
      } catch {
        throw new EmbeddingCallError(`provider "${provider.name}" answered something that is not JSON`, res.status);
      }
      const data = Array.isArray(body?.data) ? [...body.data] : null;
      if (!data || data.length !== input.length) {
        throw new EmbeddingCallError(`provider "${provider.name}" answered ${data ? data.length : 'no'} embeddings for ${input.length} texts`, res.status);
      }
      // OpenAI orders by `index`; not every server promises to.
      if (data.every((d) => typeof d.index === 'number')) data.sort((a, b) => a.index! - b.index!);
      const vectors = data.map((d) => d.embedding);
      const first = vectors[0];
      const dims = options.dimensions ?? (Array.isArray(first) ? first.length : 0);
      for (const v of vectors) {
        if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) {
          throw new EmbeddingCallError(`provider "${provider.name}" answered an embedding that is not a list of numbers (base64 or empty?)`, res.status);
        }
        if (v.length !== dims) {
          throw new EmbeddingCallError(`model "${model}" answered a ${v.length}-dimensional vector where ${dims} dimensions were expected`, res.status);
        }
      }
      // The usage report is read as the gateway reads a model call's (OpenAI: `usage.prompt_tokens`); only
      // that part is fed to the tap, which bounds the bodies it keeps far below a batch of vectors.
      const tap = createUsageTap();
      if (body.usage) tap.push(JSON.stringify({ usage: body.usage, model: body.model }));
      return { vectors: vectors as number[][], usage: tap.end() };
    },
  };
}

export type EmbeddingClient = ReturnType<typeof createEmbeddingClient>;
