import { ApiException } from '@kubernetes/client-node';

/** The HTTP status of a failed API call or watch, if it had one. */
export function statusCodeOf(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  if (typeof error === 'object' && error !== null) {
    const { statusCode, code } = error as { statusCode?: unknown; code?: unknown };
    if (typeof statusCode === 'number') return statusCode;
    if (typeof code === 'number') return code;
  }
  return undefined;
}

/**
 * A one-line description of a failed API call: the status code and the API server's own message (for example
 * `403 Forbidden: pods is forbidden: User "x" cannot list resource "pods"`) rather than client-node's multi-line
 * dump of headers.
 */
export function describeKubeError(error: unknown): string {
  if (error instanceof ApiException) {
    const status = parseStatus(error.body);
    const reason = status?.reason ? ` ${status.reason}` : '';
    const message = status?.message ?? (typeof error.body === 'string' && error.body ? error.body.slice(0, 300) : '');
    return `HTTP ${error.code}${reason}${message ? `: ${message}` : ''}`;
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    if (error.name === 'AbortError' || error.name === 'TimeoutError') return error.message || 'request aborted';
    return typeof code === 'string' && !error.message.includes(code) ? `${error.message} (${code})` : error.message;
  }
  return String(error);
}

interface StatusBody {
  reason?: string;
  message?: string;
}

function parseStatus(body: unknown): StatusBody | undefined {
  if (typeof body === 'object' && body !== null) return body as StatusBody;
  if (typeof body !== 'string' || !body.startsWith('{')) return undefined;
  try {
    return JSON.parse(body) as StatusBody;
  } catch {
    return undefined;
  }
}
