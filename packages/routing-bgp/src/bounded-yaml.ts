import { Parser, type CST } from 'yaml';

/**
 * What YAML from an annotation may cost before it reaches the recursive composer of the yaml library. About 900
 * nested brackets in a 2 KB Node annotation ended the process: the composer recurses per level, and V8 compiling a
 * regexp with the stack nearly full fails with a fatal OOM that no try/catch sees. The annotation is read on every
 * sync, so the agent crash-looped and took the firewall, proxy and routing with it.
 */
export interface YamlBounds {
  /** UTF-8 bytes. */
  maxBytes: number;
  /** Collections inside collections: a list of peer mappings is 2. */
  maxDepth: number;
}

/**
 * Why `text` is refused before it is parsed, undefined when it is within bounds. The depth is measured on the yaml
 * library's CST, which its Parser builds with a stack of its own (no recursion), walked here with an explicit one.
 */
export function yamlBoundsProblem(text: string, bounds: YamlBounds): string | undefined {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > bounds.maxBytes) return `is ${bytes} bytes long, more than the ${bounds.maxBytes} allowed`;
  const pending: [CST.Token, number][] = [];
  for (const token of new Parser().parse(text)) pending.push([token, 0]);
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [token, depth] = next;
    if (depth > bounds.maxDepth) return `nests collections deeper than the ${bounds.maxDepth} levels allowed`;
    if (token.type === 'document' && token.value) pending.push([token.value, depth]);
    if (token.type === 'block-map' || token.type === 'block-seq' || token.type === 'flow-collection') {
      for (const item of token.items) {
        if (item.key) pending.push([item.key, depth + 1]);
        if (item.value) pending.push([item.value, depth + 1]);
      }
    }
  }
  return undefined;
}
