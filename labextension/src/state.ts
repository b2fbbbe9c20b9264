/**
 * The state of one question's run, and the pure functions that move it forward as
 * events and the reply arrive. The model keeps these objects; the view renders them.
 */

import { AnswerStatus, IAskResult, IExample, IStep, RunEvent } from './protocol';

export type RunState = 'running' | AnswerStatus | 'error' | 'interrupted';

export interface ITimelineItem {
  phase: string;
  detail: string;
  elapsed: number;
}

/** Where the run's code went after the analyst pressed Insert (& run). */
export interface IInsertion {
  token: string | null;
  ran: boolean;
  /** 'inserting' | 'running' | 'done' | 'failed' (the cell raised) */
  state: 'inserting' | 'running' | 'done' | 'failed';
  cellIndex: number | null;
  entryId: number | null;
  accepted: boolean;
  message: string;
}

export interface IRun {
  id: number;
  question: string;
  regenerate: boolean;
  notebook: string;
  state: RunState;
  timeline: ITimelineItem[];
  phase: string;
  elapsed: number;
  examples: IExample[];
  attempts: IStep[];
  /** The model's reply while it streams (cleared when the attempt's step arrives). */
  streaming: string;
  result: IAskResult | null;
  error: { code: string; message: string; detail?: string } | null;
  insertion: IInsertion | null;
}

export function startRun(id: number, question: string, regenerate: boolean, notebook: string): IRun {
  return {
    id,
    question,
    regenerate,
    notebook,
    state: 'running',
    timeline: [],
    phase: 'start',
    elapsed: 0,
    examples: [],
    attempts: [],
    streaming: '',
    result: null,
    error: null,
    insertion: null
  };
}

/** A new run state with one streamed event applied (events after the end are ignored). */
export function applyEvent(run: IRun, event: RunEvent): IRun {
  if (run.state !== 'running') {
    return run;
  }
  const elapsed = Math.max(run.elapsed, event.elapsed);
  switch (event.kind) {
    case 'phase':
      return {
        ...run,
        elapsed,
        phase: event.phase,
        timeline: [...run.timeline, { phase: event.phase, detail: event.detail, elapsed: event.elapsed }],
        streaming: event.phase === 'code' ? '' : run.streaming
      };
    case 'token':
      return { ...run, elapsed, streaming: run.streaming + event.text };
    case 'step': {
      const attempts = run.attempts.filter(a => a.index !== event.step.index);
      attempts.push(event.step);
      attempts.sort((a, b) => a.index - b.index);
      return { ...run, elapsed, attempts, streaming: '' };
    }
    case 'examples':
      return { ...run, elapsed, examples: event.examples };
    default:
      return run;
  }
}

/** The run with the kernel's reply: the reply's steps and examples are authoritative. */
export function finishRun(run: IRun, result: IAskResult): IRun {
  return {
    ...run,
    state: result.status,
    result,
    attempts: result.steps.length ? result.steps : run.attempts,
    examples: result.examples.length ? result.examples : run.examples,
    elapsed: Math.max(run.elapsed, result.seconds),
    streaming: '',
    phase: 'done'
  };
}

export function failRun(run: IRun, error: { code: string; message: string; detail?: string }): IRun {
  return {
    ...run,
    state: error.code === 'interrupted' ? 'interrupted' : 'error',
    error,
    streaming: '',
    phase: 'done'
  };
}

export function withInsertion(run: IRun, insertion: Partial<IInsertion>): IRun {
  const base: IInsertion = run.insertion ?? {
    token: run.result?.token ?? null,
    ran: false,
    state: 'inserting',
    cellIndex: null,
    entryId: null,
    accepted: false,
    message: ''
  };
  return { ...run, insertion: { ...base, ...insertion } };
}

/** True while the run has code the analyst can insert. */
export function hasCode(run: IRun | null): boolean {
  return !!run && !!run.result && run.result.code.length > 0;
}

export function isRunning(run: IRun | null): boolean {
  return !!run && run.state === 'running';
}
