// test_faults.mjs - nsctl serve under faults, through the official OpenAI client:
//   - a client that goes away mid-stream: its sequence stops and frees its slot, the request
//     beside it goes on with unchanged tokens;
//   - more requests than slots: they wait in order; past the queue's bound, 503 queue_full;
//   - nsio SIGKILLed during a streamed request: restarted, none of the request's tokens change;
//   - SIGTERM: running requests finish within --grace, or end with an error event after it;
//     new connections are refused; exit 0, no shared memory left;
//   - nscompute SIGKILLed: the request in flight fails with an error, the server exits 1 and
//     leaves no shared memory.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { templated, startServer, stopServer, shmLeft, tokenTrail, childPid, livePid } from './lib.mjs';

const q3 = templated('tiny/tiny-qwen3-Q4_K_M.gguf', 'qwen3', 'q3faults');
const servers = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function serve(args) {
  const s = await startServer(q3.path, args);
  servers.push(s);
  return { srv: s, client: new OpenAI({ baseURL: s.url, apiKey: 'unused', maxRetries: 0 }) };
}

after(async () => {
  for (const s of servers) {
    await stopServer(s);
    assert.deepEqual(shmLeft(s.session), [], `shared memory of ${s.session} left`);
  }
});

async function health(srv) {
  return (await fetch(srv.url.replace(/\/v1$/, '/health'))).json();
}

// A long streamed completion; resolves after `chunks` chunks with the stream still open.
async function openStream(client, chunks, extra = {}) {
  const stream = await client.completions.create({ model: q3.id, prompt: 'Long story:',
    temperature: 0, max_tokens: 4000, ignore_eos: true, stream: true, ...extra });
  const it = stream[Symbol.asyncIterator]();
  let text = '';
  for (let i = 0; i < chunks; i++) text += (await it.next()).value.choices[0].text;
  return { stream, it, text };
}

async function failure(p) {
  try { await p; } catch (e) { return e; }
  assert.fail('the request did not fail');
}

test('a client gone mid-stream frees its slot; the request beside it is unchanged', async () => {
  const { srv, client } = await serve(['--parallel', '2', '-c', '4096']);
  const req = { model: q3.id, prompt: 'Beside it', temperature: 0, max_tokens: 40,
    ignore_eos: true, logprobs: 1 };
  const alone = await client.completions.create(req);
  const s = await openStream(client, 5);
  const beside = client.completions.create(req);
  await sleep(50);
  s.stream.controller.abort();
  const b = await beside;
  assert.deepEqual(tokenTrail(b.choices[0]), tokenTrail(alone.choices[0]));
  let h;
  for (let i = 0; i < 30; i++) {
    h = await health(srv);
    if (h.slots_processing === 0) break;
    await sleep(100);
  }
  assert.equal(h.slots_processing, 0, `the aborted stream still holds a slot: ${JSON.stringify(h)}`);
  assert.equal(h.requests_served, 3);
});

test('a client gone while it waits for a whole answer frees its slot', async () => {
  const { srv, client } = await serve(['-c', '4096']);
  const ac = new AbortController();
  const p = client.completions.create({ model: q3.id, prompt: 'Long story:', temperature: 0,
    max_tokens: 4000, ignore_eos: true }, { signal: ac.signal });
  await sleep(300); // no byte goes back until it is done: only the socket tells
  ac.abort();
  await assert.rejects(p);
  let h;
  for (let i = 0; i < 10; i++) {
    await sleep(100);
    h = await health(srv);
    if (h.slots_processing === 0) break;
  }
  assert.equal(h.slots_processing, 0, `the abandoned request still runs: ${JSON.stringify(h)}`);
});

test('more requests than slots wait in order; past the queue 503 queue_full', async () => {
  const { srv, client } = await serve(['--parallel', '1', '--queue', '2', '-c', '4096']);
  const s = await openStream(client, 3);
  const order = [];
  // one slot: the order of the answers is the order of the starts, when the later one takes
  // long enough that the earlier answer's HTTP resumption cannot lag behind it (C: 48 tokens;
  // with 4 each, C's answer once overtook B's under load although B ran first)
  const small = (tag, n = 4) => client.completions.create({ model: q3.id, prompt: tag,
    max_tokens: n, ignore_eos: true, temperature: 0 }).then((r) => { order.push(tag); return r; });
  // each request is sent once the one before it waits in the queue (a fixed pause let C
  // overtake B on a loaded machine)
  const waiting = async (n) => {
    for (let i = 0; i < 600 && (await health(srv)).requests_waiting < n; i++) await sleep(50);
    assert.equal((await health(srv)).requests_waiting, n, `${n} request(s) never queued`);
  };
  const b = small('B');
  await waiting(1);
  const c = small('C', 48);
  await waiting(2);
  const e = await failure(small('D'));
  assert.ok(e instanceof OpenAI.APIError);
  assert.equal(e.status, 503);
  assert.equal(e.code, 'queue_full');
  s.stream.controller.abort();
  await Promise.all([b, c]);
  assert.deepEqual(order, ['B', 'C']);
});

test('nsio SIGKILLed during a streamed request: restarted, the same tokens', async () => {
  // a small arena: nsio serves every block of every token
  const { srv, client } = await serve(['--mem-budget', '128KB']);
  const req = { model: q3.id, prompt: 'Once upon a time', temperature: 0.8, seed: 11,
    max_tokens: 120, ignore_eos: true, logprobs: 1 };
  const want = await client.completions.create(req);
  for (const at of [3, 30, 70]) {
    const victim = livePid(srv, 'nsio');
    assert.ok(victim > 0);
    const log0 = srv.log.length;
    const stream = await client.completions.create({ ...req, stream: true });
    let n = 0, text = '';
    const trail = [];
    for await (const c of stream) {
      if (++n === at) process.kill(victim, 'SIGKILL');
      text += c.choices[0].text;
      if (c.choices[0].logprobs) trail.push(...c.choices[0].logprobs.tokens);
    }
    assert.equal(text, want.choices[0].text, `text changed (nsio killed at chunk ${at})`);
    assert.deepEqual(trail, tokenTrail(want.choices[0]));
    assert.match(srv.log.slice(log0), /nsio died .*restarting/);
  }
});

test('SIGTERM: a running request finishes, new connections are refused, exit 0', async () => {
  const { srv, client } = await serve(['--grace', '60']);
  const stream = await client.completions.create({ model: q3.id, prompt: 'Go', temperature: 0,
    max_tokens: 300, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
  const it = stream[Symbol.asyncIterator]();
  await it.next();
  const exited = stopServer(srv);
  await sleep(300);
  await assert.rejects(fetch(srv.url + '/models'), 'a new connection was accepted');
  let usage = null, finish = null;
  for (let r = await it.next(); !r.done; r = await it.next()) {
    if (r.value.usage) usage = r.value.usage;
    else if (r.value.choices[0].finish_reason) finish = r.value.choices[0].finish_reason;
  }
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 300);
  assert.equal((await exited).code, 0, srv.log);
  assert.deepEqual(shmLeft(srv.session), []);
});

test('SIGTERM past --grace: the stream ends with an error event, exit 0', async () => {
  const { srv, client } = await serve(['--grace', '0', '-c', '4096']);
  const s = await openStream(client, 2);
  const exited = stopServer(srv);
  const e = await failure((async () => { for (;;) if ((await s.it.next()).done) return; })());
  assert.match(String(e.message), /shutting down/);
  assert.equal((await exited).code, 0, srv.log);
  assert.deepEqual(shmLeft(srv.session), []);
});

test('nscompute SIGKILLed: the request fails, the server exits 1 leaving nothing', async () => {
  const { srv, client } = await serve(['-c', '4096']);
  const s = await openStream(client, 2);
  process.kill(childPid(srv, 'nscompute'), 'SIGKILL');
  const e = await failure((async () => { for (;;) if ((await s.it.next()).done) return; })());
  assert.match(String(e.message), /nscompute/);
  const { code } = await new Promise((r) => (srv.exited ? r(srv.exited)
    : srv.proc.on('exit', (c, sig) => r({ code: c, sig }))));
  assert.equal(code, 1, srv.log);
  assert.match(srv.log, /the pipeline is gone/);
  assert.deepEqual(shmLeft(srv.session), []);
});
