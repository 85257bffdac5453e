// The official Anthropic client library (npm `@anthropic-ai/sdk`, fetched by scripts/setup.sh)
// against `radixlm serve` (random:tiny: Qwen3's tokenizer and chat template) on the Messages API:
// a forced tool_use, its tool_result sent back (the history a cache hit), the same streamed
// (input_json_delta assembled by the SDK's MessageStream), a text stream whose deltas make the
// final message, countTokens against a message's usage, stop_sequences, thinking, cache_control,
// and Anthropic-shaped errors raised as the SDK's error classes.
// Usage: node anthropic_sdk_test.mjs RADIXLM   (exit 77: the SDK is not installed)
import { check, loadPackage, withServer } from './sdk_harness.mjs';

const { default: Anthropic } = await loadPackage('@anthropic-ai/sdk/index.mjs', '@anthropic-ai/sdk');

const weather = {
  name: 'get_weather', description: 'Current weather of a city',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
    required: ['city', 'unit'],
  },
};
const validInput = (x) => x && typeof x.city === 'string' && [...x.city].length <= 12 &&
  ['celsius', 'fahrenheit'].includes(x.unit) && Object.keys(x).length === 2;
const system = [{ type: 'text', text: 'You report the weather. '.repeat(8), cache_control: { type: 'ephemeral' } }];
const model = 'claude-sonnet-4-5';  // any name: the one model served answers, and its name is echoed

async function toolRoundTrip(client) {
  const ask = { role: 'user', content: 'Weather in Oslo?' };
  const first = await client.messages.create({ model, max_tokens: 200, temperature: 0, system, tools: [weather],
    tool_choice: { type: 'tool', name: 'get_weather' }, messages: [ask], thinking: { type: 'disabled' } });
  const use = first.content.find((b) => b.type === 'tool_use');
  check(first.type === 'message' && first.role === 'assistant' && first.model === model, 'a Message object, the model name echoed');
  check(first.stop_reason === 'tool_use' && use && use.name === 'get_weather' && use.id.startsWith('toolu_') && validInput(use.input),
        `forced tool_use: input valid against input_schema (${JSON.stringify(use?.input)})`);
  if (!use) return;
  const history = [ask, { role: 'assistant', content: first.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: [{ type: 'text', text: '3 degrees' }] }] }];
  const answer = await client.messages.create({ model, max_tokens: 8, temperature: 0, system, tools: [weather],
    tool_choice: { type: 'none' }, messages: history });
  const prior = first.usage.input_tokens + first.usage.cache_read_input_tokens + first.usage.cache_creation_input_tokens;
  check(answer.content.every((b) => b.type === 'text') && answer.usage.cache_read_input_tokens >= prior - 1,
        `tool_result answered; the history is a cache hit (${answer.usage.cache_read_input_tokens} of the first turn's ${prior} tokens)`);
  const counted = await client.messages.countTokens({ model, system, tools: [weather], tool_choice: { type: 'none' }, messages: history });
  const used = answer.usage.input_tokens + answer.usage.cache_read_input_tokens + answer.usage.cache_creation_input_tokens;
  check(counted.input_tokens === used, `countTokens = the message's input tokens (${counted.input_tokens} vs ${used})`);
}

async function streamed(client) {
  const s = client.messages.stream({ model, max_tokens: 200, temperature: 0, system, tools: [weather],
    tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'Weather?' }] });
  let json = '';
  s.on('inputJson', (delta) => { json += delta; });
  const final = await s.finalMessage();
  const use = final.content.find((b) => b.type === 'tool_use');
  check(final.stop_reason === 'tool_use' && use && validInput(use.input) && JSON.stringify(JSON.parse(json)) === JSON.stringify(use.input),
        `streamed tool_use: input_json_delta assembled into a valid input (${json})`);
  const t = client.messages.stream({ model, max_tokens: 12, temperature: 0.8, messages: [{ role: 'user', content: 'Say something.' }],
    thinking: { type: 'disabled' } });
  let text = '';
  t.on('text', (delta) => { text += delta; });
  const m = await t.finalMessage();
  const blocks = m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  check(m.stop_reason === 'max_tokens' && text === blocks && text.length > 0 && m.usage.output_tokens === 12,
        `streamed text: deltas = the final message, stop_reason max_tokens (${JSON.stringify(text).slice(0, 40)})`);
}

async function options(client) {
  // Greedy decoding of this random model starts with a newline: a stop sequence ends it there.
  const s = await client.messages.create({ model, max_tokens: 16, temperature: 0, stop_sequences: ['\n'],
    messages: [{ role: 'user', content: 'hi' }], thinking: { type: 'disabled' } });
  check(s.stop_reason === 'stop_sequence' && s.stop_sequence === '\n', `stop_sequences: stop_reason stop_sequence (${s.stop_reason})`);
  const th = await client.messages.create({ model, max_tokens: 24, thinking: { type: 'enabled', budget_tokens: 1024 },
    messages: [{ role: 'user', content: 'Think, then answer.' }], metadata: { user_id: 'u1' } });
  check(th.content.every((b) => ['thinking', 'text'].includes(b.type)) && th.usage.output_tokens > 0,
        `thinking enabled: blocks ${th.content.map((b) => b.type).join(', ')}`);
}

// Claude Code's shape: a system message after the first user message. The next turn re-sends it
// with the reply and a new user message; the history must stay a prefix of the first prompt.
async function midConversationSystem(client) {
  const turn1 = [{ role: 'user', content: 'Start.' }, { role: 'system', content: 'Agents available: ' + 'helper '.repeat(40) }];
  // (Thinking left on: Qwen3's template renders a disabled turn's empty think block in the
  // generation prompt but not in the history, a difference turn memory covers only for replies
  // that end on their own.)
  const first = await client.messages.create({ model, max_tokens: 6, temperature: 0, system, messages: turn1 });
  const total = first.usage.input_tokens + first.usage.cache_read_input_tokens + first.usage.cache_creation_input_tokens;
  const second = await client.messages.create({ model, max_tokens: 6, temperature: 0, system,
    messages: [...turn1, { role: 'assistant', content: first.content }, { role: 'user', content: 'Next.' }] });
  check(second.usage.cache_read_input_tokens >= total - 1,
        `a mid-conversation system message keeps the next turn a full hit (${second.usage.cache_read_input_tokens} of ${total})`);
}

async function errors(client) {
  const bad = async (what, body, pattern) => {
    try {
      await client.messages.create({ model, max_tokens: 4, ...body });
      check(false, what + ' is refused');
    } catch (e) {
      check(e instanceof Anthropic.BadRequestError && e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error' &&
            pattern.test(e.message), `${what}: a 400 invalid_request_error naming it (${e.message.slice(0, 90)})`);
    }
  };
  await bad('a tool_result for an unknown tool_use id',
    { messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nope', content: 'x' }] }] }, /toolu_nope/);
  await bad('an unknown block type', { messages: [{ role: 'user', content: [{ type: 'hologram', text: 'x' }] }] }, /hologram/);
  await bad('a missing max_tokens', { max_tokens: undefined, messages: [{ role: 'user', content: 'x' }] }, /max_tokens/);
}

await withServer(process.argv[2], async (base) => {
  const client = new Anthropic({ baseURL: base, apiKey: 'not-needed', maxRetries: 0, timeout: 120000 });
  await toolRoundTrip(client);
  await streamed(client);
  await options(client);
  await midConversationSystem(client);
  await errors(client);
});
