/**
 * Splits a line the way iptables-save quotes it: words separated by spaces, double quotes around words that contain
 * spaces, backslash escaping `"` and `\` inside them.
 */
export function splitWords(line: string): string[] {
  const words: string[] = [];
  let current = '';
  let inWord = false;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const char = line[i] as string;
    if (quoted) {
      if (char === '\\' && i + 1 < line.length) current += line[++i];
      else if (char === '"') quoted = false;
      else current += char;
    } else if (char === '"') {
      quoted = true;
      inWord = true;
    } else if (char === ' ' || char === '\t') {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
    } else {
      current += char;
      inWord = true;
    }
  }
  if (inWord) words.push(current);
  return words;
}
