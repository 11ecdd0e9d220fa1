/* global process */
// Preloaded (`node --expose-gc --import`) into an agent under measurement: on SIGUSR2 it collects all garbage and
// prints the heap and RSS left on one stderr line, which MeasuredAgent reads. Without it, the heap an agent reports
// is live objects plus whatever garbage the collector has not reached yet, too noisy to find a leak in. Plain
// JavaScript, so that it also loads into an agent bundled and run without tsx (bundleAgent).
process.on('SIGUSR2', () => {
  const collect = globalThis.gc;
  if (!collect) {
    process.stderr.write('gc-on-signal: node was started without --expose-gc\n');
    return;
  }
  // Twice: the first pass runs finalizers whose objects the second one frees.
  collect();
  collect();
  const { heapUsed, rss } = process.memoryUsage();
  process.stderr.write(`gc-on-signal ${JSON.stringify({ heapUsedBytes: heapUsed, rssBytes: rss })}\n`);
});
