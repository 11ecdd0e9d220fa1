/**
 * A foreign writer's process (startForeignWriterProcess), started inside the namespace it writes: `<writer name>
 * <seed>`. Prints `started` once its objects exist, `w` for each write, and `report <json>` once its stdin closes, then
 * exits.
 */
import { nftWriter } from './foreign-writer-nft.js';
import { ipsetAndIptablesWriter } from './foreign-writer-xtables.js';

const [name, seed] = process.argv.slice(2);
const writer = [ipsetAndIptablesWriter, nftWriter].find((candidate) => candidate.name === name);
if (!writer || seed === undefined) {
  console.error(`usage: foreign-writer-main <${[ipsetAndIptablesWriter, nftWriter].map((known) => known.name).join('|')}> <seed>`);
  process.exit(2);
}
const running = await writer.start(undefined, Number(seed), () => process.stdout.write('w\n'));
process.stdout.write('started\n');
process.stdin.resume();
process.stdin.once('end', () => {
  void running.stop().then((report) => {
    process.stdout.write(`report ${JSON.stringify(report)}\n`, () => process.exit(0));
  });
});
