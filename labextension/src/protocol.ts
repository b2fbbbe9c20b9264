/**
 * Protocol v2 (and v1, its subset) between the panel and the kernel's comm target `ehr_magic.panel`
 * (docs/panel.md; the kernel side is ehr_magic/panel/protocol.py).
 *
 * Pure types and parsers: no JupyterLab imports, so the unit tests run in Node.
 */

export const PROTOCOL_VERSION = 2;
/** Kernels speaking v1 are served in v1: they lack the knowledge requests (no Data tab). */
export const SUPPORTED_VERSIONS = [1, 2];
export const COMM_TARGET = 'ehr_magic.panel';

export type RequestType =
  | 'hello'
  | 'status'
  | 'ask'
  | 'memory.search'
  | 'memory.get'
  | 'memory.delete'
  | 'accept'
  | 'reject'
  | 'pending'
  | 'conversation'
  | 'conversation.new'
  | 'knowledge'
  | 'knowledge.edit'
  | 'knowledge.import';

export type ErrorCode =
  | 'bad_message'
  | 'unsupported_version'
  | 'unknown_type'
  | 'bad_params'
  | 'not_ready'
  | 'not_found'
  | 'user_error'
  | 'interrupted'
  | 'internal';

export interface IRequest {
  v: number;
  id: string;
  type: RequestType;
  params: Record<string, unknown>;
}

export interface IHello {
  protocol: number;
  ehr_magic: string;
  types: string[];
}

/** The answer as the panel shows it (`answer_preview` in protocol.py). */
export type AnswerPreview =
  | {
      kind: 'table';
      columns: string[];
      dtypes: string[];
      rows: unknown[][];
      total_rows: number;
      total_columns: number;
      truncated: boolean;
    }
  | { kind: 'list'; values: unknown[]; total: number; truncated: boolean }
  | { kind: 'value'; value: unknown; type: string }
  | { kind: 'none' };

export interface IStep {
  index: number;
  code: string;
  knowledge: string;
  error: string | null;
  soft_failure: string | null;
  /** The code only looked (printed, described) and its output went back to the model: not a failure. */
  observation: string | null;
  hints: string[];
  debugger_note: string | null;
  stdout: string;
  answer_preview: string;
  run_seconds: number;
  succeeded: boolean;
}

export interface IExample {
  id: string;
  question: string;
  origin: string;
}

/** Streamed while `ask` runs. */
export type RunEvent =
  | { kind: 'phase'; phase: string; detail: string; elapsed: number }
  | { kind: 'token'; text: string; elapsed: number }
  | { kind: 'step'; step: IStep; elapsed: number }
  | { kind: 'examples'; examples: IExample[]; elapsed: number };

export type AnswerStatus = 'answered' | 'clarify' | 'abstained' | 'failed' | 'generated';

export interface IAskResult {
  question: string;
  status: AnswerStatus;
  source: 'memory' | 'agent';
  message: string;
  answer: AnswerPreview;
  answer_text: string;
  code: string;
  raw_code: string;
  token: string | null;
  knowledge: string;
  entry_id: number | null;
  steps: IStep[];
  examples: IExample[];
  model: string;
  llm_calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  seconds: number;
  standalone_question: string;
  /** the thread after this question; null from a kernel without conversations */
  conversation: ITurn[] | null;
}

/** One question of the conversation (the thread), as the kernel describes it. */
export interface ITurn {
  question: string;
  /** the question the code answers on its own (the model's restatement of a follow-up) */
  standalone: string;
  status: string;
  source: string;
  /** a short description of the answer (type, shape, columns; values as privacy allows) */
  answer: string;
  /** notebook variables described to the model */
  variables: string[];
}

export interface IConversation {
  turns: ITurn[];
}

export interface IStatus {
  database: {
    path: string;
    dataset: string;
    schema: string;
    description: string;
    tables: number;
    now: string;
  } | null;
  database_hint: string | null;
  model:
    | { configured: true; name: string; endpoint: string; provider: string }
    | { configured: false; error: string };
  memory: { path: string; total: number; schema: number; accepted: number } | null;
  privacy: string;
  settings: Record<string, unknown>;
  pending: number;
}

export interface IMemoryEntry {
  id: number;
  question: string;
  code: string;
  knowledge: string;
  origin: string;
  schema: string | null;
  dataset: string | null;
  model: string | null;
  answer_preview: string;
  use_count: number;
  created_at: string;
  updated_at: string;
  edited: boolean;
  score: number | null;
}

export interface IMemorySearchResult {
  text: string;
  schema: string;
  entries: IMemoryEntry[];
}

export interface IMemoryGetResult {
  entry: IMemoryEntry;
  token: string;
  code: string;
}

export interface IPendingResult {
  token: string;
  question: string;
  rejected: boolean;
  entry_id: number | null;
  origin: string | null;
  accepted: boolean;
}

/** Who said a statement: ehr-magic guessed it, a person wrote or confirmed it, or nobody. */
export type Mark = 'drafted' | 'confirmed' | 'not described';

export interface IKnowledgeColumn {
  name: string;
  dtype: string;
  meaning: string;
  mark: Mark;
  lookup: boolean;
  key: boolean;
}

export interface IKnowledgeJoin {
  /** "encounters.patient -> patients.id", or the join as written when it is not one column to another */
  arrow: string;
  text: string;
}

export interface IKnowledgeTable {
  name: string;
  meaning: string;
  meaning_mark: Mark;
  key: string | null;
  key_mark: Mark;
  joins: IKnowledgeJoin[];
  joins_mark: Mark;
  lookup: string[];
  lookup_mark: Mark;
  columns: IKnowledgeColumn[];
}

/** What ehr-magic believes about the connected data (`knowledge_view.py`). */
export interface IKnowledgeView {
  schema: string;
  dataset: string;
  location: string;
  title: string;
  origin: string;
  drafted: boolean;
  clock: { time_model: string; now: string | null; text: string; mark: Mark };
  tables: IKnowledgeTable[];
  counts: { drafted: number; confirmed: number };
}

export interface IKnowledgeEditResult {
  path: string;
  /** relative to the notebook's folder; null when the file lies outside it */
  name: string | null;
  written: boolean;
  message: string;
}

export interface IKnowledgeImportResult {
  imported: boolean;
  problems: string[];
  message: string;
  knowledge?: IKnowledgeView;
}

/** What each request type returns. */
export interface IResults {
  hello: IHello;
  status: IStatus;
  ask: IAskResult;
  'memory.search': IMemorySearchResult;
  'memory.get': IMemoryGetResult;
  'memory.delete': { id: number; deleted: boolean };
  accept: { token: string; entry_id: number | null; accepted: boolean };
  reject: { token: string; rejected: boolean };
  pending: IPendingResult;
  conversation: IConversation;
  'conversation.new': IConversation;
  knowledge: { knowledge: IKnowledgeView };
  'knowledge.edit': IKnowledgeEditResult;
  'knowledge.import': IKnowledgeImportResult;
}

export interface IErrorBody {
  code: ErrorCode | string;
  message: string;
  detail?: string;
}

/** A message from the kernel, after validation. */
export type IncomingMessage =
  | { kind: 'hello'; hello: IHello }
  | { kind: 'event'; id: string; event: RunEvent }
  | { kind: 'result'; id: string; type: string; result: unknown }
  | { kind: 'error'; id: string | null; error: IErrorBody };

/** The kernel sent something that is not protocol v1 or v2. */
export class MalformedMessageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedMessageError';
  }
}

export function makeRequest(
  id: string,
  type: RequestType,
  params: Record<string, unknown> = {},
  version: number = PROTOCOL_VERSION
): IRequest {
  return { v: version, id, type, params };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : fallback;
}

function num(value: unknown, fallback = 0): number {
  return typeof value === 'number' && isFinite(value) ? value : fallback;
}

/** Validate one comm message from the kernel; throws `MalformedMessageError`. */
export function parseMessage(data: unknown): IncomingMessage {
  if (!isObject(data)) {
    throw new MalformedMessageError('The kernel sent a message that is not a JSON object.');
  }
  if (!SUPPORTED_VERSIONS.includes(data.v as number)) {
    throw new MalformedMessageError(
      `The kernel speaks panel protocol v${String(data.v)}, this panel v${PROTOCOL_VERSION}; ` +
        'upgrade ehr-magic in the kernel and reload the page.'
    );
  }
  switch (data.kind) {
    case 'hello':
      return {
        kind: 'hello',
        hello: {
          protocol: num(data.protocol),
          ehr_magic: str(data.ehr_magic),
          types: Array.isArray(data.types) ? data.types.map(t => String(t)) : []
        }
      };
    case 'event': {
      if (typeof data.id !== 'string' || !isObject(data.event)) {
        throw new MalformedMessageError('An event needs an id and an event object.');
      }
      return { kind: 'event', id: data.id, event: parseEvent(data.event) };
    }
    case 'result':
      if (typeof data.id !== 'string' || !isObject(data.result)) {
        throw new MalformedMessageError('A result needs an id and a result object.');
      }
      return { kind: 'result', id: data.id, type: str(data.type), result: data.result };
    case 'error': {
      const error = isObject(data.error) ? data.error : {};
      return {
        kind: 'error',
        id: typeof data.id === 'string' ? data.id : null,
        error: {
          code: str(error.code, 'internal'),
          message: str(error.message, 'The kernel reported an error without a message.'),
          ...(typeof error.detail === 'string' ? { detail: error.detail } : {})
        }
      };
    }
    default:
      throw new MalformedMessageError(`Unknown message kind ${JSON.stringify(data.kind)}.`);
  }
}

function parseEvent(event: Record<string, unknown>): RunEvent {
  const elapsed = num(event.elapsed);
  switch (event.kind) {
    case 'phase':
      return { kind: 'phase', phase: str(event.phase), detail: str(event.detail), elapsed };
    case 'token':
      return { kind: 'token', text: str(event.text), elapsed };
    case 'step':
      if (!isObject(event.step)) {
        throw new MalformedMessageError('A step event needs a step object.');
      }
      return { kind: 'step', step: parseStep(event.step), elapsed };
    case 'examples':
      return {
        kind: 'examples',
        examples: Array.isArray(event.examples) ? event.examples.filter(isObject).map(parseExample) : [],
        elapsed
      };
    default:
      throw new MalformedMessageError(`Unknown event kind ${JSON.stringify(event.kind)}.`);
  }
}

function nullableStr(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}

export function parseStep(step: Record<string, unknown>): IStep {
  return {
    index: num(step.index),
    code: str(step.code),
    knowledge: str(step.knowledge),
    error: nullableStr(step.error),
    soft_failure: nullableStr(step.soft_failure),
    observation: nullableStr(step.observation),
    hints: Array.isArray(step.hints) ? step.hints.map(h => String(h)) : [],
    debugger_note: nullableStr(step.debugger_note),
    stdout: str(step.stdout),
    answer_preview: str(step.answer_preview),
    run_seconds: num(step.run_seconds),
    succeeded: step.succeeded === true
  };
}

function parseExample(example: Record<string, unknown>): IExample {
  return { id: str(example.id), question: str(example.question), origin: str(example.origin) };
}

function parsePreview(value: unknown): AnswerPreview {
  if (!isObject(value)) {
    return { kind: 'none' };
  }
  switch (value.kind) {
    case 'table': {
      const columns = Array.isArray(value.columns) ? value.columns.map(c => String(c)) : [];
      const rows = Array.isArray(value.rows) ? value.rows.filter(Array.isArray) : [];
      return {
        kind: 'table',
        columns,
        dtypes: Array.isArray(value.dtypes) ? value.dtypes.map(t => String(t)) : [],
        rows,
        total_rows: num(value.total_rows, rows.length),
        total_columns: num(value.total_columns, columns.length),
        truncated: value.truncated === true
      };
    }
    case 'list': {
      const values = Array.isArray(value.values) ? value.values : [];
      return { kind: 'list', values, total: num(value.total, values.length), truncated: value.truncated === true };
    }
    case 'value':
      return { kind: 'value', value: value.value, type: str(value.type) };
    default:
      return { kind: 'none' };
  }
}

const STATUSES: AnswerStatus[] = ['answered', 'clarify', 'abstained', 'failed', 'generated'];

/** Fill in an `ask` result, so the view never meets a missing field. */
export function parseAskResult(raw: unknown): IAskResult {
  const r = isObject(raw) ? raw : {};
  const status = STATUSES.includes(r.status as AnswerStatus) ? (r.status as AnswerStatus) : 'failed';
  return {
    question: str(r.question),
    status,
    source: r.source === 'memory' ? 'memory' : 'agent',
    message: str(r.message),
    answer: parsePreview(r.answer),
    answer_text: str(r.answer_text),
    code: str(r.code),
    raw_code: str(r.raw_code),
    token: typeof r.token === 'string' && r.token ? r.token : null,
    knowledge: str(r.knowledge),
    entry_id: typeof r.entry_id === 'number' ? r.entry_id : null,
    steps: Array.isArray(r.steps) ? r.steps.filter(isObject).map(parseStep) : [],
    examples: Array.isArray(r.examples) ? r.examples.filter(isObject).map(parseExample) : [],
    model: str(r.model),
    llm_calls: num(r.llm_calls),
    prompt_tokens: num(r.prompt_tokens),
    completion_tokens: num(r.completion_tokens),
    seconds: num(r.seconds),
    standalone_question: str(r.standalone_question, str(r.question)),
    conversation: Array.isArray(r.conversation) ? parseTurns(r.conversation) : null
  };
}

function parseTurns(raw: unknown[]): ITurn[] {
  return raw.filter(isObject).map(t => ({
    question: str(t.question),
    standalone: str(t.standalone, str(t.question)),
    status: str(t.status),
    source: str(t.source),
    answer: str(t.answer),
    variables: Array.isArray(t.variables) ? t.variables.map(v => String(v)) : []
  }));
}

/** Fill in a `conversation` / `conversation.new` result. */
export function parseConversation(raw: unknown): IConversation {
  const r = isObject(raw) ? raw : {};
  return { turns: Array.isArray(r.turns) ? parseTurns(r.turns) : [] };
}

function mark(value: unknown): Mark {
  return value === 'confirmed' || value === 'not described' ? value : 'drafted';
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(v => String(v)) : [];
}

function parseKnowledgeTable(t: Record<string, unknown>): IKnowledgeTable {
  return {
    name: str(t.name),
    meaning: str(t.meaning),
    meaning_mark: mark(t.meaning_mark),
    key: typeof t.key === 'string' && t.key ? t.key : null,
    key_mark: mark(t.key_mark),
    joins: Array.isArray(t.joins)
      ? t.joins.filter(isObject).map(j => ({ arrow: str(j.arrow, str(j.text)), text: str(j.text) }))
      : [],
    joins_mark: mark(t.joins_mark),
    lookup: strings(t.lookup),
    lookup_mark: mark(t.lookup_mark),
    columns: Array.isArray(t.columns)
      ? t.columns.filter(isObject).map(c => ({
          name: str(c.name),
          dtype: str(c.dtype),
          meaning: str(c.meaning),
          mark: mark(c.mark),
          lookup: c.lookup === true,
          key: c.key === true
        }))
      : []
  };
}

/** Fill in a knowledge view, so the Data tab never meets a missing field. */
export function parseKnowledgeView(raw: unknown): IKnowledgeView {
  const r = isObject(raw) ? raw : {};
  const clock = isObject(r.clock) ? r.clock : {};
  const counts = isObject(r.counts) ? r.counts : {};
  return {
    schema: str(r.schema),
    dataset: str(r.dataset),
    location: str(r.location),
    title: str(r.title),
    origin: str(r.origin),
    drafted: r.drafted === true,
    clock: {
      time_model: str(clock.time_model, 'calendar'),
      now: typeof clock.now === 'string' ? clock.now : null,
      text: str(clock.text),
      mark: mark(clock.mark)
    },
    tables: Array.isArray(r.tables) ? r.tables.filter(isObject).map(parseKnowledgeTable) : [],
    counts: { drafted: num(counts.drafted), confirmed: num(counts.confirmed) }
  };
}

/** Fill in a `knowledge.import` result. */
export function parseImportResult(raw: unknown): IKnowledgeImportResult {
  const r = isObject(raw) ? raw : {};
  return {
    imported: r.imported === true,
    problems: strings(r.problems),
    message: str(r.message),
    ...(isObject(r.knowledge) ? { knowledge: parseKnowledgeView(r.knowledge) } : {})
  };
}
