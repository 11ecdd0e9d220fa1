import { PolicyInputError, assertKnownFields, describeValue, isPlainObject } from './input-error.js';
import { compareText } from './sort.js';
import type { Labels } from './types.js';

export interface CompiledSelector {
  /** Canonical text of the selector: equal keys select the same objects. */
  readonly key: string;
  /** The empty selector, which selects everything. */
  readonly matchesAll: boolean;
  matches(labels: Labels): boolean;
}

type Requirement = (labels: Labels) => boolean;

const OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;
type Operator = (typeof OPERATORS)[number];

/**
 * Compiles a metav1.LabelSelector. matchLabels and matchExpressions are ANDed; `{}` selects everything. Throws a
 * PolicyInputError (with `path`) for a malformed selector or an unknown operator.
 */
export function compileLabelSelector(selector: unknown, path: string): CompiledSelector {
  if (!isPlainObject(selector))
    throw new PolicyInputError(path, `expected a label selector, got ${describeValue(selector)}`);
  assertKnownFields(selector, ['matchLabels', 'matchExpressions'], path);
  const requirements: Requirement[] = [];
  const keyParts: string[] = [];

  const matchLabels = selector.matchLabels ?? {};
  if (!isPlainObject(matchLabels)) {
    throw new PolicyInputError(`${path}.matchLabels`, `expected a map of labels, got ${describeValue(matchLabels)}`);
  }
  // Keys, not entries: every policy compiles a selector or two, and their pairs would be garbage at once.
  const labelKeys = Object.keys(matchLabels);
  if (labelKeys.length > 1) labelKeys.sort(compareText);
  for (const key of labelKeys) {
    const value = matchLabels[key];
    if (value === undefined) continue;
    if (key === '') throw new PolicyInputError(`${path}.matchLabels`, 'label key must not be empty');
    if (typeof value !== 'string') {
      throw new PolicyInputError(
        `${path}.matchLabels.${key}`,
        `label value must be a string, got ${describeValue(value)}`,
      );
    }
    requirements.push((labels) => labels[key] === value);
    keyParts.push(`${JSON.stringify(key)}=${JSON.stringify(value)}`);
  }

  const expressions = selector.matchExpressions ?? [];
  if (!Array.isArray(expressions)) {
    throw new PolicyInputError(`${path}.matchExpressions`, `expected a list, got ${describeValue(expressions)}`);
  }
  if (expressions.length > 0) {
    const expressionKeys: string[] = [];
    expressions.forEach((expression: unknown, index) => {
      const at = `${path}.matchExpressions[${index}]`;
      const { requirement, key } = compileRequirement(expression, at);
      requirements.push(requirement);
      expressionKeys.push(key);
    });
    keyParts.push(...expressionKeys.sort());
  }

  return {
    key: `{${keyParts.join(',')}}`,
    matchesAll: requirements.length === 0,
    // One requirement (one label, the usual selector) is the matcher itself.
    matches:
      requirements.length === 0
        ? () => true
        : requirements.length === 1
          ? (requirements[0] as Requirement)
          : (labels) => requirements.every((requirement) => requirement(labels)),
  };
}

function compileRequirement(expression: unknown, path: string): { requirement: Requirement; key: string } {
  if (!isPlainObject(expression))
    throw new PolicyInputError(path, `expected a requirement, got ${describeValue(expression)}`);
  assertKnownFields(expression, ['key', 'operator', 'values'], path);
  const { key, operator } = expression;
  const values = expression.values ?? [];
  if (typeof key !== 'string' || key === '')
    throw new PolicyInputError(`${path}.key`, 'key must be a non-empty string');
  if (typeof operator !== 'string' || !(OPERATORS as readonly string[]).includes(operator)) {
    throw new PolicyInputError(
      `${path}.operator`,
      `unsupported operator ${describeValue(operator)}; expected one of ${OPERATORS.join(', ')}`,
    );
  }
  if (!Array.isArray(values) || values.some((value) => typeof value !== 'string')) {
    throw new PolicyInputError(`${path}.values`, 'values must be a list of strings');
  }
  const set = new Set(values as string[]);
  const canonicalValues = [...set].sort();
  const canonical = `${JSON.stringify(key)} ${operator} ${JSON.stringify(canonicalValues)}`;
  switch (operator as Operator) {
    case 'In':
    case 'NotIn': {
      if (set.size === 0) throw new PolicyInputError(`${path}.values`, `operator ${operator} needs at least one value`);
      const requirement: Requirement =
        operator === 'In'
          ? (labels) => Object.hasOwn(labels, key) && set.has(labels[key] as string)
          : (labels) => !Object.hasOwn(labels, key) || !set.has(labels[key] as string);
      return { requirement, key: canonical };
    }
    case 'Exists':
    case 'DoesNotExist': {
      if (set.size > 0) throw new PolicyInputError(`${path}.values`, `operator ${operator} takes no values`);
      const requirement: Requirement =
        operator === 'Exists' ? (labels) => Object.hasOwn(labels, key) : (labels) => !Object.hasOwn(labels, key);
      return { requirement, key: canonical };
    }
  }
}
