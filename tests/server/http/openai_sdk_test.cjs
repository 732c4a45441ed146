// The official `openai` npm SDK against gemma-serve's OpenAI-compatible API:
// chat, completions, streaming with usage, tool-call requests, errors.
// The demo model does not call tools by itself, so the tool-call test checks
// that tool requests render and that the response has OpenAI's shape; the
// parsing of a tool call out of the model's text is output_parser_test's.
'use strict';
const assert = require('node:assert/strict');
const OpenAI = require('openai');
const { startServe, argValue } = require('./serve_process.cjs');

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];

async function run(client, model) {
  const models = await client.models.list();
  assert.equal(models.data[0].id, model);

  const chat = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Tell me a fortune' }], max_tokens: 8, temperature: 0,
  });
  assert.match(chat.id, /^chatcmpl-/);
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.equal(typeof chat.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(chat.choices[0].finish_reason));
  assert.ok(chat.usage.prompt_tokens > 0);

  const completion = await client.completions.create({
    model, prompt: 'The quick brown fox', max_tokens: 6, temperature: 0, n: 2,
  });
  assert.match(completion.id, /^cmpl-/);
  assert.equal(completion.choices.length, 2);
  assert.equal(completion.choices[0].text, completion.choices[1].text);

  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Tell me a fortune' }], max_tokens: 8,
    temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.ok(usage && usage.completion_tokens > 0);
  assert.ok(finish);
  assert.equal(text, chat.choices[0].message.content);

  const completionStream = await client.completions.create({
    model, prompt: 'The quick brown fox', max_tokens: 6, temperature: 0, stream: true,
  });
  let streamed = '';
  for await (const chunk of completionStream) streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, completion.choices[0].text);

  const toolChat = await client.chat.completions.create({
    model, max_tokens: 4, temperature: 0, tools, tool_choice: 'auto',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ],
  });
  assert.ok(Array.isArray(toolChat.choices[0].message.tool_calls));
  assert.ok(['stop', 'length', 'tool_calls'].includes(toolChat.choices[0].finish_reason));

  await assert.rejects(client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'hi' }], top_p: 7,
  }), (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /top_p/.test(e.message));
  await assert.rejects(client.chat.completions.create({
    model: 'gpt-4', messages: [{ role: 'user', content: 'hi' }],
  }), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(client.chat.completions.create({
    model, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }],
  }), (e) => e.status === 400 && /vision input is not supported/.test(e.message));
}

async function main() {
  const serve = argValue('--serve');
  const modelDir = argValue('--model');
  const model = modelDir.replace(/\/+$/, '').split('/').pop();
  const { child, baseURL } = await startServe(serve, modelDir, ['--api-key', 'sdk-key']);
  try {
    await run(new OpenAI({ baseURL, apiKey: 'sdk-key', maxRetries: 0 }), model);
    const wrongKey = new OpenAI({ baseURL, apiKey: 'nope', maxRetries: 0 });
    await assert.rejects(wrongKey.models.list(),
                         (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    console.log('openai_sdk_test: all checks passed');
  } finally {
    child.kill('SIGTERM');
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
