// test_concurrent.mjs - requests served together do not change each other's tokens: the same
// request (greedy, and sampled with its seed) gives the same tokens alone and among 4
// concurrent others of other lengths and settings, whether it starts first or joins them
// mid-way; and a prompt that extends the slot's previous one reuses its cached prefix with the
// same result as evaluating it whole.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { templated, startServer, stopServer, shmLeft, tokenTrail } from './lib.mjs';

let q3, srv, client;

before(async () => {
  q3 = templated('tiny/tiny-qwen3-Q4_K_M.gguf', 'qwen3', 'q3conc');
  srv = await startServer(q3.path, ['--parallel', '5', '--prefill-chunk', '16']);
  client = new OpenAI({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  const { code } = await stopServer(srv);
  assert.equal(code, 0, srv.log);
  assert.deepEqual(shmLeft(srv.session), []);
});

const targets = {
  greedy: { kind: 'completion', body: { prompt: 'Once upon a time there was', temperature: 0,
    max_tokens: 48, ignore_eos: true, logprobs: 1 } },
  seeded: { kind: 'chat', body: { messages: [{ role: 'user', content: 'Tell me a story.' }],
    temperature: 0.9, top_k: 20, seed: 1234, max_tokens: 48, ignore_eos: true,
    logprobs: true } },
};

// Four others: other prompts (one long, prefilled in chunks while the rest decode), lengths,
// samplers, penalties, one streamed.
const others = [
  { kind: 'completion', body: { prompt: 'The weather today', temperature: 0.7, seed: 7,
    max_tokens: 64, ignore_eos: true } },
  { kind: 'chat', body: { messages: [{ role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Why is the sky blue? '.repeat(12) }], temperature: 0,
  max_tokens: 20, ignore_eos: true } },
  { kind: 'completion', body: { prompt: 'x', temperature: 1.2, top_p: 0.9, seed: 99,
    frequency_penalty: 1.0, presence_penalty: 0.5, max_tokens: 40, ignore_eos: true } },
  { kind: 'chat', stream: true, body: { messages: [{ role: 'user', content: 'Hello there' }],
    temperature: 0.5, seed: 5, max_tokens: 56, ignore_eos: true } },
];

async function run(r) {
  const body = { model: q3.id, ...r.body };
  if (r.stream) {
    let text = '';
    const s = await client.chat.completions.create({ ...body, stream: true });
    for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
    return { text };
  }
  const res = r.kind === 'chat' ? await client.chat.completions.create(body)
    : await client.completions.create(body);
  const ch = res.choices[0];
  return { text: r.kind === 'chat' ? ch.message.content : ch.text,
    trail: ch.logprobs ? tokenTrail(ch) : null, usage: res.usage };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

for (const [name, t] of Object.entries(targets)) {
  test(`${name}: the same tokens alone and among 4 concurrent requests`, async () => {
    const alone = await run(t);
    assert.equal(alone.trail.length, 48);
    // started first, the others join while it decodes
    const first = run(t);
    await sleep(20);
    const a = await Promise.all([first, ...others.map(run)]);
    assert.deepEqual(a[0].trail, alone.trail, 'tokens changed when started first');
    assert.equal(a[0].text, alone.text);
    // the others first, it joins them mid-way
    const rest = others.map(run);
    await sleep(60);
    const b = await Promise.all([run(t), ...rest]);
    assert.deepEqual(b[0].trail, alone.trail, 'tokens changed when joining mid-way');
    assert.equal(b[0].text, alone.text);
    // and the others are repeatable too (each with its own seed)
    for (let i = 0; i < others.length; i++) assert.equal(a[i + 1].text, b[i + 1].text);
  });
}

test('prompt reuse: a prompt extending the slot\'s last one takes its prefix from the cache', async () => {
  const one = new OpenAI({ baseURL: srv.url, apiKey: 'unused', maxRetries: 0 });
  const base = { model: q3.id, temperature: 0, max_tokens: 12, ignore_eos: true, logprobs: 1 };
  const r1 = await one.completions.create({ ...base, prompt: 'The quick brown fox' });
  const r2 = await one.completions.create({ ...base, prompt: 'The quick brown fox jumps over' });
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= r1.usage.prompt_tokens,
    `cached ${r2.usage.prompt_tokens_details.cached_tokens} of ${r1.usage.prompt_tokens}`);
  const fresh = await startServer(q3.path, ['--no-prompt-reuse']);
  try {
    const c = new OpenAI({ baseURL: fresh.url, apiKey: 'unused', maxRetries: 0 });
    const w = await c.completions.create({ ...base, prompt: 'The quick brown fox jumps over' });
    assert.equal(w.usage.prompt_tokens_details.cached_tokens, 0);
    assert.deepEqual(tokenTrail(r2.choices[0]), tokenTrail(w.choices[0]));
    assert.equal(r2.choices[0].text, w.choices[0].text);
  } finally {
    assert.equal((await stopServer(fresh)).code, 0);
  }
});
