import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { deadlineSignal } from './deadline-signal.js';
import { KubeRequestTimeoutError } from './request-options.js';

/** One page of a list, as JSON: its items are not read yet, so that one bad item cannot fail the page. */
export interface RawListPage {
  resourceVersion: string;
  continueToken: string | undefined;
  items: unknown[];
}

/** A list request the API server refused. `statusCode` is the HTTP status (410 for an expired continue token). */
export class ListError extends Error {
  constructor(
    message: string,
    readonly statusCode: number,
  ) {
    super(message);
    this.name = 'ListError';
  }
}

const MAX_ERROR_BODY = 64 * 1024;

/**
 * Lists one page of a resource over HTTP and returns its items as plain JSON. The informers do not use client-node's
 * generated list methods because those deserialize the whole page at once: one item with a field of the wrong type
 * (a number where a list belongs) makes the page throw, and with it every relist, so the informer would never sync.
 */
export async function listPage(
  kubeConfig: KubeConfig,
  path: string,
  query: Record<string, string | number | undefined>,
  what: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<RawListPage> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('the Kubernetes client configuration has no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + path);
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') url.searchParams.set(key, String(value));
  }
  const requestOptions: https.RequestOptions & { headers?: Record<string, string> } = {};
  await kubeConfig.applyToHTTPSOptions(requestOptions);

  const deadline = deadlineSignal(timeoutMs, signal);
  const transport = url.protocol === 'https:' ? https : http;
  let body: { statusCode: number; statusMessage: string; text: string };
  try {
    body = await new Promise((resolve, reject) => {
      const request = transport.request(url, {
        method: 'GET',
        headers: { ...requestOptions.headers, Accept: 'application/json' },
        ...(requestOptions.agent !== undefined && { agent: requestOptions.agent }),
        ...(requestOptions.auth !== undefined && { auth: requestOptions.auth }),
        signal: deadline.signal,
      });
      request.on('error', reject);
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const ok = response.statusCode === 200;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (ok || size <= MAX_ERROR_BODY) chunks.push(chunk);
        });
        response.on('error', reject);
        response.on('end', () =>
          resolve({
            statusCode: response.statusCode ?? 0,
            statusMessage: response.statusMessage ?? '',
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      });
      request.end();
    });
  } catch (error) {
    if (deadline.timedOut()) throw new KubeRequestTimeoutError(what, timeoutMs);
    throw error;
  } finally {
    deadline.dispose();
  }

  if (body.statusCode !== 200) throw listResponseError(body.statusCode, body.statusMessage, body.text);
  let list: unknown;
  try {
    list = JSON.parse(body.text);
  } catch {
    throw new Error(`${what}: the API server's answer is not JSON: ${body.text.slice(0, 200)}`);
  }
  if (!isPlainObject(list)) throw new Error(`${what}: the API server's answer is not a list object`);
  const metadata = isPlainObject(list.metadata) ? list.metadata : {};
  if (list.items !== undefined && list.items !== null && !Array.isArray(list.items)) {
    throw new Error(`${what}: the API server's answer has no list of items`);
  }
  return {
    resourceVersion: typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : '',
    continueToken: typeof metadata.continue === 'string' && metadata.continue !== '' ? metadata.continue : undefined,
    items: (list.items as unknown[] | null | undefined) ?? [],
  };
}

/** `HTTP 403 Forbidden: <the API server's message>`, the form describeKubeError gives client-node's errors. */
function listResponseError(statusCode: number, statusMessage: string, body: string): ListError {
  let message = '';
  let reason = statusMessage;
  try {
    const status = JSON.parse(body) as { message?: unknown; reason?: unknown };
    if (typeof status.reason === 'string' && status.reason) reason = status.reason;
    if (typeof status.message === 'string') message = status.message;
  } catch {
    message = body.trim().slice(0, 300);
  }
  return new ListError(`HTTP ${statusCode}${reason ? ` ${reason}` : ''}${message ? `: ${message}` : ''}`, statusCode);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
