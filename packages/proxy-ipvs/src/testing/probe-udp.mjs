/* global process, console, setTimeout, clearTimeout */
// Runs inside a client network namespace: `probe-udp.mjs <ip> <port> <count>` sends <count> datagrams, each from a
// new socket (a new source port), and prints a JSON array of the answers ("<pod> <client address>" or "error: ...").
// Each socket is connected, so that an ICMP port unreachable comes back as "error: ECONNREFUSED".
import { createSocket } from 'node:dgram';

const [host, port, count] = process.argv.slice(2);
const answers = [];
for (let i = 0; i < Number(count); i++) {
  answers.push(
    await new Promise((resolve) => {
      const socket = createSocket('udp4');
      const timer = setTimeout(() => {
        socket.close();
        resolve('error: timeout');
      }, 3000);
      const done = (answer) => {
        clearTimeout(timer);
        socket.close();
        resolve(answer);
      };
      socket.on('message', (message) => done(message.toString().trim()));
      socket.on('error', (error) => done(`error: ${error.code ?? error.message}`));
      socket.connect(Number(port), host, () => socket.send('ping'));
    }),
  );
}
console.log(JSON.stringify(answers));
