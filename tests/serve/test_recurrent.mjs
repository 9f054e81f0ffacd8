// test_recurrent.mjs - prompt reuse on a recurrent model (Qwen3.5's Gated DeltaNet layers):
// its state cannot be cut back, so a slot's cache serves a new prompt only when everything the
// slot holds is a prefix of it. Each answer of one server reusing its slot must equal a
// server that never reuses (--no-prompt-reuse); a prompt that shares only part of the slot's
// context (or all of a shorter one) is evaluated whole (cached_tokens 0). Once, a shared
// prefix was kept and the state of the whole old context carried on: different, wrong text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { templated, startServer, stopServer, shmLeft, tokenize, tokenTrail } from './lib.mjs';

let q35, reuse, fresh;

before(async () => {
  q35 = templated('tiny/tiny-qwen35-F32.gguf', 'qwen3', 'q35rec');
  reuse = await startServer(q35.path);
  fresh = await startServer(q35.path, ['--no-prompt-reuse']);
});

after(async () => {
  for (const s of [reuse, fresh]) {
    assert.equal((await stopServer(s)).code, 0);
    assert.deepEqual(shmLeft(s.session), []);
  }
});

test('a recurrent slot is reused only whole', async () => {
  const base = { model: q35.id, temperature: 0, ignore_eos: true, logprobs: 1 };
  const a = new OpenAI({ baseURL: reuse.url, apiKey: 'unused', maxRetries: 0 });
  const b = new OpenAI({ baseURL: fresh.url, apiKey: 'unused', maxRetries: 0 });
  const p = tokenize(q35.path, 'The quick brown fox');
  const x = p[p.length - 1];
  const y = p[0] === x ? p[1] : p[0];
  const same = async (req, cached, what) => {
    const r = await a.completions.create({ ...base, ...req });
    const w = await b.completions.create({ ...base, ...req });
    assert.equal(r.usage.prompt_tokens_details.cached_tokens, cached, `${what}: cached tokens`);
    assert.deepEqual(tokenTrail(r.choices[0]), tokenTrail(w.choices[0]), `${what}: tokens`);
    assert.equal(r.choices[0].text, w.choices[0].text, `${what}: text`);
  };
  // one token generated: the slot holds exactly p (the sampled token is not evaluated)
  await same({ prompt: p, max_tokens: 1 }, 0, 'first prompt');
  // all the slot holds is a prefix: kept
  await same({ prompt: [...p, x], max_tokens: 8 }, p.length, 'extension of the whole slot');
  // p is shared, the slot holds more (x and 7 generated): evaluated whole
  await same({ prompt: [...p, y], max_tokens: 8 }, 0, 'a prefix of the slot only');
  // the same prompt again: its last token would have to be evaluated again from p
  await same({ prompt: [...p, y], max_tokens: 8 }, 0, 'the same prompt again');
  // a text prompt sharing words with the slot's tokens
  await same({ prompt: 'The quick brown cat', max_tokens: 6 }, 0, 'a text prompt');
});
