/** Locale-independent ordering, so that sorted output is the same on every machine. */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Sorted as compareText sorts, by UTF-16 code units: that is what sort() does for strings without a comparator, and
 * without calling back into JavaScript for each comparison.
 */
export function sortedUnique(values: Iterable<string>): string[] {
  return [...new Set(values)].sort();
}
