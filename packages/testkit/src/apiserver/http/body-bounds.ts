import { Lexer, Parser } from 'yaml';

/** kube-apiserver's limit on a request body (MaxRequestBodyBytes, 3 MiB). */
export const maxRequestBodyBytes = 3 * 1024 * 1024;

/**
 * How deeply a request body may nest arrays and objects. kube-apiserver allows 10,000 levels of JSON; this server's
 * code past the parser (schema validation, patches, structuredClone) recurses per level and overflowed its stack
 * between 1,000 and 2,000, and the yaml library's composer from about 800 (at about 900 with the stack nearly full,
 * V8 died with a fatal "RegExpCompiler Allocation failed" that no try/catch sees). No Kubernetes object comes near
 * 200 levels; at 200 both parsers and everything after them keep most of the stack free.
 */
export const maxBodyNestingDepth = 200;

/**
 * Whether JSON `text` opens more than `maxDepth` arrays and objects at once. One pass without recursion that stops at
 * the first level too many; brackets inside strings do not count. Malformed text is JSON.parse's to refuse.
 */
export function jsonNestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (inString) {
      if (char === 0x5c /* \ */) i++;
      else if (char === 0x22 /* " */) inString = false;
    } else if (char === 0x22) {
      inString = true;
    } else if (char === 0x5b /* [ */ || char === 0x7b /* { */) {
      if (++depth > maxDepth) return true;
    } else if (char === 0x5d /* ] */ || char === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}

const collectionTypes = new Set(['block-map', 'block-seq', 'flow-collection']);

/**
 * Whether YAML `text` nests collections (block or flow) more than `maxDepth` deep. The yaml library's Lexer and
 * Parser keep their own stack of open tokens instead of recursing, so they are driven one lexeme at a time and
 * stopped at the first level too many, before its recursive composer sees the text. Besides collections the stack
 * holds the document and at most one scalar, so collections are counted only when it is near the bound.
 */
export function yamlNestsDeeperThan(text: string, maxDepth: number): boolean {
  const parser = new Parser();
  for (const lexeme of new Lexer().lex(text)) {
    for (const _token of parser.next(lexeme)) {
      // Finished documents are of no interest here; only the stack of open tokens is.
    }
    if (parser.stack.length > maxDepth && parser.stack.filter((token) => collectionTypes.has(token.type)).length > maxDepth) return true;
  }
  return false;
}
