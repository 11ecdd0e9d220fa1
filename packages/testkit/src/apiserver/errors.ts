import type { ResourceType } from './resources.js';

export type StatusReason =
  | 'BadRequest'
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Invalid'
  | 'Gone'
  | 'Expired'
  | 'MethodNotAllowed'
  | 'UnsupportedMediaType'
  | 'NotAcceptable'
  | 'InternalError'
  | 'ServiceUnavailable'
  | 'Unauthorized'
  | 'Forbidden'
  | 'TooManyRequests'
  | 'Timeout'
  | 'RequestEntityTooLarge'
  | 'Unknown';

export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
}

/** A meta/v1 Status object, the body of every error response. */
export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message: string;
  reason?: StatusReason;
  details?: StatusDetails;
  code: number;
}

/** An API failure that becomes a Status response with the same code and reason a real API server sends. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: StatusReason;
  readonly details: StatusDetails | undefined;

  constructor(code: number, reason: StatusReason, message: string, details?: StatusDetails) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): Status {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

function qualifiedResource(resource: ResourceType): string {
  return resource.group === '' ? resource.plural : `${resource.plural}.${resource.group}`;
}

function resourceDetails(resource: ResourceType, name: string): StatusDetails {
  return { name, ...(resource.group ? { group: resource.group } : {}), kind: resource.plural };
}

export function notFound(resource: ResourceType, name: string): ApiError {
  return new ApiError(404, 'NotFound', `${qualifiedResource(resource)} "${name}" not found`, resourceDetails(resource, name));
}

export function alreadyExists(resource: ResourceType, name: string): ApiError {
  return new ApiError(
    409,
    'AlreadyExists',
    `${qualifiedResource(resource)} "${name}" already exists`,
    resourceDetails(resource, name),
  );
}

export function conflict(resource: ResourceType, name: string): ApiError {
  return new ApiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedResource(resource)} "${name}": ` +
      'the object has been modified; please apply your changes to the latest version and try again',
    resourceDetails(resource, name),
  );
}

export function invalid(resource: ResourceType, name: string, causes: StatusCause[]): ApiError {
  const summary = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message)).join(', ');
  return new ApiError(422, 'Invalid', `${resource.kind} "${name}" is invalid: ${summary}`, {
    ...resourceDetails(resource, name),
    kind: resource.kind,
    causes,
  });
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, 'BadRequest', message);
}

export function requestEntityTooLarge(limitBytes: number): ApiError {
  return new ApiError(413, 'RequestEntityTooLarge', `Request entity too large: limit is ${limitBytes}`);
}

export function expired(message: string): ApiError {
  return new ApiError(410, 'Expired', message);
}

export function methodNotAllowed(method: string): ApiError {
  return new ApiError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${method})`);
}

/** kube-apiserver's answer to a request without valid credentials: `{"message": "Unauthorized", "code": 401}`. */
export function unauthorized(): ApiError {
  return new ApiError(401, 'Unauthorized', 'Unauthorized');
}

export function resourceNotFound(): ApiError {
  return new ApiError(404, 'NotFound', 'the server could not find the requested resource');
}

const reasonByCode: Record<number, StatusReason> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** An error with just a code, as the fault injector produces it. */
export function errorForCode(code: number, message: string): ApiError {
  return new ApiError(code, reasonByCode[code] ?? 'Unknown', message);
}
