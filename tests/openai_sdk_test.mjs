// The official OpenAI client library (npm `openai`, fetched by scripts/setup.sh) against
// `radixlm serve` (random:tiny: Qwen3's tokenizer and chat template): the SDK's own tool runner
// drives a tool-call loop (call, tool result, answer), streamed and not; its stream helper
// assembles delta.tool_calls; its parse() helper reads a strict json_schema output. Everything
// is read through the SDK's objects, as an agent client would.
// Usage: node openai_sdk_test.mjs RADIXLM   (exit 77: the SDK is not installed)
import { check, loadPackage, withServer } from './sdk_harness.mjs';

const { default: OpenAI } = await loadPackage('openai/index.mjs', 'openai');

const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
};
const noThinking = { chat_template_kwargs: { enable_thinking: false } };

async function toolLoop(client, model, stream) {
  const calls = [];
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Current weather of a city', parameters: weatherParams, parse: JSON.parse,
      function: (args) => { calls.push(args); return { temperature: 3, unit: args.unit }; },
    },
  }];
  const messages = [{ role: 'system', content: 'You report the weather.' }, { role: 'user', content: 'Weather in Oslo?' }];
  // Forced: the runner calls the named function once, appends its result and stops.
  for (let seed = 0; seed < 6 && calls.length === 0; ++seed) {
    const runner = client.chat.completions.runTools({
      model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 160, seed,
      stream, ...noThinking,
    });
    try { await runner.done(); } catch (e) { console.log('   runner: ' + e.message); continue; }
    if (calls.length === 0) continue;
    const history = runner.messages;
    const call = history.find((m) => m.role === 'assistant' && m.tool_calls);
    const result = history.find((m) => m.role === 'tool');
    check(call && call.tool_calls[0].function.name === 'get_weather' && typeof calls[0].city === 'string' &&
          ['celsius', 'fahrenheit'].includes(calls[0].unit) && [...calls[0].city].length <= 12 && Object.keys(calls[0]).length === 2,
          `${stream ? 'streamed' : 'plain'} runTools: the SDK parsed a call valid against its parameters (${JSON.stringify(calls[0])})`);
    check(result && result.tool_call_id === call.tool_calls[0].id, 'the tool result answers the call id');
    // The answer after the tool result.
    const params = { model, messages: history, tools: tools.map((t) => ({ type: 'function', function: { name: t.function.name, parameters: weatherParams } })),
      tool_choice: 'none', max_tokens: 8, seed, ...noThinking };
    if (stream) {
      const s = client.chat.completions.stream(params);
      const final = await s.finalChatCompletion();
      check(typeof final.choices[0].message.content === 'string' && !final.choices[0].message.tool_calls?.length,
            'streamed answer after the tool result');
    } else {
      const answer = await client.chat.completions.create(params);
      check(typeof answer.choices[0].message.content === 'string' && answer.usage.prompt_tokens_details.cached_tokens > 0,
            `answer after the tool result reuses the cached prefix (${answer.usage.prompt_tokens_details.cached_tokens} tokens)`);
    }
  }
  check(calls.length > 0, `${stream ? 'streamed' : 'plain'} tool loop completed`);
}

async function streamedCalls(client, model) {
  const s = client.chat.completions.stream({
    model, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 200, seed: 1, ...noThinking,
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: weatherParams } }], tool_choice: 'required',
  });
  const final = await s.finalChatCompletion();
  const c = final.choices[0];
  if (c.finish_reason === 'tool_calls') {
    const args = JSON.parse(c.message.tool_calls[0].function.arguments);
    check(c.message.tool_calls[0].id.startsWith('call_') && ['celsius', 'fahrenheit'].includes(args.unit),
          'stream helper assembled delta.tool_calls into a valid call');
  } else {
    check(c.finish_reason === 'length', 'stream helper: cut by max_tokens');
  }
}

async function structured(client, model) {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 150 }, admin: { type: 'boolean' } },
    required: ['name', 'age', 'admin'], additionalProperties: false,
  };
  let parsed = null;
  for (let seed = 0; seed < 8 && parsed === null; ++seed) {
    try {
      const r = await client.chat.completions.parse({
        model, messages: [{ role: 'user', content: 'A user as JSON' }], max_tokens: 96, seed, ...noThinking,
        response_format: { type: 'json_schema', json_schema: { name: 'user', schema, strict: true } },
      });
      parsed = r.choices[0].message.parsed;
    } catch (e) {
      console.log(`   seed ${seed}: ${e.constructor.name}: ${e.message.slice(0, 80)}`);  // cut by max_tokens
    }
  }
  check(parsed !== null && typeof parsed.name === 'string' && [...parsed.name].length <= 10 && Number.isInteger(parsed.age) &&
        parsed.age >= 0 && parsed.age <= 150 && typeof parsed.admin === 'boolean' && Object.keys(parsed).length === 3,
        `parse() read a strict json_schema output: ${JSON.stringify(parsed)}`);
  // An unsupported keyword is an API error the SDK raises as BadRequestError.
  try {
    await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], max_tokens: 4,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } });
    check(false, 'an unsupported schema keyword is refused');
  } catch (e) {
    check(e.status === 400 && e.constructor.name === 'BadRequestError', `an unsupported schema keyword is a 400 (${e.message.slice(0, 90)})`);
  }
}

async function logprobs(client, model) {
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4,
    temperature: 0, logprobs: true, top_logprobs: 2, ...noThinking });
  const lp = r.choices[0].logprobs.content;
  check(lp.length > 0 && lp.every((e) => e.top_logprobs.length === 2 && e.logprob <= 0), 'logprobs through the SDK');
}

// The Responses API through the SDK's own types (issue 46): a forced function call, its output
// sent back with previous_response_id (the stored conversation continues from its exact
// tokens: the whole history is a cache hit), the strict stream helper's finalResponse(), a
// json_schema text.format, retrieve() of a stored response, and errors.
async function responses(client, model) {
  const tools = [{ type: 'function', name: 'get_weather', description: 'Current weather of a city', parameters: weatherParams, strict: true }];
  let call = null, first = null;
  for (let seed = 0; seed < 6 && !call; ++seed) {
    first = await client.responses.create({ model, input: [{ role: 'developer', content: 'You report the weather.' },
      { role: 'user', content: 'Weather in Oslo?' }], tools, tool_choice: { type: 'function', name: 'get_weather' },
      max_output_tokens: 160, temperature: 0.7, top_p: 0.9 + seed / 100, reasoning: { effort: 'none' } });
    call = first.output.find((o) => o.type === 'function_call') || null;
  }
  check(call && call.name === 'get_weather' && call.call_id.startsWith('call_'), `responses.create: a forced function_call (${call && call.arguments})`);
  if (!call) return;
  const args = JSON.parse(call.arguments);
  check(['celsius', 'fahrenheit'].includes(args.unit) && typeof args.city === 'string', 'its arguments are valid against the parameters');
  check(first.usage.input_tokens > 0 && first.usage.output_tokens > 0 && first.usage.input_tokens_details.cached_tokens >= 0 &&
        first.usage.total_tokens === first.usage.input_tokens + first.usage.output_tokens, 'usage with input_tokens_details');
  const second = await client.responses.create({ model, previous_response_id: first.id, tools, tool_choice: 'none',
    input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature: 3 }) }], max_output_tokens: 8,
    reasoning: { effort: 'none' } });
  const message = second.output.find((o) => o.type === 'message');
  check(message && typeof second.output_text === 'string', 'the answer after function_call_output (output_text via the SDK)');
  check(second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens + first.usage.output_tokens - 1,
        `previous_response_id: ${second.usage.input_tokens_details.cached_tokens} of ${second.usage.input_tokens} prompt tokens ` +
        `cached (the whole stored history, ${first.usage.input_tokens + first.usage.output_tokens})`);
  const stored = await client.responses.retrieve(second.id);
  check(stored.id === second.id && stored.output_text === second.output_text, 'responses.retrieve returns the stored response');

  // The stream helper checks every event's order, indices and ids against its own snapshot.
  const stream = client.responses.stream({ model, input: 'Say something.', max_output_tokens: 12, temperature: 0,
    reasoning: { effort: 'none' } });
  let deltas = '';
  let terminal = null;
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  // The SDK takes the final snapshot from response.completed only; a cut response ends with
  // response.incomplete (as OpenAI's own server does), which the SDK leaves in its snapshot.
  stream.on('response.completed', (e) => { terminal = e.response.status; });
  stream.on('response.incomplete', (e) => { terminal = e.response.status + '/' + e.response.incomplete_details?.reason; });
  const final = await stream.finalResponse();
  // Without a text format the SDK's stream helper leaves output_text unset: read the items.
  const streamed = final.output.filter((o) => o.type === 'message')
    .flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');
  check(['completed', 'incomplete/max_output_tokens'].includes(terminal) && streamed === deltas && deltas.length > 0,
        `responses.stream: finalResponse() assembles the deltas (${terminal}, ${deltas.length} chars)`);

  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, ok: { type: 'boolean' } },
                   required: ['name', 'ok'], additionalProperties: false };
  let parsed = null;
  for (let seed = 0; seed < 8 && parsed === null; ++seed) {
    const r = await client.responses.create({ model, input: 'A record as JSON', max_output_tokens: 64, temperature: 0.5 + seed / 20,
      text: { format: { type: 'json_schema', name: 'record', schema, strict: true } }, reasoning: { effort: 'none' } });
    if (r.status === 'completed') parsed = JSON.parse(r.output_text);
  }
  check(parsed && typeof parsed.name === 'string' && typeof parsed.ok === 'boolean' && Object.keys(parsed).length === 2,
        `text.format json_schema: ${JSON.stringify(parsed)}`);
  try {
    await client.responses.create({ model, input: [{ type: 'function_call_output', call_id: 'call_nope', output: 'x' }] });
    check(false, 'an output for an unknown call is refused');
  } catch (e) {
    check(e.status === 400 && /call_nope/.test(e.message), `an output for an unknown call_id is a 400 naming it (${e.message.slice(0, 80)})`);
  }
  try {
    await client.responses.retrieve('resp_missing');
    check(false, 'an unknown response id is a 404');
  } catch (e) {
    check(e.status === 404, 'retrieve of an unknown id: 404');
  }
}

await withServer(process.argv[2], async (base) => {
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'not-needed', maxRetries: 0, timeout: 120000 });
  const model = (await client.models.list()).data[0].id;
  await toolLoop(client, model, false);
  await toolLoop(client, model, true);
  await streamedCalls(client, model);
  await structured(client, model);
  await logprobs(client, model);
  await responses(client, model);
});
