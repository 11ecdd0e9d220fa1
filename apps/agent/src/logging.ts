import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import type { AgentConfig } from './config.js';

/**
 * The agent's logger: JSON lines by default (what log collectors parse), or pino-pretty's readable lines with
 * --log-format=text for people reading by eye. Every line carries the node's name.
 */
export function createLogger(config: Pick<AgentConfig, 'logging' | 'nodeName'>, destination?: DestinationStream): Logger {
  const options = { level: config.logging.level, base: { node: config.nodeName } };
  if (config.logging.format === 'json') return pino(options, destination);
  // Synchronous, like pino's default destination, so that the last lines before an exit are not lost.
  return pino(options, pretty({ destination: destination ?? 1, colorize: false, sync: true, ignore: 'pid,hostname' }));
}
