/* global process, console, setTimeout */
// Runs inside a client network namespace: `probe.mjs <ip> <port> <count> [hold-ms]` opens <count> TCP connections one
// after another and prints a JSON array of the first line each got back ("<pod> <client address>", or "error: ...").
// With hold-ms the connections stay open that long before they are closed.
import { connect } from 'node:net';

const [host, port, count, holdMs] = process.argv.slice(2);
const answers = [];
const held = [];
for (let i = 0; i < Number(count); i++) {
  answers.push(
    await new Promise((resolve) => {
      const socket = connect({ host, port: Number(port) });
      socket.setTimeout(3000);
      let data = '';
      socket.on('data', (chunk) => {
        data += chunk;
        if (data.includes('\n')) {
          socket.setTimeout(0);
          resolve(data.trim());
          if (holdMs) held.push(socket);
          else socket.end();
        }
      });
      socket.on('timeout', () => {
        resolve('error: timeout');
        socket.destroy();
      });
      socket.on('error', (error) => resolve(`error: ${error.code ?? error.message}`));
    }),
  );
}
console.log(JSON.stringify(answers));
if (holdMs) {
  await new Promise((resolve) => setTimeout(resolve, Number(holdMs)));
  for (const socket of held) socket.end();
}
