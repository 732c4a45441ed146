// Load check of the OpenAI front (not a unit test: it prints figures as JSON):
// N concurrent streaming chat completions against one gemma-serve, in
// several rounds; reports errors, the server's thread count and resident
// memory after each round (flat memory: later rounds do not grow).
// Usage: node load_check.cjs --serve <gemma-serve> --model <dir> [--streams 1000] [--rounds 3]
'use strict';
const fs = require('node:fs');
const { startServe, argValue } = require('./serve_process.cjs');

function optional(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

function procStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (k) => Number((text.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) || [])[1]);
  return { threads: field('Threads'), rss_kb: field('VmRSS') };
}

async function oneStream(baseURL, i) {
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: `Fortune ${i}` }], max_tokens: 4,
                           temperature: 0, ignore_eos: true, stream: true }),
  });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  const body = await res.text();
  if (!body.endsWith('data: [DONE]\n\n')) throw new Error(`no [DONE]: ${body.slice(-200)}`);
  if (body.includes('"error"')) throw new Error(`error event: ${body.slice(-300)}`);
}

async function main() {
  const streams = optional('--streams', 1000);
  const rounds = optional('--rounds', 3);
  const { child, baseURL } = await startServe(argValue('--serve'), argValue('--model'),
      ['--max-queue', String(streams * 2), '--max-concurrent-sequences', '64']);
  const results = { streams, rounds: [] };
  try {
    results.idle = procStatus(child.pid);
    for (let r = 0; r < rounds; ++r) {
      let peakThreads = 0;
      const sampler = setInterval(() => {
        peakThreads = Math.max(peakThreads, procStatus(child.pid).threads);
      }, 100);
      const start = Date.now();
      const outcomes = await Promise.allSettled(
          Array.from({ length: streams }, (_, i) => oneStream(baseURL, i)));
      clearInterval(sampler);
      const errors = outcomes.filter((o) => o.status === 'rejected');
      const after = procStatus(child.pid);
      results.rounds.push({ seconds: (Date.now() - start) / 1000, errors: errors.length,
                            first_error: errors[0] ? String(errors[0].reason) : null,
                            peak_threads: peakThreads, ...after });
    }
  } finally {
    child.kill('SIGTERM');
  }
  console.log(JSON.stringify(results, null, 1));
  const ok = results.rounds.every((r) => r.errors === 0);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => { console.error(e); process.exit(1); });
