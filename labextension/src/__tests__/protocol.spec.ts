import { MalformedMessageError, makeRequest, parseAskResult, parseMessage } from '../protocol';

describe('makeRequest', () => {
  it('builds a v1 request', () => {
    expect(makeRequest('r1', 'ask', { question: 'q' })).toEqual({ v: 2, id: 'r1', type: 'ask', params: { question: 'q' } });
    expect(makeRequest('r2', 'status')).toEqual({ v: 2, id: 'r2', type: 'status', params: {} });
    expect(makeRequest('r3', 'status', {}, 1)).toEqual({ v: 1, id: 'r3', type: 'status', params: {} });
  });
});

describe('parseMessage', () => {
  it('reads hello, events, results and errors', () => {
    expect(parseMessage({ v: 1, kind: 'hello', protocol: 1, ehr_magic: '0.1.0', types: ['ask'] })).toEqual({
      kind: 'hello',
      hello: { protocol: 1, ehr_magic: '0.1.0', types: ['ask'] }
    });
    expect(parseMessage({ v: 1, id: 'r1', kind: 'event', event: { kind: 'phase', phase: 'run', detail: 'step 1/10', elapsed: 1.5 } }))
      .toEqual({ kind: 'event', id: 'r1', event: { kind: 'phase', phase: 'run', detail: 'step 1/10', elapsed: 1.5 } });
    expect(parseMessage({ v: 1, id: 'r1', kind: 'event', event: { kind: 'token', text: 'ans' } })).toEqual({
      kind: 'event', id: 'r1', event: { kind: 'token', text: 'ans', elapsed: 0 }
    });
    const step = parseMessage({ v: 1, id: 'r1', kind: 'event', event: { kind: 'step', step: { index: 2, code: 'x', error: 'E', succeeded: false, hints: ['h'] } } });
    expect(step.kind === 'event' && step.event.kind === 'step' && step.event.step).toMatchObject({
      index: 2, code: 'x', error: 'E', succeeded: false, hints: ['h'], debugger_note: null, soft_failure: null
    });
    const examples = parseMessage({ v: 1, id: 'r1', kind: 'event', event: { kind: 'examples', examples: [{ id: 'memory:1', question: 'q', origin: 'memory' }, 'junk'] } });
    expect(examples.kind === 'event' && examples.event.kind === 'examples' && examples.event.examples).toEqual([
      { id: 'memory:1', question: 'q', origin: 'memory' }
    ]);
    expect(parseMessage({ v: 1, id: 'r1', kind: 'result', type: 'status', result: { a: 1 } })).toEqual({
      kind: 'result', id: 'r1', type: 'status', result: { a: 1 }
    });
    expect(parseMessage({ v: 1, id: null, kind: 'error', error: { code: 'bad_message', message: 'm' } })).toEqual({
      kind: 'error', id: null, error: { code: 'bad_message', message: 'm' }
    });
    expect(parseMessage({ v: 1, id: 'r3', kind: 'error' })).toMatchObject({ error: { code: 'internal' } });
  });

  it.each([
    ['not an object', 'hello'],
    ['an array', []],
    ['null', null],
    ['no version', { kind: 'hello' }],
    ['another version', { v: 3, kind: 'hello' }],
    ['unknown kind', { v: 1, kind: 'gossip' }],
    ['event without id', { v: 1, kind: 'event', event: { kind: 'token' } }],
    ['unknown event kind', { v: 1, id: 'r', kind: 'event', event: { kind: 'mystery' } }],
    ['step event without step', { v: 1, id: 'r', kind: 'event', event: { kind: 'step' } }],
    ['result without body', { v: 1, id: 'r', kind: 'result' }]
  ])('rejects %s', (_, data) => {
    expect(() => parseMessage(data)).toThrow(MalformedMessageError);
  });
});

describe('parseAskResult', () => {
  it('fills in missing fields', () => {
    const r = parseAskResult({ status: 'answered', answer: { kind: 'value', value: 94, type: 'int' }, token: 'abc', code: '# ehr-magic #abc: q\nx' });
    expect(r.status).toBe('answered');
    expect(r.answer).toEqual({ kind: 'value', value: 94, type: 'int' });
    expect(r.token).toBe('abc');
    expect(r.steps).toEqual([]);
    expect(r.source).toBe('agent');
    expect(r.entry_id).toBeNull();
  });

  it('survives junk', () => {
    const r = parseAskResult('junk');
    expect(r.status).toBe('failed');
    expect(r.answer).toEqual({ kind: 'none' });
    expect(r.token).toBeNull();
    expect(parseAskResult({ status: 'weird', token: '' }).status).toBe('failed');
  });

  it('reads tables with their totals', () => {
    const r = parseAskResult({
      status: 'answered',
      answer: { kind: 'table', columns: ['gender', 'n'], dtypes: ['String', 'Int64'], rows: [['f', 41], ['m', 53], 'bad'], total_rows: 2, total_columns: 2 }
    });
    expect(r.answer).toEqual({
      kind: 'table', columns: ['gender', 'n'], dtypes: ['String', 'Int64'], rows: [['f', 41], ['m', 53]],
      total_rows: 2, total_columns: 2, truncated: false
    });
  });
});
