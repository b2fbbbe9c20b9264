import { parseAskResult } from '../protocol';
import { applyEvent, failRun, finishRun, hasCode, isRunning, startRun, withInsertion } from '../state';

const step = (index: number, succeeded: boolean) => ({
  index, code: `answer = ${index}`, knowledge: '', error: succeeded ? null : 'NameError: x', soft_failure: null, observation: null,
  hints: [], debugger_note: succeeded ? null : 'use y', stdout: '', answer_preview: '', run_seconds: 0.1, succeeded
});

describe('run state', () => {
  it('follows phases, streamed tokens and attempts', () => {
    let run = startRun(1, 'How many?', false, 'a.ipynb');
    expect(isRunning(run)).toBe(true);
    run = applyEvent(run, { kind: 'phase', phase: 'examples', detail: '', elapsed: 0 });
    run = applyEvent(run, { kind: 'examples', examples: [{ id: 'seed:s:1', question: 'q', origin: 'seed' }], elapsed: 0.01 });
    run = applyEvent(run, { kind: 'phase', phase: 'code', detail: 'step 1/10', elapsed: 0.02 });
    run = applyEvent(run, { kind: 'token', text: 'answer', elapsed: 0.1 });
    run = applyEvent(run, { kind: 'token', text: ' = x', elapsed: 0.2 });
    expect(run.streaming).toBe('answer = x');
    expect(run.phase).toBe('code');
    run = applyEvent(run, { kind: 'phase', phase: 'run', detail: 'step 1/10', elapsed: 0.3 });
    expect(run.streaming).toBe('answer = x'); // kept while the code runs
    run = applyEvent(run, { kind: 'step', step: step(1, false), elapsed: 0.4 });
    expect(run.streaming).toBe('');
    run = applyEvent(run, { kind: 'phase', phase: 'code', detail: 'step 2/10', elapsed: 0.5 });
    run = applyEvent(run, { kind: 'step', step: step(2, true), elapsed: 0.6 });
    run = applyEvent(run, { kind: 'step', step: step(2, true), elapsed: 0.6 }); // a repeat replaces
    expect(run.attempts.map(a => a.index)).toEqual([1, 2]);
    expect(run.timeline.map(t => t.phase)).toEqual(['examples', 'code', 'run', 'code']);
    expect(run.examples).toHaveLength(1);
    expect(run.elapsed).toBe(0.6);
  });

  it('takes the reply as the final word and ignores late events', () => {
    let run = startRun(1, 'q', false, 'a.ipynb');
    run = applyEvent(run, { kind: 'step', step: step(1, true), elapsed: 0.4 });
    const result = parseAskResult({ status: 'answered', code: '# ehr-magic #t1: q\nanswer = 1\n', token: 't1', steps: [step(1, true)], seconds: 2 });
    run = finishRun(run, result);
    expect(run.state).toBe('answered');
    expect(run.elapsed).toBe(2);
    expect(hasCode(run)).toBe(true);
    expect(isRunning(run)).toBe(false);
    const after = applyEvent(run, { kind: 'token', text: 'late', elapsed: 3 });
    expect(after).toBe(run);
  });

  it('records errors and interruptions', () => {
    const run = startRun(1, 'q', false, 'a.ipynb');
    expect(failRun(run, { code: 'interrupted', message: 'Interrupted' }).state).toBe('interrupted');
    const failed = failRun(run, { code: 'user_error', message: 'No model', detail: 'tb' });
    expect(failed.state).toBe('error');
    expect(failed.error).toEqual({ code: 'user_error', message: 'No model', detail: 'tb' });
    expect(hasCode(failed)).toBe(false);
  });

  it('tracks the insertion of the final code', () => {
    let run = finishRun(startRun(1, 'q', false, 'a'), parseAskResult({ status: 'answered', code: 'x', token: 'tok' }));
    run = withInsertion(run, { ran: true, state: 'running' });
    expect(run.insertion).toMatchObject({ token: 'tok', ran: true, state: 'running', entryId: null });
    run = withInsertion(run, { state: 'done', entryId: 3, accepted: true });
    expect(run.insertion).toMatchObject({ token: 'tok', ran: true, state: 'done', entryId: 3, accepted: true });
  });
});
