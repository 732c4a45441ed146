// Starts gemma-serve with the OpenAI front on a free port and resolves with
// {child, baseURL} once it serves. Shared by the SDK test and the load check.
'use strict';
const { spawn } = require('node:child_process');

function startServe(serve, model, extraArgs = []) {
  const args = ['--model', model, '--backend', 'cpu', '--host', '127.0.0.1', '--port', '0',
                '--http-port', '0', '--metrics-port', '-1', ...extraArgs];
  const child = spawn(serve, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let port = 0;
    let output = '';
    const onData = (data) => {
      output += data.toString();
      const m = output.match(/OpenAI-compatible API on https?:\/\/[^:]+:(\d+)\/v1/);
      if (m) port = Number(m[1]);
      if (port && /listening on/.test(output)) {
        resolve({ child, baseURL: `http://127.0.0.1:${port}/v1`, port });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`gemma-serve exited ${code}:\n${output}`)));
    // unref: a started server's test must not wait for this timer.
    setTimeout(() => reject(new Error(`gemma-serve did not start:\n${output}`)), 120000).unref();
  });
}

function argValue(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error(`missing ${name}`);
  return process.argv[i + 1];
}

module.exports = { startServe, argValue };
