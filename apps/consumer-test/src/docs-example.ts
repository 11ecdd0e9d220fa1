/** The marker in docs/plugins.md before the custom agent's code block, which the tests compile. */
export const CUSTOM_AGENT_MARKER = '<!-- custom-agent-example';

/** The TypeScript of the first ```ts block after the marker; throws when the docs lack it. */
export function extractCustomAgentExample(markdown: string): string {
  const marker = markdown.indexOf(CUSTOM_AGENT_MARKER);
  if (marker < 0) throw new Error(`docs/plugins.md has no ${CUSTOM_AGENT_MARKER} marker`);
  const block = /```ts\n([\s\S]*?)\n```/.exec(markdown.slice(marker));
  if (!block?.[1]) throw new Error('docs/plugins.md has no ```ts block after the custom agent marker');
  return `${block[1]}\n`;
}

/** Lines of code in an example: what "an agent in about 15 lines" counts (no blank lines, no comment-only lines). */
export function codeLines(source: string): number {
  return source.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('//')).length;
}
