#!/usr/bin/env python3
"""bench_serve.py - nsctl serve's batched decoding on a streamed model: aggregate decode tok/s
and weight bytes read per generated token at 1, 2, 4 and 8 concurrent streams, against the
single stream and the drive roofline measured in the same run.

    bench/serve/bench_serve.py [--build build] [--model M.gguf] [--streams 1,2,4,8]
                               [--tokens 8] [--mem-budget 256MB] [--threads 0]

Without --model it writes `nsctl mkmodel --preset qwen3-8b --layers 8 --quant q4_k_m`
(random weights, real shapes; ~1.5 GB) next to the build. The server runs with --ram-budget 0
and a small --mem-budget: every weight streams from the drive through nsio at every step, so
one step costs one pass over the weights whatever the number of sequences in it.

Per configuration of N streams: N streamed completions (greedy, ignore_eos, short prompts)
start together. The decode window runs from the moment every stream has its first token to
the moment the first one ends; aggregate tok/s = tokens all streams received in the window /
its length, GB/token = nsio's bytes requested over the window (nsctl ps) / those tokens.
Roofline: the drive's O_DIRECT rate (ns_diskbw, 1 MiB reads at queue depth 16, median of 3,
measured before the configurations) over the bytes one step reads (GB/token of 1 stream):
the single stream's limit; N streams sharing each step's pass may reach N times it.
A second pass runs the same configurations with every weight resident (--ram-budget
--resident-budget): the compute limit of each, so a table whose streamed rates sit at it says
the step is bound by the CPU, not the drive.
Prints a markdown table; the target is aggregate(4) >= 3 x aggregate(1)."""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def drive_gbps(build, model):
    out = run([os.path.join(build, 'bench', 'ns_diskbw'), model, '--block-bytes', '1MB',
               '--queue-depth', '16', '--repeats', '3']).stdout
    m = re.search(r'([0-9.]+) GB/s', out)
    if not m:
        sys.exit(f'bench_serve: cannot read ns_diskbw output: {out}')
    return float(m.group(1))


def nsio_bytes(nsctl, session):
    for s in json.loads(run([nsctl, 'ps', '--json']).stdout):
        if s['session'] == session:
            return s['nsio']['bytes_requested']
    sys.exit(f'bench_serve: session {session} not in nsctl ps')


class Stream(threading.Thread):
    """One streamed completion; records when each chunk with text arrived."""

    def __init__(self, url, model, prompt, tokens):
        super().__init__()
        self.body = json.dumps({'model': model, 'prompt': prompt, 'max_tokens': tokens,
                                'temperature': 0, 'ignore_eos': True, 'stream': True,
                                'logprobs': 0}).encode()
        self.url = url
        self.times = []  # one per generated token (logprobs entries)
        self.error = None

    def run(self):
        try:
            req = urllib.request.Request(self.url + '/completions', data=self.body,
                                         headers={'Content-Type': 'application/json'})
            with urllib.request.urlopen(req, timeout=3600) as r:
                for line in r:
                    line = line.decode().strip()
                    if not line.startswith('data: ') or line == 'data: [DONE]':
                        continue
                    c = json.loads(line[6:])
                    lp = c['choices'][0].get('logprobs')
                    now = time.monotonic()
                    self.times += [now] * (len(lp['tokens']) if lp else 0)
        except Exception as e:  # reported by the caller
            self.error = e


def config(url, model_id, nsctl, session, n, tokens):
    # the streams join one prefill per step: each runs tokens steps beyond the last join
    streams = [Stream(url, model_id, f'Stream {i} says', tokens + n) for i in range(n)]
    marks = {}

    def watch():
        # nsio's counter at the window's edges: all streams started, the first one done
        while not all(s.times for s in streams):
            time.sleep(0.005)
        marks['b0'], marks['t0'] = nsio_bytes(nsctl, session), time.monotonic()
        while all(s.is_alive() for s in streams):
            time.sleep(0.005)
        marks['b1'], marks['t1'] = nsio_bytes(nsctl, session), time.monotonic()

    w = threading.Thread(target=watch)
    for s in streams:
        s.start()
    w.start()
    for s in streams:
        s.join()
    w.join()
    for s in streams:
        if s.error:
            sys.exit(f'bench_serve: a stream failed: {s.error}')
    t0, t1 = marks['t0'], marks['t1']
    toks = sum(1 for s in streams for t in s.times if t0 < t <= t1)
    if os.environ.get('BENCH_SERVE_DEBUG'):
        print(f'debug n={n}: window {t0:.3f}..{t1:.3f}, times ' +
              ' '.join(str([round(t - t0, 3) for t in s.times]) for s in streams),
              file=sys.stderr)
    if toks == 0 or t1 <= t0:
        sys.exit('bench_serve: empty decode window (raise --tokens)')
    return toks / (t1 - t0), (marks['b1'] - marks['b0']) / toks / 1e9, toks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default='build')
    ap.add_argument('--model')
    ap.add_argument('--streams', default='1,2,4,8')
    ap.add_argument('--tokens', type=int, default=8,
                    help='decode steps with every stream in (each stream asks for N more)')
    ap.add_argument('--mem-budget', default='256MB')
    ap.add_argument('--threads', default='0')
    ap.add_argument('--resident-budget', default='4GB',
                    help='RAM budget of the second pass (every weight resident: the '
                         'compute limit of each configuration); 0: skip it')
    ap.add_argument('--extra', default='', help='more flags for nsctl serve (--act q8)')
    a = ap.parse_args()
    nsctl = os.path.join(a.build, 'nsctl', 'nsctl')
    counts = [int(x) for x in a.streams.split(',')]
    model = a.model
    if not model:
        model = os.path.join(a.build, 'bench-serve-qwen3-8b-l8.gguf')
        if not os.path.exists(model):
            run([nsctl, 'mkmodel', '--preset', 'qwen3-8b', '--layers', '8', '--quant',
                 'q4_k_m', '-o', model])
    gbps = drive_gbps(a.build, model)
    rows = serve_configs(nsctl, model, counts, a, ['--mem-budget', a.mem_budget,
                                                   '--ram-budget', '0'])
    # the compute limit of the same configurations: every weight resident, no drive
    resident = serve_configs(nsctl, model, counts, a, ['--ram-budget', a.resident_budget]) \
        if a.resident_budget != '0' else None
    report(model, a, gbps, rows, resident)


def serve_configs(nsctl, model, counts, a, budgets):
    """Start a server with these budgets, run every configuration, stop it."""
    srv = subprocess.Popen([nsctl, 'serve', model, '--port', '0', '--parallel',
                            str(max(counts)), '-c', '256', '--threads', a.threads,
                            *budgets, *a.extra.split()],
                           stderr=subprocess.PIPE, text=True)
    log = ''
    try:
        for line in srv.stderr:
            log += line
            m = re.search(r'listening on (http://\S+/v1)', line)
            if m:
                url = m.group(1)
                break
        else:
            sys.exit(f'bench_serve: the server did not start:\n{log}')
        session = re.search(r'session ([A-Za-z0-9_]+):', log).group(1)
        model_id = json.loads(urllib.request.urlopen(url + '/models').read())['data'][0]['id']
        threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
        config(url, model_id, nsctl, session, 1, 3)  # warm: first requests, page tables
        rows = []
        for n in counts:
            rows.append((n, *config(url, model_id, nsctl, session, n, a.tokens)))
    finally:
        srv.terminate()
        srv.wait(timeout=60)
    return rows


def report(model, a, gbps, rows, resident):
    single_rate, single_gb = rows[0][1], rows[0][2]
    roof1 = gbps / single_gb if single_gb > 0 else float('inf')
    print(f'model {model} ({os.path.getsize(model) / 1e9:.2f} GB), --mem-budget '
          f'{a.mem_budget} --ram-budget 0 {a.extra}; drive {gbps:.3f} GB/s (ns_diskbw, 1 MiB, '
          f'QD 16); single-stream roofline {roof1:.3f} tok/s')
    print('| streams | aggregate tok/s | x single | GB/token | tokens in window | '
          'drive roofline tok/s (N x single) | ratio | resident tok/s | ratio |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for i, (n, rate, gb, toks) in enumerate(rows):
        res = resident[i][1] if resident else float('nan')
        print(f'| {n} | {rate:.3f} | {rate / single_rate:.2f} | {gb:.3f} | {toks} | '
              f'{n * roof1:.3f} | {rate / (n * roof1):.2f} | {res:.3f} | {rate / res:.2f} |')
    four = [r for r in rows if r[0] == 4]
    if four:
        x = four[0][1] / single_rate
        print(f'4 streams: {x:.2f} x the single stream (target >= 3): '
              f'{"met" if x >= 3 else "not met"}')


if __name__ == '__main__':
    main()
