import {
  databaseLine,
  describeAnswer,
  firstLine,
  formatSeconds,
  formatValue,
  memorySummary,
  modelLine,
  phaseLabel,
  statusText,
  stepOutcome,
  stripMarker,
  summarizeResult
} from '../format';
import { parseAskResult } from '../protocol';
import { finishRun, startRun } from '../state';
import { STATUS } from './fakes';

describe('formatting', () => {
  it('formats values for table cells', () => {
    expect(formatValue(null)).toBe('null');
    expect(formatValue(94)).toBe('94');
    expect(formatValue(1234567)).toBe('1234567');
    expect(formatValue(2 / 3)).toBe('0.666667');
    expect(formatValue(1.5)).toBe('1.5');
    expect(formatValue(true)).toBe('True');
    expect(formatValue('2100-01-01 00:00:00')).toBe('2100-01-01 00:00:00');
    expect(formatValue([1, 2])).toBe('[1,2]');
  });

  it('describes answer previews', () => {
    expect(describeAnswer({ kind: 'table', columns: ['a', 'b'], dtypes: [], rows: [[1, 2], [3, 4]], total_rows: 2, total_columns: 2, truncated: false }))
      .toBe('2 rows × 2 columns');
    expect(describeAnswer({ kind: 'table', columns: ['a'], dtypes: [], rows: Array(50).fill([1]), total_rows: 1234, total_columns: 40, truncated: true }))
      .toBe('first 50 of 1,234 rows × 1 of 40 columns');
    expect(describeAnswer({ kind: 'table', columns: ['a'], dtypes: [], rows: [[1]], total_rows: 1, total_columns: 1, truncated: false }))
      .toBe('1 row × 1 column');
    expect(describeAnswer({ kind: 'list', values: [1, 2], total: 2, truncated: false })).toBe('2 values');
    expect(describeAnswer({ kind: 'list', values: [1], total: 80, truncated: true })).toBe('first 1 of 80 values');
    expect(describeAnswer({ kind: 'value', value: 94, type: 'int' })).toBe('one int');
    expect(describeAnswer({ kind: 'none' })).toBe('no answer');
  });

  it('formats durations and phases', () => {
    expect(formatSeconds(0.42)).toBe('0.4 s');
    expect(formatSeconds(12.4)).toBe('12 s');
    expect(formatSeconds(75)).toBe('1 min 15 s');
    expect(formatSeconds(NaN)).toBe('');
    expect(phaseLabel('examples')).toBe('Searching memory for examples');
    expect(phaseLabel('code', 'step 2/10')).toBe('Writing code (step 2/10)');
    expect(phaseLabel('new-phase')).toBe('new-phase');
  });

  it('summarizes results from the agent and from memory', () => {
    const agent = parseAskResult({ status: 'answered', source: 'agent', steps: [{}, {}], llm_calls: 3, prompt_tokens: 1000, completion_tokens: 234, seconds: 2.1 });
    expect(summarizeResult(agent)).toBe('2 attempts · 3 model calls · 1,234 tokens · 2.1 s');
    const memory = parseAskResult({ status: 'answered', source: 'memory', entry_id: 4, seconds: 0.05 });
    expect(summarizeResult(memory)).toBe('accepted cell #4 · no model call · 0.1 s');
    expect(statusText(finishRun(startRun(1, 'q', false, 'n'), memory))).toBe('Answered from memory');
    expect(statusText(finishRun(startRun(1, 'q', false, 'n'), agent))).toBe('Answered');
  });

  it('strips the marker line for display only', () => {
    expect(stripMarker('# ehr-magic #ab12: How many?\nanswer = 1\n')).toBe('answer = 1');
    expect(stripMarker('answer = 1\n')).toBe('answer = 1');
    expect(stripMarker('# a comment\nanswer = 1')).toBe('# a comment\nanswer = 1');
  });

  it('describes the status lines', () => {
    expect(databaseLine(STATUS as any)).toBe('ehrsql-mimic_iv · ehrsql_mimic_iv');
    expect(databaseLine(null)).toBe('not connected');
    expect(modelLine(STATUS as any)).toBe('fake-model');
    expect(modelLine({ ...STATUS, model: { configured: false, error: 'x' } } as any)).toBe('not configured');
    expect(memorySummary({ path: 'm', total: 3, schema: 1, accepted: 1 })).toBe('1 accepted cell for this dataset');
    expect(memorySummary({ path: 'm', total: 9, schema: 3, accepted: 1 })).toBe('3 cells for this dataset, 1 accepted');
    expect(firstLine('a\nb')).toBe('a');
    expect(firstLine('x'.repeat(300), 10)).toHaveLength(10);
  });
});

describe('stepOutcome', () => {
  const base = {
    index: 1, code: 'print(ehr.describe("t"))', knowledge: '', error: null, soft_failure: null, observation: null,
    hints: [], debugger_note: null, stdout: '', answer_preview: '', run_seconds: 0.1, succeeded: false
  };
  it('names a look-up as such, not as a failure', () => {
    expect(stepOutcome({ ...base, observation: 'Printed output:\ncolumn type' })).toBe('looked up');
    expect(stepOutcome({ ...base, soft_failure: 'the code did not set `answer`' })).toBe('failed');
    expect(stepOutcome({ ...base, succeeded: true })).toBe('ran');
  });
});
