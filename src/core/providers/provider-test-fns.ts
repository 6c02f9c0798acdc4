/**
 * What a provider test (POST /v1/admin/providers/:name/test) reports, from what the chat client made of
 * the provider's answer. Pure: the service makes the call.
 */
export type ProviderTestOutcome = { ok: true; reply: string } | { ok: false; status: number | null; message: string };

/** The provider test's question: one short prompt, a handful of tokens back, a short wait. */
export interface ProviderQuestion {
  prompt: string;
  maxTokens: number;
  timeoutMs: number;
}

/**
 * What the chat client made of a question (llm-gateway/chat-client.ts askProvider): the answer's text, or
 * the provider's refusal (a ChatCallError's message and status; null when it could not be reached or did
 * not answer in time).
 */
export type ProviderAnswer = { ok: true; text: string } | { ok: false; message: string; status: number | null };

/** The longest reply shown (the model was asked for one word; a chatty one is cut). */
const PROVIDER_TEST_REPLY_MAX = 200;

/** A successful answer: its text, with the key cut out should the provider quote it, and cut short. */
export function testSuccess(text: string, key: string): ProviderTestOutcome {
  return { ok: true, reply: cutKey(text, key).slice(0, PROVIDER_TEST_REPLY_MAX) };
}

/**
 * A failed call (a ChatCallError's message and status): the provider's own words, the chat client's
 * `provider "x" answered 401: ` prefix taken off; status null when it could not be reached or did not
 * answer in time. A 2xx without text counts as a success: the key and the model work, the model only
 * spent the few tokens it was allowed on thinking.
 */
export function testFailure(message: string, status: number | null, key: string): ProviderTestOutcome {
  if (status !== null && status >= 200 && status < 300 && / answered no text/.test(message)) return { ok: true, reply: '' };
  return { ok: false, status, message: cutKey(message.replace(/^provider "[^"]*" answered \d{3}: /, ''), key) };
}

function cutKey(s: string, key: string): string {
  return key ? s.split(key).join('[key]') : s;
}
