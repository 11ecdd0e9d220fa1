import { describe, expect, it } from 'vitest';
import { SyncWarnings } from './sync-warnings.js';

describe('SyncWarnings', () => {
  it('records a warning once while it lasts, and again once it comes back after a sync without it', () => {
    const recorded: string[] = [];
    const warnings = new SyncWarnings((namespace, name, reason, message) => void recorded.push(`${namespace}/${name} ${reason}: ${message}`));
    const sync = (...objects: string[]) => {
      warnings.beginSync();
      for (const object of objects) warnings.warn(object, 'Refused', 'bad port');
      warnings.endSync();
    };
    sync('default/web', 'prod/db');
    sync('default/web', 'prod/db');
    sync('prod/db');
    sync('default/web', 'prod/db');
    expect(recorded).toEqual([
      'default/web Refused: bad port',
      'prod/db Refused: bad port',
      'default/web Refused: bad port',
    ]);
  });
});
