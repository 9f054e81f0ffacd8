// test_openai.mjs - nsctl serve driven by the official OpenAI client for Node: chat and
// completions, whole and streamed, stop strings, usage, logprobs, seeds, the reasoning split of
// a harmony (gpt-oss) model against nsctl run's, and errors with OpenAI's status and object.
// The tiny oracle models have random weights: their text is noise, but greedy decoding (and
// sampling with a seed) makes it repeatable, which is what these tests compare.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { NSCTL, templated, tokenize, startServer, stopServer, shmLeft } from './lib.mjs';

let q3, go, srv, gsrv, client, gclient;

before(async () => {
  q3 = templated('tiny/tiny-qwen3-Q4_K_M.gguf', 'qwen3', 'q3chat');
  go = templated('tiny/tiny-gpt-oss-MXFP4_MOE.gguf', 'gptoss', 'gochat');
  srv = await startServer(q3.path, ['--parallel', '2']);
  gsrv = await startServer(go.path, ['-c', '1024']);
  client = new OpenAI({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
  gclient = new OpenAI({ baseURL: gsrv.url, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  for (const s of [srv, gsrv]) {
    if (!s) continue;
    const { code } = await stopServer(s);
    assert.equal(code, 0, `server exit ${code}:\n${s.log}`);
    assert.deepEqual(shmLeft(s.session), [], 'shared memory left behind');
  }
});

const greedy = { temperature: 0 };

test('nsctl ps lists the server: its session, children and address', () => {
  const all = JSON.parse(execFileSync(NSCTL, ['ps', '--json']).toString());
  const me = all.find((x) => x.session === srv.session);
  assert.ok(me, 'the server\'s session is not listed');
  assert.equal(me.serve, `${srv.url} model ${q3.id}, 2 slots`);
  assert.deepEqual(me.procs.map((p) => p.name).sort(), ['nscompute', 'nsctl', 'nsio']);
  assert.ok(me.procs.every((p) => p.alive));
});

test('models: the one model, by the file name', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [q3.id]);
  assert.equal(list.data[0].object, 'model');
});

test('chat: a whole response with usage counted as the tokenizer counts', async () => {
  const r = await client.chat.completions.create({ model: q3.id, ...greedy, max_tokens: 16,
    messages: [{ role: 'user', content: 'What is the capital of France?' }] });
  const prompt = tokenize(q3.path, 'What is the capital of France?', ['--chat']);
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.usage.prompt_tokens, prompt.length);
  // 16 tokens unless an end-of-generation token came first
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 16);
  else assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat: streamed deltas add up to the whole response', async () => {
  const req = { model: q3.id, ...greedy, max_tokens: 24, messages: [
    { role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }] };
  const whole = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({ ...req, stream: true,
    stream_options: { include_usage: true } });
  let text = '', roles = 0, finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    assert.equal(c.object, 'chat.completion.chunk');
    if (c.usage) { usage = c.usage; assert.equal(c.choices.length, 0); continue; }
    const d = c.choices[0].delta;
    if (d.role) roles++;
    if (d.content) text += d.content;
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  assert.equal(roles, 1, 'one chunk carries the role');
  assert.ok(chunks > 3);
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  // the same counts (the second request finds the first one's prompt in a slot's cache)
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens'])
    assert.equal(usage[k], whole.usage[k], k);
  assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens - 1);
});

test('completions: whole and streamed, prompt tokens as nsctl tokenize counts', async () => {
  const req = { model: q3.id, prompt: 'Once upon a time', ...greedy, max_tokens: 20,
    ignore_eos: true };
  const whole = await client.completions.create(req);
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.usage.prompt_tokens,
    tokenize(q3.path, 'Once upon a time', ['--add-special']).length);
  assert.equal(whole.usage.completion_tokens, 20);
  assert.equal(whole.choices[0].finish_reason, 'length');
  let text = '';
  for await (const c of await client.completions.create({ ...req, stream: true }))
    text += c.choices[0].text;
  assert.equal(text, whole.choices[0].text);
});

test('completions: a prompt of token ids is used as given', async () => {
  const ids = tokenize(q3.path, 'Once upon a time', ['--add-special']);
  const a = await client.completions.create({ model: q3.id, prompt: ids, ...greedy,
    max_tokens: 12, ignore_eos: true });
  const b = await client.completions.create({ model: q3.id, prompt: 'Once upon a time',
    ...greedy, max_tokens: 12, ignore_eos: true });
  assert.equal(a.usage.prompt_tokens, ids.length);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

// A piece of text that occurs first at its position and holds no replacement character.
function stopAt(text, from) {
  for (let k = from; k + 3 <= text.length; k++) {
    const s = text.slice(k, k + 3);
    if (!s.includes('\ufffd') && text.indexOf(s) === k && s.trim().length === 3) return k;
  }
  return -1;
}

test('stop strings: the text ends before the first one, whole and streamed', async () => {
  const req = { model: q3.id, prompt: 'The quick brown fox', ...greedy, max_tokens: 48,
    ignore_eos: true };
  const full = (await client.completions.create(req)).choices[0].text;
  const k = stopAt(full, 10), k2 = stopAt(full, k + 6);
  assert.ok(k > 0 && k2 > 0, `no usable stop string in ${JSON.stringify(full)}`);
  const one = await client.completions.create({ ...req, stop: full.slice(k, k + 3) });
  assert.equal(one.choices[0].text, full.slice(0, k));
  assert.equal(one.choices[0].finish_reason, 'stop');
  assert.ok(one.usage.completion_tokens < 48);
  // two of them: the earlier in the text wins, whatever the order given
  const two = await client.completions.create({ ...req,
    stop: [full.slice(k2, k2 + 3), full.slice(k, k + 3)] });
  assert.equal(two.choices[0].text, full.slice(0, k));
  let text = '';
  for await (const c of await client.completions.create({ ...req, stream: true,
    stop: [full.slice(k, k + 3)] })) text += c.choices[0].text;
  assert.equal(text, full.slice(0, k), 'streamed text went past the stop string');
  // chat: the answer is cut the same way
  const creq = { model: q3.id, ...greedy, max_tokens: 48, ignore_eos: true,
    messages: [{ role: 'user', content: 'Tell me a story.' }] };
  const cfull = (await client.chat.completions.create(creq)).choices[0].message.content;
  const ck = stopAt(cfull, 5);
  assert.ok(ck > 0);
  const cut = await client.chat.completions.create({ ...creq, stop: [cfull.slice(ck, ck + 3)] });
  assert.equal(cut.choices[0].message.content, cfull.slice(0, ck));
  assert.equal(cut.choices[0].finish_reason, 'stop');
});

test('logprobs: greedy picks the most likely token, top lists sorted', async () => {
  const r = await client.chat.completions.create({ model: q3.id, ...greedy, max_tokens: 10,
    ignore_eos: true, logprobs: true, top_logprobs: 3,
    messages: [{ role: 'user', content: 'Count to three.' }] });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  let text = '';
  for (const e of lp) {
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.token, e.top_logprobs[0].token);
    assert.equal(e.logprob, e.top_logprobs[0].logprob);
    assert.ok(e.logprob <= 0);
    for (let i = 1; i < 3; i++) assert.ok(e.top_logprobs[i].logprob <= e.top_logprobs[i - 1].logprob);
    assert.ok(e.top_logprobs.reduce((s, t) => s + Math.exp(t.logprob), 0) <= 1 + 1e-6);
    text += Buffer.from(e.bytes).toString('latin1');
  }
  assert.ok(text.length > 0);
  const c = await client.completions.create({ model: q3.id, prompt: 'abc', ...greedy,
    max_tokens: 5, ignore_eos: true, logprobs: 2 });
  const l = c.choices[0].logprobs;
  assert.equal(l.tokens.length, 5);
  assert.equal(l.token_logprobs.length, 5);
  assert.equal(l.top_logprobs.length, 5);
  assert.deepEqual(l.text_offset.slice(0, 1), [0]);
  assert.ok(Object.keys(l.top_logprobs[0]).length <= 2);
  // streamed: the same tokens and offsets, counted from the start of the reply
  const offs = [], toks = [];
  for await (const ch of await client.completions.create({ model: q3.id, prompt: 'abc',
    ...greedy, max_tokens: 5, ignore_eos: true, logprobs: 2, stream: true })) {
    const sl = ch.choices[0].logprobs;
    if (sl) { offs.push(...sl.text_offset); toks.push(...sl.tokens); }
  }
  assert.deepEqual(toks, l.tokens);
  assert.deepEqual(offs, l.text_offset);
});

test('seed: the same seed gives the same text, another seed another', async () => {
  const req = { model: q3.id, prompt: 'Hello', temperature: 1.0, top_k: 0, top_p: 1,
    min_p: 0, max_tokens: 24, ignore_eos: true };
  const a = await client.completions.create({ ...req, seed: 42 });
  const b = await client.completions.create({ ...req, seed: 42 });
  const c = await client.completions.create({ ...req, seed: 43 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
});

test('reasoning: a harmony model\'s analysis is reasoning_content, as nsctl run splits it', async () => {
  // Whether this random model's greedy reply holds both analysis and final text depends on the
  // last bits of its logits, so on the CPU's kernels (a prompt found on one machine gave final
  // text only on another): the first of these prompts whose reply holds both parts is taken
  // (about one in twelve does; none in 60 is a failure).
  const subjects = ['sea', 'moon', 'queen', 'time', 'sky', 'sun', 'tree', 'river', 'city', 'dog',
    'cat', 'bird', 'music', 'love', 'war', 'peace', 'fire', 'water', 'stone', 'king'];
  const prompts = subjects.flatMap((s) => [`Tell me about the ${s}.`, `Describe the ${s}.`,
    `What is the ${s}?`]);
  let prompt = null, r = null;
  for (const p of prompts) {
    r = await gclient.chat.completions.create({ model: go.id, ...greedy, max_tokens: 400,
      messages: [{ role: 'user', content: p }] });
    const m = r.choices[0].message;
    if (m.content.length > 0 && (m.reasoning_content ?? '').length > 0) { prompt = p; break; }
  }
  assert.ok(prompt, `no prompt of ${prompts.length} gave analysis and final text`);
  // nsctl run --json: its summary object alone on stdout
  const summary = JSON.parse(execFileSync(NSCTL, ['run', go.path, '-p', prompt, '-n', '400',
    '--temp', '0', '-c', '1024', '--no-plan', '--threads', '1', '--json'],
  { stdio: ['ignore', 'pipe', 'ignore'] }).toString());
  const m = r.choices[0].message;
  assert.equal(m.content, summary.content);
  assert.equal(m.reasoning_content ?? '', summary.reasoning);
  // streamed: the same split in the deltas
  let content = '', reasoning = '';
  for await (const c of await gclient.chat.completions.create({ model: go.id, ...greedy,
    max_tokens: 400, messages: [{ role: 'user', content: prompt }], stream: true })) {
    content += c.choices[0]?.delta?.content ?? '';
    reasoning += c.choices[0]?.delta?.reasoning_content ?? '';
  }
  assert.equal(content, m.content);
  assert.equal(reasoning, m.reasoning_content ?? '');
});

// The error a call fails with.
async function failure(p) {
  try { await p; } catch (e) { return e; }
  assert.fail('the request did not fail');
}

test('errors: OpenAI\'s status, type, code and param', async () => {
  const msgs = [{ role: 'user', content: 'hi' }];
  let e = await failure(client.chat.completions.create({ model: 'gpt-4o', messages: msgs }));
  assert.ok(e instanceof OpenAI.NotFoundError);
  assert.equal(e.status, 404);
  assert.equal(e.code, 'model_not_found');
  assert.equal(e.param, 'model');
  e = await failure(client.chat.completions.create({ model: q3.id, messages: msgs,
    temperature: 'hot' }));
  assert.ok(e instanceof OpenAI.BadRequestError);
  assert.equal(e.param, 'temperature');
  assert.equal(e.type, 'invalid_request_error');
  e = await failure(client.chat.completions.create({ model: q3.id, messages: msgs,
    temperature: 3 }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'temperature');
  e = await failure(client.chat.completions.create({ model: q3.id, messages: msgs, bogus: 1 }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'bogus');
  assert.match(e.message, /Unrecognized request argument supplied: bogus/);
  e = await failure(client.chat.completions.create({ model: q3.id, messages: msgs, n: 2 }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'n');
  e = await failure(client.chat.completions.create({ model: q3.id,
    messages: [{ role: 'user', content: 'x'.repeat(600) }] }));
  assert.equal(e.status, 400);
  assert.equal(e.code, 'context_length_exceeded');
  e = await failure(client.chat.completions.create({ model: q3.id, messages: [] }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'messages');
  e = await failure(client.chat.completions.create({ model: q3.id,
    messages: [{ role: 'tool', content: 'x' }] }));
  assert.equal(e.status, 400);
  e = await failure(client.completions.create({ model: q3.id, prompt: [1, 2, 99999] }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'prompt');
  e = await failure(client.completions.create({ model: q3.id, prompt: 'x', stop: ['a', 'b',
    'c', 'd', 'e'] }));
  assert.equal(e.param, 'stop');
  e = await failure(client.chat.completions.create({ model: q3.id, messages: msgs,
    tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }));
  assert.equal(e.param, 'tools');
  // the server still answers
  const ok = await client.completions.create({ model: q3.id, prompt: 'x', max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
});

test('api key: 401 without it, served with it', async () => {
  const k = await startServer(q3.path, ['--api-key', 'sekrit']);
  try {
    const bad = new OpenAI({ baseURL: k.url, apiKey: 'wrong', maxRetries: 0 });
    const e = await failure(bad.models.list());
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.equal(e.status, 401);
    assert.equal(e.code, 'invalid_api_key');
    const good = new OpenAI({ baseURL: k.url, apiKey: 'sekrit', maxRetries: 0 });
    assert.equal((await good.models.list()).data.length, 1);
  } finally {
    assert.equal((await stopServer(k)).code, 0);
  }
});
