import type { ProviderRow } from '../providers/providers.repo.js';
import type { ProviderAnswer, ProviderQuestion } from '../providers/provider-test-fns.js';
import { postJson, providerMessage, type PostJsonAnswer } from './post-json.js';
import { providerAuthHeaders, providerBaseUrl } from './provider-endpoint.js';

/**
 * One chat completion the service asks of a tenant's model itself (writing a learned skill from recorded
 * work...), not through an agent runtime: OpenAI chat completions (`openai`, `openai-compatible`) or
 * Anthropic messages (`anthropic`), not streamed, the answer's text read back whole. The tenant's key is
 * opened here, for this request only (the header the LLM gateway sends), and never leaves the process
 * except to the provider: nothing returned or thrown carries it. No retries: the caller decides.
 * Recording the usage is the caller's part (it knows the tenant and the user), as with embeddings.
 */
export class ChatCallError extends Error {
  constructor(
    message: string,
    /** The provider's HTTP status; null when it could not be reached or did not answer in time. */
    readonly status: number | null,
  ) {
    super(message);
    this.name = 'ChatCallError';
  }
}

export interface ChatRequest {
  /** The system prompt (OpenAI: a first `system` message; Anthropic: the `system` field). */
  system?: string;
  messages: Array<{ role: 'user' | 'assistant'; content: string }>;
  maxTokens: number;
  /** The whole call (connecting, the model's thinking, the answer's last byte) must end within this. */
  timeoutMs: number;
  temperature?: number;
}

export interface ChatResult {
  text: string;
  /** Tokens in and out: the provider's report, or an estimate when it gave none. */
  usage: { input: number; output: number };
  /** The model the provider says answered (the one asked for when it does not say). */
  model: string;
  /** Why the model stopped, in the provider's words (`stop`, `length`, `end_turn`, `max_tokens`...). */
  finishReason: string | null;
}

/** A provider's answer larger than this is refused (a chat answer is text: this is far beyond any). */
export const MAX_CHAT_RESPONSE_BYTES = 4 * 1024 * 1024;
const ANTHROPIC_VERSION = '2023-06-01';

const count = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
/** Roughly 4 characters a token (English prose and code): the estimate when a provider reports no usage. */
const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/** The text of an OpenAI message's `content`: a string, or an array of parts whose text parts count. */
function openAiText(content: unknown): string | null {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((p: { type?: unknown; text?: unknown }) => (p && (p.type === 'text' || p.type === undefined) && typeof p.text === 'string' ? p.text : '')).join('');
  }
  return null;
}

/** What the answer said, whatever its wire format, before usage is settled. */
interface ParsedAnswer {
  text: string | null;
  finishReason: string | null;
  input: number | null;
  output: number | null;
  model: string | null;
}

export function createChatClient(deps: { openKey(sealed: string): string }) {
  return {
    /**
     * Asks `model` on `provider` for one completion of `req`. Throws ChatCallError on a refusal (the
     * provider's status and reason), a timeout or an unreachable provider (status null), an oversized
     * answer, or an answer that is not JSON or has no text.
     */
    async complete(provider: ProviderRow, model: string, req: ChatRequest): Promise<ChatResult> {
      const name = `provider "${provider.name}"`;
      const base = providerBaseUrl(provider);
      if (!base) throw new ChatCallError(`${name} has no base URL`, null);
      if (!req.messages.length) throw new ChatCallError('a chat request needs at least one message', null);
      const anthropic = provider.kind === 'anthropic';
      const key = provider.apiKeySealed ? deps.openKey(provider.apiKeySealed) : '';
      // A provider may quote the key back in its refusal ("Incorrect API key provided: sk-..."): cut it out.
      const redact = (s: string) => (key ? s.split(key).join('[key]') : s);

      const target = new URL(anthropic ? `${base}/messages` : `${base}/chat/completions`);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'application/json',
        'accept-encoding': 'identity',
        ...(anthropic ? { 'anthropic-version': ANTHROPIC_VERSION } : {}),
        ...providerAuthHeaders(provider.kind, key),
      };
      const messages = req.messages.map((m) => ({ role: m.role, content: m.content }));
      const body = anthropic
        ? { model, max_tokens: req.maxTokens, ...(req.system ? { system: req.system } : {}), messages, ...(req.temperature !== undefined ? { temperature: req.temperature } : {}) }
        : {
            model,
            messages: [...(req.system ? [{ role: 'system', content: req.system }] : []), ...messages],
            max_tokens: req.maxTokens,
            ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
            stream: false,
          };

      let res: PostJsonAnswer;
      try {
        res = await postJson(target, headers, JSON.stringify(body), {
          timeoutMs: req.timeoutMs,
          maxBytes: MAX_CHAT_RESPONSE_BYTES,
          tooLarge: (limit, status) => new ChatCallError(`${name} answered more than ${limit} bytes: refused`, status),
        });
      } catch (err) {
        if (err instanceof ChatCallError) throw err;
        const e = err as Error;
        if (e.name === 'TimeoutError') throw new ChatCallError(`${name} did not answer within ${req.timeoutMs / 1000} s`, null);
        throw new ChatCallError(redact(`${name} cannot be reached: ${e.message}`), null);
      }
      if (res.status < 200 || res.status >= 300) throw new ChatCallError(redact(`${name} answered ${res.status}: ${providerMessage(res.text)}`), res.status);

      const fail = (what: string) => new ChatCallError(redact(`${name} answered ${what}`), res.status);
      let parsed: ParsedAnswer;
      if (!anthropic && (res.contentType.startsWith('text/event-stream') || res.text.trimStart().startsWith('data:'))) {
        parsed = readOpenAiStream(res.text, fail);
      } else {
        let json: any;
        try {
          json = JSON.parse(res.text);
        } catch {
          throw fail('something that is not JSON');
        }
        if (!json || typeof json !== 'object') throw fail('something that is not a JSON object');
        if (json.error) throw fail(`an error: ${providerMessage(res.text)}`);
        parsed = anthropic ? readAnthropic(json) : readOpenAi(json);
      }
      if (parsed.text === null || parsed.text === '') {
        throw fail(`no text${parsed.finishReason ? ` (finish reason: ${parsed.finishReason})` : ''}`);
      }
      // No usage reported (some self-hosted servers): estimated at ~4 characters a token, so the call is
      // still accounted for. The prompt estimate counts the text sent, not the template around it.
      const sent = (req.system?.length ?? 0) + req.messages.reduce((n, m) => n + m.content.length, 0);
      return {
        text: parsed.text,
        usage: { input: parsed.input ?? estimateTokens(sent), output: parsed.output ?? estimateTokens(parsed.text.length) },
        model: parsed.model ?? model,
        finishReason: parsed.finishReason,
      };
    },
  };
}

export type ChatClient = ReturnType<typeof createChatClient>;

/**
 * A provider test's one question (providers.service.ts test): the answer's text, or the provider's refusal
 * as a ChatCallError reports it (a timeout or an unreachable provider: status null). Anything else throws.
 */
export async function askProvider(chat: Pick<ChatClient, 'complete'>, provider: ProviderRow, model: string, question: ProviderQuestion): Promise<ProviderAnswer> {
  try {
    const answer = await chat.complete(provider, model, { messages: [{ role: 'user', content: question.prompt }], maxTokens: question.maxTokens, timeoutMs: question.timeoutMs });
    return { ok: true, text: answer.text };
  } catch (err) {
    if (!(err instanceof ChatCallError)) throw err;
    return { ok: false, message: err.message, status: err.status };
  }
}

/** An OpenAI `chat.completion` object. */
function readOpenAi(json: any): ParsedAnswer {
  const choice = Array.isArray(json.choices) ? json.choices[0] : undefined;
  return {
    text: openAiText(choice?.message?.content),
    finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
    input: count(json.usage?.prompt_tokens),
    output: count(json.usage?.completion_tokens),
    model: typeof json.model === 'string' && json.model ? json.model : null,
  };
}

/** An Anthropic `message` object: its text blocks (thinking and tool-use blocks are not the answer). */
function readAnthropic(json: any): ParsedAnswer {
  const blocks: Array<{ type?: unknown; text?: unknown }> = Array.isArray(json.content) ? json.content : [];
  const texts = blocks.filter((b) => b?.type === 'text' && typeof b.text === 'string').map((b) => b.text as string);
  return {
    text: texts.length ? texts.join('') : null,
    finishReason: typeof json.stop_reason === 'string' ? json.stop_reason : null,
    input: count(json.usage?.input_tokens),
    output: count(json.usage?.output_tokens),
    model: typeof json.model === 'string' && json.model ? json.model : null,
  };
}

/**
 * An OpenAI chat-completions SSE stream, from servers that stream even when asked not to: the text is
 * every chunk's `choices[0].delta.content` up to `data: [DONE]`, the finish reason the last one given,
 * the usage the last one seen (OpenAI sends it in a last chunk without choices).
 */
function readOpenAiStream(text: string, fail: (what: string) => ChatCallError): ParsedAnswer {
  const out: ParsedAnswer = { text: null, finishReason: null, input: null, output: null, model: null };
  let events = 0;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '[DONE]') break;
    if (!data) continue;
    let chunk: any;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw fail('a stream with an event that is not JSON');
    }
    events++;
    // An error in the middle of a stream (the status was 200 already).
    if (chunk?.error) throw fail(`an error in its stream: ${providerMessage(data)}`);
    const choice = Array.isArray(chunk?.choices) ? chunk.choices[0] : undefined;
    const delta = openAiText(choice?.delta?.content);
    if (delta) out.text = (out.text ?? '') + delta;
    if (typeof choice?.finish_reason === 'string') out.finishReason = choice.finish_reason;
    if (chunk?.usage && typeof chunk.usage === 'object') {
      out.input = count(chunk.usage.prompt_tokens);
      out.output = count(chunk.usage.completion_tokens);
    }
    if (typeof chunk?.model === 'string' && chunk.model) out.model = chunk.model;
  }
  if (!events) throw fail('an empty stream');
  return out;
}
