import { parseIp } from '@kube-router/kube';

/**
 * The input readers every part of the routing controller shares, with the rules kube-router (Go) applies, so that an
 * annotation or option reads the same here as there.
 */

/**
 * The canonical text of an address as kube's parseIp reads it (`::ffff:10.0.0.1` is `10.0.0.1`, `fd00:0::1` is
 * `fd00::1`, `::1.2.3.4` is `::102:304`); other text as it is, so that it matches no address.
 */
export function canonicalAddress(text: string): string {
  return parseIp(text)?.text ?? text;
}

// Go's strconv.ParseUint with base 0: 0x hex, 0o or a leading 0 octal, 0b binary, else decimal; `_` only between digits.
const GO_UINT = /^(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|0(?:_?[0-7])*|[1-9](?:_?\d)*)$/;

/**
 * A number as Go's strconv.ParseUint(text, 0, bits) reads it, which kube-router uses for ASNs, cluster ids and repeat
 * counts; undefined when it does not parse or exceeds `bits`. Unlike Number(), `1e3`, `1.0`, ` 7` or `-1` are refused.
 */
export function parseGoUint(text: string, bits: 8 | 16 | 32): number | undefined {
  if (!GO_UINT.test(text)) return undefined;
  const digits = text.replaceAll('_', '');
  const value = /^0[oO]/.test(digits)
    ? BigInt(`0o${digits.slice(2)}`)
    : /^0\d/.test(digits)
      ? BigInt(`0o${digits.slice(1)}`)
      : BigInt(digits);
  return value <= (1n << BigInt(bits)) - 1n ? Number(value) : undefined;
}

/** kube-router's comma-separated annotation lists: items trimmed, empty ones dropped. */
export function splitList(value: string | undefined): string[] {
  return (value ?? '').split(',').map((item) => item.trim()).filter(Boolean);
}
