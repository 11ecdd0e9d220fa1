/* global process, console, performance, setTimeout */
// Runs inside the bench's client network namespace. Reads {targets: ["ip:port", ...], concurrency, timeoutMs,
// untilMs} as JSON from stdin (10,000 targets are too long for one argument), opens one TCP connection to each target
// (at most <concurrency> at once) and reads the first line; a target that fails is tried again (after 50 ms) until it
// answers or untilMs has passed since the start. Prints {answered, failed (the first 10), failedCount, ms,
// lastAnswerMs}.
import { connect } from 'node:net';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { targets, concurrency = 200, timeoutMs = 2_000, untilMs = 0 } = JSON.parse(input);
const started = performance.now();
let answered = 0;
let lastAnswerMs = 0;
const failed = [];

function once(target) {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.setTimeout(timeoutMs);
    let data = '';
    socket.on('data', (chunk) => {
      data += chunk;
      if (data.includes('\n')) {
        socket.destroy();
        resolve(undefined);
      }
    });
    socket.on('timeout', () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.on('error', (error) => resolve(error.code ?? error.message));
    socket.on('close', () => resolve(data.includes('\n') ? undefined : 'closed without a reply'));
  });
}

async function probe(target) {
  for (;;) {
    const error = await once(target);
    if (error === undefined) {
      answered++;
      lastAnswerMs = performance.now() - started;
      return;
    }
    if (performance.now() - started >= untilMs) {
      failed.push({ target, error });
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

let next = 0;
async function worker() {
  while (next < targets.length) await probe(targets[next++]);
}
await Promise.all(Array.from({ length: Math.min(concurrency, targets.length) }, worker));
console.log(JSON.stringify({ answered, failed: failed.slice(0, 10), failedCount: failed.length, ms: Math.round(performance.now() - started), lastAnswerMs: Math.round(lastAnswerMs) }));
