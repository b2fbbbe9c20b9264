/**
 * The panel's model: one `NotebookSession` per open notebook (its comm, status, run
 * and memory view), and the `AssistantModel` that follows the active notebook. It owns
 * all kernel traffic (through comm.ts) and emits `stateChanged`; the view only renders
 * `state` and calls the methods below.
 */

import { ISignal, Signal } from '@lumino/signaling';

import {
  ConnectionClosedError,
  KernelBusyError,
  LoadExtensionError,
  NotLoadedError,
  PanelConnection,
  PanelError,
  RequestError,
  interruptKernel,
  loadExtension
} from './comm';
import { IInsertOutcome, IAssistantModel, IDataView, INotebookHandle, INotice, IPanelState } from './tokens';
import { editKnowledge, importKnowledge, loadKnowledge } from './datamodel';
import { parseAskResult, parseConversation } from './protocol';
import { applyEvent, failRun, finishRun, hasCode, isRunning, startRun, withInsertion } from './state';

export interface IModelOptions {
  /** Put text on the clipboard (JupyterLab's Clipboard in the app, a fake in tests). */
  copyText: (text: string) => void | Promise<void>;
  /** Milliseconds to wait for the kernel's greeting. */
  openTimeout?: number;
  /** Milliseconds a success/info notice stays (0: until dismissed). */
  noticeTimeout?: number;
  /** Open a file (path relative to the server root) in JupyterLab's editor. */
  openFile?: (path: string) => void | Promise<void>;
}

const EMPTY_MEMORY = { query: '', entries: [], loading: false, error: null, confirmDelete: null };
const EMPTY_DATA = { knowledge: null, loading: false, error: null, file: null, problems: [], message: null, busy: false };

export const NO_NOTEBOOK: IPanelState = {
  notebook: null,
  connection: 'no-notebook',
  connectionError: null,
  status: null,
  run: null,
  memory: EMPTY_MEMORY,
  notice: null,
  thread: [],
  conversations: false,
  data: EMPTY_DATA,
  knowledge: false
};

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The panel's state and traffic for one notebook. */
export class NotebookSession {
  constructor(
    readonly handle: INotebookHandle,
    private readonly _options: IModelOptions
  ) {
    this._state = {
      ...NO_NOTEBOOK,
      notebook: this._describe(),
      connection: handle.kernel ? 'connecting' : 'no-kernel'
    };
    handle.changed.connect(this._onHandleChanged, this);
  }

  /** Connect now if the kernel is up; otherwise the handle's 'kernel' change will. */
  start(): void {
    const status = this.handle.kernel?.status;
    if (!this.handle.kernel || status === 'idle' || status === 'busy') {
      void this.connect();
    }
  }

  get state(): IPanelState {
    return this._state;
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get connection(): PanelConnection | null {
    return this._connection;
  }

  /** Open the comm (again) and read the status and the memory list. */
  async connect(): Promise<void> {
    const generation = ++this._generation;
    this._dropConnection();
    const kernel = this.handle.kernel;
    if (!kernel) {
      this._set({ connection: 'no-kernel', connectionError: null, status: null });
      return;
    }
    this._set({ connection: 'connecting', connectionError: null });
    let connection: PanelConnection;
    try {
      connection = await PanelConnection.open(kernel, {
        timeout: this._options.openTimeout,
        onSlow: () => {
          if (generation === this._generation) {
            this._set({ connection: 'busy', connectionError: null });
          }
        }
      });
    } catch (err) {
      if (generation !== this._generation) {
        return;
      }
      if (err instanceof NotLoadedError) {
        this._set({ connection: 'not-loaded', connectionError: null, status: null });
      } else if (err instanceof KernelBusyError) {
        this._set({ connection: 'busy', connectionError: err.message });
      } else {
        this._set({ connection: 'error', connectionError: messageOf(err) });
      }
      return;
    }
    if (generation !== this._generation) {
      connection.dispose();
      return;
    }
    this._connection = connection;
    connection.closed.connect(this._onClosed, this);
    const conversations = connection.hello.types.includes('conversation');
    const knowledge = connection.hello.types.includes('knowledge');
    this._set({ connection: 'ready', connectionError: null, conversations, thread: [], knowledge });
    await this.refreshStatus();
    await this.refreshThread();
    await this.searchMemory(this._state.memory.query);
  }

  /** Read the kernel's conversation (it outlives the panel: a reload shows it again). */
  async refreshThread(): Promise<void> {
    const connection = this._connection;
    if (!connection || !this._state.conversations) {
      return;
    }
    try {
      const conversation = parseConversation(await connection.request('conversation'));
      if (connection === this._connection) {
        this._set({ thread: conversation.turns });
      }
    } catch (err) {
      this._requestFailed(err);
    }
  }

  async newConversation(): Promise<void> {
    const connection = this._connection;
    if (!connection || !this._state.conversations || isRunning(this._state.run)) {
      return;
    }
    try {
      const conversation = parseConversation(await connection.request('conversation.new'));
      this._set({ thread: conversation.turns, run: null });
      this.notify({ kind: 'info', text: 'New conversation: the next question stands alone.' });
    } catch (err) {
      this._requestFailed(err);
    }
  }

  async refreshStatus(): Promise<void> {
    const connection = this._connection;
    if (!connection) {
      return;
    }
    try {
      const status = await connection.request('status');
      if (connection === this._connection) {
        this._set({ status });
      }
    } catch (err) {
      this._requestFailed(err);
    }
  }

  async loadExtension(): Promise<void> {
    const kernel = this.handle.kernel;
    if (!kernel) {
      return;
    }
    this._set({ connection: 'loading', connectionError: null });
    try {
      await loadExtension(kernel);
    } catch (err) {
      const message = err instanceof LoadExtensionError ? err.message : messageOf(err);
      this._set({ connection: 'error', connectionError: message });
      return;
    }
    await this.connect();
  }

  async ask(question: string, regenerate = false): Promise<void> {
    question = question.trim();
    const connection = this._connection;
    if (!question || isRunning(this._state.run)) {
      return;
    }
    if (!connection) {
      this.notify({ kind: 'error', text: 'Not connected to the kernel; see the status above.' });
      return;
    }
    const id = ++this._runs;
    this._set({ run: startRun(id, question, regenerate, this.handle.name), notice: null });
    const current = () => (this._state.run && this._state.run.id === id ? this._state.run : null);
    try {
      const raw = await connection.request('ask', { question, regenerate }, event => {
        const run = current();
        if (run) {
          this._set({ run: applyEvent(run, event) });
        }
      });
      const run = current();
      const result = parseAskResult(raw);
      if (result.conversation) {
        this._set({ thread: result.conversation });
      }
      if (run) {
        this._set({ run: finishRun(run, result) });
      }
    } catch (err) {
      const run = current();
      if (run) {
        const code = err instanceof RequestError ? err.code : err instanceof ConnectionClosedError ? 'closed' : 'error';
        const detail = err instanceof RequestError ? err.detail : undefined;
        this._set({ run: failRun(run, { code, message: messageOf(err), ...(detail ? { detail } : {}) }) });
      }
    }
    await this.refreshStatus();
  }

  async regenerate(): Promise<void> {
    const run = this._state.run;
    if (run) {
      await this.ask(run.question, true);
    }
  }

  async stop(): Promise<void> {
    const kernel = this.handle.kernel;
    if (kernel && isRunning(this._state.run)) {
      await interruptKernel(kernel);
    }
  }

  /** Insert the run's code (with its marker) below the active cell; run it when `run`. */
  async insert(run: boolean): Promise<void> {
    const current = this._state.run;
    if (!current || !hasCode(current) || !current.result) {
      return;
    }
    const { code, token } = current.result;
    this._set({ run: withInsertion(current, { token, ran: run, state: run ? 'running' : 'inserting', message: '' }) });
    let outcome: IInsertOutcome;
    try {
      outcome = await this.handle.insertCell(code, run);
    } catch (err) {
      this._updateInsertion(current.id, { state: 'failed', message: `Could not insert the cell: ${messageOf(err)}` });
      return;
    }
    const cell = `cell ${outcome.cellIndex + 1}`;
    if (!run) {
      this._updateInsertion(current.id, {
        state: 'done',
        cellIndex: outcome.cellIndex,
        message: `Inserted as ${cell}. Run it (edited or not) to store it in memory.`
      });
      return;
    }
    if (!outcome.ok) {
      this._updateInsertion(current.id, {
        state: 'failed',
        cellIndex: outcome.cellIndex,
        message: `Inserted as ${cell}; it raised an error, so it was not stored. Fix it and run it again.`
      });
      return;
    }
    let entryId: number | null = null;
    let accepted = false;
    if (token && this._connection) {
      try {
        const pending = await this._connection.request('pending', { token });
        entryId = pending.entry_id;
        accepted = pending.accepted;
      } catch (err) {
        this._requestFailed(err);
      }
    }
    this._updateInsertion(current.id, {
      state: 'done',
      cellIndex: outcome.cellIndex,
      entryId,
      accepted,
      message: accepted
        ? `Inserted as ${cell} and ran; stored in memory as #${entryId}.`
        : `Inserted as ${cell} and ran.`
    });
    await this.refreshStatus();
    await this.searchMemory(this._state.memory.query);
  }

  async copy(): Promise<void> {
    const run = this._state.run;
    if (!run || !hasCode(run)) {
      return;
    }
    try {
      await this._options.copyText(run.result!.code);
      this.notify({ kind: 'success', text: 'Code copied, with its marker line: running it stores it in memory.' });
    } catch (err) {
      this.notify({ kind: 'error', text: `Could not copy: ${messageOf(err)}` });
    }
  }

  async searchMemory(text: string): Promise<void> {
    const seq = ++this._searches;
    this._set({ memory: { ...this._state.memory, query: text, loading: !!this._connection, error: null } });
    const connection = this._connection;
    if (!connection) {
      return;
    }
    try {
      const found = await connection.request('memory.search', { text });
      if (seq === this._searches) {
        this._set({ memory: { ...this._state.memory, entries: found.entries, loading: false, error: null } });
      }
    } catch (err) {
      if (seq === this._searches) {
        this._set({ memory: { ...this._state.memory, entries: [], loading: false, error: messageOf(err) } });
      }
    }
  }

  async insertMemory(id: number, run: boolean): Promise<void> {
    const connection = this._connection;
    if (!connection) {
      return;
    }
    try {
      const got = await connection.request('memory.get', { id });
      const outcome = await this.handle.insertCell(got.code, run);
      const what = `#${id} inserted as cell ${outcome.cellIndex + 1}`;
      this.notify(
        run && !outcome.ok
          ? { kind: 'error', text: `${what}; it raised an error when run.` }
          : { kind: 'success', text: run ? `${what} and ran.` : `${what}.` }
      );
    } catch (err) {
      this.notify({ kind: 'error', text: messageOf(err) });
    }
    if (run) {
      await this.refreshStatus();
    }
  }

  async deleteMemory(id: number, confirmed = false): Promise<void> {
    if (!confirmed) {
      this._set({ memory: { ...this._state.memory, confirmDelete: id } });
      return;
    }
    const connection = this._connection;
    this._set({ memory: { ...this._state.memory, confirmDelete: null } });
    if (!connection) {
      return;
    }
    try {
      await connection.request('memory.delete', { id });
      const entries = this._state.memory.entries.filter(e => e.id !== id);
      this._set({ memory: { ...this._state.memory, entries } });
      this.notify({ kind: 'success', text: `Deleted #${id} from memory.` });
    } catch (err) {
      this.notify({ kind: 'error', text: messageOf(err) });
    }
    await this.refreshStatus();
  }

  cancelDelete(): void {
    this._set({ memory: { ...this._state.memory, confirmDelete: null } });
  }

  loadKnowledge(): Promise<void> {
    return loadKnowledge(this);
  }

  editKnowledge(): Promise<void> {
    return editKnowledge(this, this._options.openFile);
  }

  importKnowledge(): Promise<void> {
    return importKnowledge(this);
  }

  /** Change the Data tab's state (datamodel.ts). */
  setData(change: Partial<IDataView>): void {
    this._set({ data: { ...this._state.data, ...change } });
  }

  notify(notice: INotice | null): void {
    clearTimeout(this._noticeTimer);
    this._set({ notice });
    const timeout = this._options.noticeTimeout ?? 8000;
    if (notice && notice.kind !== 'error' && timeout > 0) {
      this._noticeTimer = setTimeout(() => this._set({ notice: null }), timeout);
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    clearTimeout(this._noticeTimer);
    this._generation++;
    this.handle.changed.disconnect(this._onHandleChanged, this);
    this._dropConnection();
    Signal.clearData(this);
  }

  private _onHandleChanged(_: INotebookHandle, change: 'kernel' | 'restart' | 'path'): void {
    if (change === 'path') {
      this._set({ notebook: this._describe() });
    } else if (change === 'restart') {
      this._generation++;
      this._dropConnection();
      this._set({ connection: 'connecting', status: null, connectionError: null });
    } else {
      this._set({ notebook: this._describe() });
      void this.connect();
    }
  }

  private _onClosed(): void {
    this._connection = null;
    if (!this._disposed && this._state.connection === 'ready') {
      this._set({ connection: 'connecting', status: null });
      void this.connect();
    }
  }

  private _dropConnection(): void {
    const connection = this._connection;
    this._connection = null;
    if (connection) {
      connection.closed.disconnect(this._onClosed, this);
      connection.dispose();
    }
  }

  private _requestFailed(err: unknown): void {
    if (err instanceof ConnectionClosedError) {
      return; // _onClosed reconnects
    }
    this.notify({ kind: 'error', text: err instanceof PanelError ? err.message : messageOf(err) });
  }

  private _updateInsertion(runId: number, change: Parameters<typeof withInsertion>[1]): void {
    const run = this._state.run;
    if (run && run.id === runId) {
      this._set({ run: withInsertion(run, change) });
    }
  }

  private _describe(): IPanelState['notebook'] {
    const h = this.handle;
    return { id: h.id, name: h.name, path: h.path, kernelName: h.kernelName };
  }

  private _set(change: Partial<IPanelState>): void {
    if (this._disposed) {
      return;
    }
    this._state = { ...this._state, ...change };
    this._changed.emit();
  }

  private _state: IPanelState;
  private _changed = new Signal<this, void>(this);
  private _connection: PanelConnection | null = null;
  private _generation = 0;
  private _runs = 0;
  private _searches = 0;
  private _disposed = false;
  private _noticeTimer: ReturnType<typeof setTimeout> | undefined = undefined;
}

/** Follows the active notebook; the view renders `state` of that notebook's session. */
export class AssistantModel implements IAssistantModel {
  constructor(private readonly _options: IModelOptions) {}

  get state(): IPanelState {
    return this._active ? this._active.state : NO_NOTEBOOK;
  }

  get stateChanged(): ISignal<IAssistantModel, void> {
    return this._stateChanged;
  }

  get active(): NotebookSession | null {
    return this._active;
  }

  setNotebook(handle: INotebookHandle | null): void {
    if (!handle) {
      this._active = null;
      this._stateChanged.emit();
      return;
    }
    let session = this._sessions.get(handle.id);
    if (!session) {
      session = new NotebookSession(handle, this._options);
      this._sessions.set(handle.id, session);
      session.changed.connect(this._onSessionChanged, this);
      handle.disposed.connect(() => this._forget(handle.id));
      session.start();
    }
    this._active = session;
    this._stateChanged.emit();
  }

  refresh(): Promise<void> {
    return this._active ? this._active.connect() : Promise.resolve();
  }

  loadExtension(): Promise<void> {
    return this._active ? this._active.loadExtension() : Promise.resolve();
  }

  ask(question: string, regenerate = false): Promise<void> {
    return this._active ? this._active.ask(question, regenerate) : Promise.resolve();
  }

  regenerate(): Promise<void> {
    return this._active ? this._active.regenerate() : Promise.resolve();
  }

  stop(): Promise<void> {
    return this._active ? this._active.stop() : Promise.resolve();
  }

  insert(run: boolean): Promise<void> {
    return this._active ? this._active.insert(run) : Promise.resolve();
  }

  copy(): Promise<void> {
    return this._active ? this._active.copy() : Promise.resolve();
  }

  searchMemory(text: string): Promise<void> {
    return this._active ? this._active.searchMemory(text) : Promise.resolve();
  }

  insertMemory(id: number, run: boolean): Promise<void> {
    return this._active ? this._active.insertMemory(id, run) : Promise.resolve();
  }

  deleteMemory(id: number, confirmed = false): Promise<void> {
    return this._active ? this._active.deleteMemory(id, confirmed) : Promise.resolve();
  }

  cancelDelete(): void {
    this._active?.cancelDelete();
  }

  dismissNotice(): void {
    this._active?.notify(null);
  }

  newConversation(): Promise<void> {
    return this._active ? this._active.newConversation() : Promise.resolve();
  }

  loadKnowledge(): Promise<void> {
    return this._active ? this._active.loadKnowledge() : Promise.resolve();
  }

  editKnowledge(): Promise<void> {
    return this._active ? this._active.editKnowledge() : Promise.resolve();
  }

  importKnowledge(): Promise<void> {
    return this._active ? this._active.importKnowledge() : Promise.resolve();
  }

  dispose(): void {
    for (const id of [...this._sessions.keys()]) {
      this._forget(id);
    }
    Signal.clearData(this);
  }

  private _onSessionChanged(session: NotebookSession): void {
    if (session === this._active) {
      this._stateChanged.emit();
    }
  }

  private _forget(id: string): void {
    const session = this._sessions.get(id);
    if (!session) {
      return;
    }
    this._sessions.delete(id);
    session.dispose();
    if (session === this._active) {
      this._active = null;
      this._stateChanged.emit();
    }
  }

  private _sessions = new Map<string, NotebookSession>();
  private _active: NotebookSession | null = null;
  private _stateChanged = new Signal<IAssistantModel, void>(this);
}
