/** Fakes of the JupyterLab kernel objects the panel uses: a kernel that speaks
 * protocol v1 (or v2) from scripted handlers, and a notebook handle that records inserts. */

import type { Kernel } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';

import { IInsertOutcome, INotebookHandle } from '../tokens';

type Data = any;

export class FakeComm {
  constructor(
    readonly kernel: FakeKernel,
    readonly targetName: string
  ) {}

  readonly commId = `comm-${Math.random().toString(36).slice(2)}`;
  isDisposed = false;
  onMsg: ((msg: Data) => void) | null = null;
  onClose: ((msg: Data) => void) | null = null;
  sent: Data[] = [];

  open(data?: Data): { done: Promise<void> } {
    this.kernel.opened(this, data);
    return { done: Promise.resolve() };
  }

  send(data: Data): { done: Promise<void> } {
    if (this.isDisposed) {
      throw new Error('Comm is closed');
    }
    this.sent.push(data);
    this.kernel.received(this, data);
    return { done: Promise.resolve() };
  }

  close(): { done: Promise<void> } {
    this.closeFromKernel();
    return { done: Promise.resolve() };
  }

  /** The kernel closes the comm (no target, restart, shutdown). */
  closeFromKernel(): void {
    if (this.isDisposed) {
      return;
    }
    this.isDisposed = true;
    this.onClose?.({ content: { comm_id: this.commId, data: {} } });
  }

  /** A message from the kernel to the panel. */
  deliver(data: Data): void {
    this.onMsg?.({ content: { comm_id: this.commId, data } });
  }
}

export type Handler = (params: Data, reply: Replier) => void;

export interface Replier {
  event(event: Data): void;
  result(result: Data): void;
  error(code: string, message: string, detail?: string): void;
}

export const STATUS = {
  database: { path: '/data/ehr.duckdb', dataset: 'ehrsql-mimic_iv', schema: 'ehrsql_mimic_iv', description: 'ehr = ...',
    tables: 17, now: '2100-12-31 23:59:00' },
  database_hint: null,
  model: { configured: true, name: 'fake-model', endpoint: 'http://127.0.0.1:1/v1', provider: 'compatible' },
  memory: { path: '/tmp/memory.sqlite', total: 1, schema: 1, accepted: 1 },
  privacy: 'full',
  settings: { steps: 10 },
  pending: 0
};

export const ENTRY = {
  id: 1, question: 'How many patients are there?', code: 'answer = 94', knowledge: '', origin: 'accepted',
  schema: 'ehrsql_mimic_iv', dataset: 'ehrsql-mimic_iv', model: 'fake-model', answer_preview: '94', use_count: 0,
  created_at: '2026-01-01T00:00:00', updated_at: '2026-01-01T00:00:00', edited: false, score: null
};

/** A kernel with the `ehr_magic.panel` target (when `loaded`) and scripted handlers. */
export class FakeKernel {
  id = 'kernel-1';
  status: Kernel.Status = 'idle';
  loaded = true;
  /** false: the kernel never greets (busy) */
  greets = true;
  /** the request types the kernel's hello lists */
  types: string[] = [];
  /** the protocol version the kernel's hello names and its replies carry */
  protocol = 1;
  comms: FakeComm[] = [];
  executed: Data[] = [];
  executeReply: Data = { status: 'ok' };
  interrupts = 0;
  requests: Data[] = [];
  /** replies are sent after a microtask unless `manual` (then call `flush()`) */
  manual = false;
  private _queue: Array<() => void> = [];

  handlers: Record<string, Handler> = {
    status: (_, r) => r.result(STATUS),
    'memory.search': (_, r) => r.result({ text: '', schema: 'ehrsql_mimic_iv', entries: [ENTRY] }),
    pending: (p, r) => r.result({ token: p.token, question: 'q', rejected: false, entry_id: 7, origin: 'accepted',
      accepted: true }),
    'memory.get': (p, r) => r.result({ entry: { ...ENTRY, id: p.id }, token: 'tok9',
      code: `# ehr-magic #tok9: ${ENTRY.question}\n${ENTRY.code}\n` }),
    'memory.delete': (p, r) => r.result({ id: p.id, deleted: true })
  };

  createComm(targetName: string): FakeComm {
    const comm = new FakeComm(this, targetName);
    this.comms.push(comm);
    return comm;
  }

  get comm(): FakeComm {
    return this.comms[this.comms.length - 1];
  }

  opened(comm: FakeComm, _data: Data): void {
    this.later(() => {
      if (!this.loaded) {
        comm.closeFromKernel();
      } else if (this.greets) {
        comm.deliver({ v: this.protocol, kind: 'hello', protocol: this.protocol, ehr_magic: '0.1.0', types: this.types });
      }
    });
  }

  received(comm: FakeComm, data: Data): void {
    this.requests.push(data);
    const id = data.id;
    const send = (m: Data) => this.later(() => !comm.isDisposed && comm.deliver({ v: this.protocol, id, ...m }));
    const reply: Replier = {
      event: event => send({ kind: 'event', event }),
      result: result => send({ kind: 'result', type: data.type, result }),
      error: (code, message, detail) => send({ kind: 'error', error: { code, message, detail } })
    };
    const handler = this.handlers[data.type];
    if (handler) {
      handler(data.params, reply);
    } else {
      reply.error('unknown_type', `no handler for ${data.type}`);
    }
  }

  requestExecute(content: Data): { done: Promise<Data> } {
    this.executed.push(content);
    if (this.executeReply.status === 'ok') {
      this.loaded = true;
    }
    return { done: Promise.resolve({ content: this.executeReply }) };
  }

  interrupt(): Promise<void> {
    this.interrupts++;
    return Promise.resolve();
  }

  later(fn: () => void): void {
    if (this.manual) {
      this._queue.push(fn);
    } else {
      void Promise.resolve().then(fn);
    }
  }

  flush(): void {
    const queue = this._queue;
    this._queue = [];
    queue.forEach(fn => fn());
  }

  asKernel(): Kernel.IKernelConnection {
    return this as unknown as Kernel.IKernelConnection;
  }
}

export class FakeNotebook implements INotebookHandle {
  constructor(
    readonly id: string,
    public kernelObj: FakeKernel | null
  ) {}

  name = 'Untitled.ipynb';
  path = 'Untitled.ipynb';
  kernelName = 'Python 3';
  inserted: Array<{ code: string; run: boolean }> = [];
  insertOk = true;
  readonly changed: Signal<INotebookHandle, 'kernel' | 'restart' | 'path'> = new Signal(this);
  readonly disposed: Signal<INotebookHandle, void> = new Signal(this);

  get kernel(): Kernel.IKernelConnection | null {
    return this.kernelObj ? this.kernelObj.asKernel() : null;
  }

  async insertCell(code: string, run: boolean): Promise<IInsertOutcome> {
    this.inserted.push({ code, run });
    return { cellIndex: this.inserted.length - 1, ok: this.insertOk };
  }
}

/** Let pending promise callbacks run. */
export async function settle(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    await Promise.resolve();
  }
}
