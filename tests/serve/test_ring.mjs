// test_ring.mjs - prompt reuse on models whose sliding layers keep ring caches
// (nscompute/forward/kvcache.h; window 8, -c 640: rings of 528 positions): tiny-gemma4 (one
// slot) and tiny-gpt-oss with --parallel 2 (a ring per sequence; a filler request takes slot
// 0 first, so the long prompt lands in slot 1, the least recently used: a cut of a sequence
// other than 0). A new prompt that shares a long prefix with the slot (a cut back within the
// rings' bound of 528 + 1 - 8 positions) keeps it; one that shares only the start of a
// 600-token slot needs positions the rings overwrote: nscompute refuses the cut and the
// prompt is evaluated from 0 (srv_sched.c), cached_tokens 0. Each answer equals a server
// that never reuses its slot.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { templated, startServer, stopServer, shmLeft, tokenTrail } from './lib.mjs';

let g4, oss, servers = {};

before(async () => {
  g4 = templated('tiny/tiny-gemma4-F32.gguf', 'qwen3', 'g4ring');
  oss = templated('tiny/tiny-gpt-oss-F32.gguf', 'qwen3', 'ossring');
  servers.g4 = await startServer(g4.path, ['-c', '640']);
  servers.g4fresh = await startServer(g4.path, ['-c', '640', '--no-prompt-reuse']);
  servers.oss = await startServer(oss.path, ['-c', '640', '--parallel', '2']);
  servers.ossfresh = await startServer(oss.path, ['-c', '640', '--parallel', '2',
                                                  '--no-prompt-reuse']);
});

after(async () => {
  for (const s of Object.values(servers)) {
    assert.equal((await stopServer(s)).code, 0);
    assert.deepEqual(shmLeft(s.session), []);
  }
});

async function reuseWithinAndPast(model, reuse, fresh, filler) {
  const base = { model: model.id, temperature: 0, ignore_eos: true, logprobs: 1 };
  const a = new OpenAI({ baseURL: reuse.url, apiKey: 'unused', maxRetries: 0 });
  const b = new OpenAI({ baseURL: fresh.url, apiKey: 'unused', maxRetries: 0 });
  const p = Array.from({ length: 600 }, (_, i) => ((i * 7919 + 13) % 251) + 3);
  const same = async (req, cached, what) => {
    const r = await a.completions.create({ ...base, ...req });
    const w = await b.completions.create({ ...base, ...req });
    assert.equal(r.usage.prompt_tokens_details.cached_tokens, cached, `${what}: cached tokens`);
    assert.deepEqual(tokenTrail(r.choices[0]), tokenTrail(w.choices[0]), `${what}: tokens`);
    assert.equal(r.choices[0].text, w.choices[0].text, `${what}: text`);
  };
  if (filler) // slot 0 used: the prompts below take slot 1
    await same({ prompt: [5, 6, 7, 8], max_tokens: 1 }, 0, 'filler');
  // one token generated: the slot holds exactly p
  await same({ prompt: p, max_tokens: 1 }, 0, 'first prompt');
  // 590 shared: a cut back by 10, within the bound
  await same({ prompt: [...p.slice(0, 590), 7, 8, 9], max_tokens: 4 }, 590, 'a cut back by 10');
  // 50 shared of the 600 written: past the bound, from 0
  await same({ prompt: [...p.slice(0, 50), 7, 8, 9], max_tokens: 4 }, 0, 'a cut back by 550');
}

test('a ring slot is reused within its bound, evaluated again past it', async () => {
  await reuseWithinAndPast(g4, servers.g4, servers.g4fresh, false);
});

test('gpt-oss, slot 1 of 2: the same', async () => {
  await reuseWithinAndPast(oss, servers.oss, servers.ossfresh, true);
});
