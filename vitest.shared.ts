// One vitest configuration for every package. Each package's `test` script runs
// `vitest run --config ../../vitest.shared.ts` from its own directory.
import { basename } from 'node:path';
import { defineConfig } from 'vitest/config';
import { SuiteErrorsReporter } from './scripts/suite-errors-reporter.js';

const sourceCondition = '@kube-router/source';
// .ci/run sets VITEST_REPORT_DIR so that it can add up the results of every package.
const reportDir = process.env.VITEST_REPORT_DIR;
const project = basename(process.cwd());

export default defineConfig({
  resolve: { conditions: [sourceCondition, 'node', 'import', 'default'] },
  ssr: { resolve: { conditions: [sourceCondition, 'node', 'import', 'default'] } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: reportDir
      ? ['default', ['json', { outputFile: `${reportDir}/${project}.json` }], new SuiteErrorsReporter(`${reportDir}/${project}.errors.json`)]
      : ['default'],
  },
});
