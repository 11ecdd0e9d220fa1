import { randomUUID } from 'node:crypto';

// The alphabet and length Kubernetes uses for generateName suffixes (no vowels, no look-alike characters).
const suffixAlphabet = 'bcdfghjklmnpqrstvwxz2456789';

export function generateNameSuffix(): string {
  let suffix = '';
  for (let i = 0; i < 5; i++) suffix += suffixAlphabet[Math.floor(Math.random() * suffixAlphabet.length)];
  return suffix;
}

export function newUid(): string {
  return randomUUID();
}

/** RFC 3339 at second precision, the form metav1.Time serializes to. */
export function nowTimestamp(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, 'Z');
}

// Fields a client may not set or change; the server owns them.
export const serverOwnedMetadata = ['uid', 'creationTimestamp', 'generation', 'resourceVersion', 'selfLink', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'managedFields'] as const;
