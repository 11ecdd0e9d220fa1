// vitest's JSON report keeps no message for a file that failed outside its tests (a failing beforeAll or afterAll,
// an import error): its tests are only "skipped". This reporter writes those errors beside the JSON report, so that
// scripts/summarize-tests.mjs can say why such a file failed.
import { writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

export class SuiteErrorsReporter implements Reporter {
  constructor(private readonly outputFile: string) {}

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const files = testModules.flatMap((module) => {
      const errors = [module, ...module.children.allSuites()].flatMap((holder) => holder.errors());
      return errors.length === 0 ? [] : [{ file: module.moduleId, errors: errors.map((error) => `${error.name ?? 'Error'}: ${error.message}`) }];
    });
    writeFileSync(this.outputFile, JSON.stringify(files, null, 2) + '\n');
  }
}
