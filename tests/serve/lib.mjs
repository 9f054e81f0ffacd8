// lib.mjs - helpers of the tests/serve Node tests: the build's programs, model copies with a
// chat template, a server started and stopped per test file, token ids from nsctl tokenize.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const BUILD = process.env.NS_BUILD_ROOT;
export const ORACLE = process.env.NS_ORACLE_DIR;
export const NSCTL = join(BUILD, 'nsctl', 'nsctl');
const MODEL_TOOL = join(BUILD, 'tests', 'serve', 'serve_model');

// The oracle file rel, or a failure (the wrapper turns a missing oracle into a skip outside CI).
export function oracle(rel) {
  const p = join(ORACLE, rel);
  if (!existsSync(p)) throw new Error(`oracle file missing: ${p}`);
  return p;
}

const made = [];
// A copy of an oracle model with a chat template of family (qwen3, gptoss, llama3); removed
// when the process exits. The server names the model after the file: name.gguf -> name.
export function templated(rel, family, name) {
  const dst = join(tmpdir(), `${name}-${process.pid}.gguf`);
  execFileSync(MODEL_TOOL, [oracle(rel), dst, family]);
  made.push(dst);
  return { path: dst, id: `${name}-${process.pid}` };
}
process.on('exit', () => {
  for (const f of made) try { unlinkSync(f); } catch { /* gone already */ }
});

// Token ids of text as nsctl tokenize gives them (args: --chat, --add-special, ...).
export function tokenize(model, text, args = []) {
  const out = execFileSync(NSCTL, ['tokenize', model, '--json', ...args, '--', text]);
  return JSON.parse(out.toString()).ids;
}

// Start `nsctl serve model args` on a free port; resolves once it listens.
export function startServer(model, args = [], env = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(NSCTL, ['serve', model, '--port', '0', '--no-plan', '--threads', '1',
      '-c', '512', ...args], { stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env } });
    const srv = { proc, log: '', url: null, session: null, exited: null };
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${srv.log}`)),
      60000);
    proc.stderr.on('data', (d) => {
      srv.log += d.toString();
      const m = srv.log.match(/listening on (http:\/\/[^ ]+\/v1)/);
      if (m && !srv.url) {
        srv.url = m[1];
        srv.session = srv.log.match(/session ([A-Za-z0-9_]+):/)[1];
        clearTimeout(timer);
        resolve(srv);
      }
    });
    proc.on('exit', (code, sig) => {
      srv.exited = { code, sig };
      if (!srv.url) {
        clearTimeout(timer);
        reject(new Error(`server exited (${code}, ${sig}) before listening:\n${srv.log}`));
      }
    });
  });
}

// The pid a server printed for one of its children ("nsio pid N").
export function childPid(srv, name) {
  const m = srv.log.match(new RegExp(`${name} pid (\\d+)`));
  return m ? Number(m[1]) : 0;
}

// The pid of a child as nsctl ps lists it now (after restarts too), 0 if none.
export function livePid(srv, name) {
  const all = JSON.parse(execFileSync(NSCTL, ['ps', '--json']).toString());
  const s = all.find((x) => x.session === srv.session);
  const p = s ? s.procs.find((x) => x.name === name && x.alive) : null;
  return p ? p.pid : 0;
}

// SIGTERM the server and wait for its exit: { code, sig }.
export function stopServer(srv, sig = 'SIGTERM') {
  if (srv.exited) return Promise.resolve(srv.exited);
  return new Promise((resolve) => {
    srv.proc.on('exit', (code, s) => resolve({ code, sig: s }));
    srv.proc.kill(sig);
  });
}

// /dev/shm entries of a session.
export function shmLeft(session) {
  return readdirSync('/dev/shm').filter((n) => n.includes(session));
}

// The generated token ids of a completion or chat response with logprobs, through the
// tokens' bytes: each entry's bytes, joined per token, as a comparable list of strings.
export function tokenTrail(choice) {
  const lp = choice.logprobs;
  if (lp && lp.content) return lp.content.map((e) => Buffer.from(e.bytes).toString('hex'));
  return lp.tokens.slice();
}
