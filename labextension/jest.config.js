/** Unit tests of the panel's logic (protocol, comm wrapper, model, formatting) in Node:
 * the modules under test import JupyterLab packages only as types. `jlpm test` type-checks
 * the tests with tsc first, so ts-jest only transpiles. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/src'],
  testRegex: 'src/__tests__/.*\\.spec\\.tsx?$',
  transform: {
    '^.+\\.tsx?$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  },
  moduleFileExtensions: ['ts', 'tsx', 'js', 'json']
};
