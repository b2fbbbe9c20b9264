/** Pure text formatting for the view (tested in Node). */

import { AnswerPreview, IAskResult, IStatus, IStep } from './protocol';
import { IRun } from './state';

const PHASES: Record<string, string> = {
  start: 'Starting',
  examples: 'Searching memory for examples',
  knowledge: 'Writing knowledge',
  code: 'Writing code',
  run: 'Running code',
  debug: 'Debugging',
  done: 'Done'
};

export function phaseLabel(phase: string, detail = ''): string {
  const label = PHASES[phase] ?? phase;
  return detail ? `${label} (${detail})` : label;
}

export function formatSeconds(seconds: number): string {
  if (!isFinite(seconds) || seconds < 0) {
    return '';
  }
  if (seconds < 10) {
    return `${seconds.toFixed(1)} s`;
  }
  if (seconds < 60) {
    return `${Math.round(seconds)} s`;
  }
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}

export function formatCount(n: number, singular: string, plural = `${singular}s`): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? singular : plural}`;
}

/** One table cell or value as text: null stays visible, floats keep 6 significant digits. */
export function formatValue(value: unknown): string {
  if (value === null || value === undefined) {
    return 'null';
  }
  if (typeof value === 'number') {
    if (Number.isInteger(value)) {
      return value.toLocaleString('en-US', { useGrouping: false });
    }
    return String(Number(value.toPrecision(6)));
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'string') {
    return value;
  }
  return JSON.stringify(value);
}

/** "2 rows × 3 columns", "first 50 of 1,234 rows × 3 columns", "1 value". */
export function describeAnswer(answer: AnswerPreview): string {
  switch (answer.kind) {
    case 'table': {
      const rows =
        answer.total_rows > answer.rows.length
          ? `first ${answer.rows.length} of ${formatCount(answer.total_rows, 'row')}`
          : formatCount(answer.total_rows, 'row');
      const cols =
        answer.total_columns > answer.columns.length
          ? `${answer.columns.length} of ${formatCount(answer.total_columns, 'column')}`
          : formatCount(answer.total_columns, 'column');
      return `${rows} × ${cols}`;
    }
    case 'list':
      return answer.truncated
        ? `first ${answer.values.length} of ${formatCount(answer.total, 'value')}`
        : formatCount(answer.total, 'value');
    case 'value':
      return answer.type ? `one ${answer.type}` : 'one value';
    default:
      return 'no answer';
  }
}

/** How an attempt ended: a look-up (output back to the model) is progress, not a failure. */
export function stepOutcome(step: IStep): 'ran' | 'looked up' | 'failed' {
  if (step.observation) {
    return 'looked up';
  }
  return step.succeeded ? 'ran' : 'failed';
}

const STATUS_TEXT: Record<string, string> = {
  running: 'Working',
  answered: 'Answered',
  generated: 'Code written (not run)',
  clarify: 'The model asks a question',
  abstained: 'The model cannot answer this from the data',
  failed: 'No working code',
  error: 'Error',
  interrupted: 'Interrupted'
};

export function statusText(run: IRun): string {
  if (run.state === 'answered' && run.result?.source === 'memory') {
    return 'Answered from memory';
  }
  return STATUS_TEXT[run.state] ?? run.state;
}

/** "2 attempts · 3 model calls · 1,234 tokens · 2.1 s" (memory answers: no model). */
export function summarizeResult(result: IAskResult): string {
  const parts: string[] = [];
  if (result.source === 'memory') {
    parts.push(result.entry_id !== null ? `accepted cell #${result.entry_id}` : 'accepted cell');
    parts.push('no model call');
  } else {
    parts.push(formatCount(result.steps.length, 'attempt'));
    parts.push(formatCount(result.llm_calls, 'model call'));
    const tokens = result.prompt_tokens + result.completion_tokens;
    if (tokens > 0) {
      parts.push(formatCount(tokens, 'token'));
    }
  }
  parts.push(formatSeconds(result.seconds));
  return parts.filter(Boolean).join(' · ');
}

/** The code without its `# ehr-magic #token: question` marker line. */
export function stripMarker(code: string): string {
  const lines = code.split('\n');
  if (lines.length && /^# ehr-magic #[A-Za-z0-9]+: /.test(lines[0])) {
    lines.shift();
  }
  return lines.join('\n').replace(/\s+$/, '');
}

export function modelLine(status: IStatus | null): string {
  if (!status) {
    return '';
  }
  return status.model.configured ? `${status.model.name}` : 'not configured';
}

export function databaseLine(status: IStatus | null): string {
  const db = status?.database;
  if (!db) {
    return 'not connected';
  }
  return `${db.dataset} · ${db.schema}`;
}

/** The status's memory line: the dataset's cells in memory, and how many the analyst accepted. */
export function memorySummary(memory: NonNullable<IStatus['memory']>): string {
  if (memory.accepted === memory.schema) {
    return `${formatCount(memory.accepted, 'accepted cell')} for this dataset`;
  }
  return `${formatCount(memory.schema, 'cell')} for this dataset, ${memory.accepted} accepted`;
}

/** The first line of a (possibly long) error, for compact display. */
export function firstLine(text: string | null | undefined, max = 240): string {
  const line = (text ?? '').split('\n')[0];
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
