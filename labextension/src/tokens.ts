/** Tokens and interfaces of the EHR assistant panel. */

import type { Kernel } from '@jupyterlab/services';
import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

import { IKnowledgeView, IMemoryEntry, IStatus, ITurn } from './protocol';
import { IRun } from './state';

export const PLUGIN_ID = '@ehr-magic/panel:plugin';

/**
 * How the panel stands with the active notebook's kernel.
 * - no-notebook: no notebook open; no-kernel: the notebook has no (running) kernel
 * - connecting: opening the comm; busy: the kernel has not answered yet (running a cell)
 * - not-loaded: the kernel has not run `%load_ext ehr_magic`; loading: running it now
 * - ready: connected; error: something else went wrong (see `connectionError`)
 */
export type ConnectionState =
  | 'no-notebook'
  | 'no-kernel'
  | 'connecting'
  | 'busy'
  | 'not-loaded'
  | 'loading'
  | 'ready'
  | 'error';

export interface IMemoryView {
  query: string;
  entries: IMemoryEntry[];
  loading: boolean;
  error: string | null;
  /** id of the entry whose delete button asks for confirmation */
  confirmDelete: number | null;
}

/** The Data tab: what ehr-magic believes about the data, and the file being corrected. */
export interface IDataView {
  knowledge: IKnowledgeView | null;
  loading: boolean;
  error: string | null;
  /** the knowledge file Edit wrote, as the server and the kernel name it */
  file: { serverPath: string; kernelPath: string } | null;
  /** the problems of the last Import, one sentence each (nothing was stored) */
  problems: string[];
  /** what the last Edit or Import did */
  message: string | null;
  busy: boolean;
}

export interface INotice {
  kind: 'info' | 'success' | 'error';
  text: string;
}

/** What the view renders: the state of the active notebook's session. */
export interface IPanelState {
  notebook: { id: string; name: string; path: string; kernelName: string } | null;
  connection: ConnectionState;
  connectionError: string | null;
  status: IStatus | null;
  run: IRun | null;
  memory: IMemoryView;
  notice: INotice | null;
  /** the conversation so far (earlier questions and the current one once answered) */
  thread: ITurn[];
  /** false when the kernel's ehr-magic has no conversations (no thread, no button) */
  conversations: boolean;
  /** the Data tab; `knowledge` is false for a kernel without the knowledge requests (protocol v1) */
  data: IDataView;
  knowledge: boolean;
}

/** The result of inserting a cell in a notebook. */
export interface IInsertOutcome {
  cellIndex: number;
  /** true when the cell was run and raised no error */
  ok: boolean;
}

/**
 * One notebook as the model needs it; implemented over `NotebookPanel` in
 * notebook.ts, and by fakes in the unit tests.
 */
export interface INotebookHandle {
  readonly id: string;
  readonly name: string;
  readonly path: string;
  readonly kernelName: string;
  /** The running kernel, or null when there is none (yet). */
  readonly kernel: Kernel.IKernelConnection | null;
  /** Emitted when the kernel changes, restarts or dies, or the notebook is renamed. */
  readonly changed: ISignal<INotebookHandle, 'kernel' | 'restart' | 'path'>;
  readonly disposed: ISignal<INotebookHandle, void>;
  /** Insert `code` as a new code cell below the active cell; run it when `run`. */
  insertCell(code: string, run: boolean): Promise<IInsertOutcome>;
}

export interface IAssistantModel {
  readonly state: IPanelState;
  readonly stateChanged: ISignal<IAssistantModel, void>;
  setNotebook(handle: INotebookHandle | null): void;
  refresh(): Promise<void>;
  loadExtension(): Promise<void>;
  ask(question: string, regenerate?: boolean): Promise<void>;
  regenerate(): Promise<void>;
  stop(): Promise<void>;
  insert(run: boolean): Promise<void>;
  copy(): Promise<void>;
  searchMemory(text: string): Promise<void>;
  insertMemory(id: number, run: boolean): Promise<void>;
  deleteMemory(id: number, confirmed?: boolean): Promise<void>;
  cancelDelete(): void;
  dismissNotice(): void;
  /** Start a new conversation: the next question stands alone. */
  newConversation(): Promise<void>;
  /** Read what ehr-magic believes about the data (the Data tab). */
  loadKnowledge(): Promise<void>;
  /** Write the knowledge file beside the notebook and open it in JupyterLab's editor. */
  editKnowledge(): Promise<void>;
  /** Check the knowledge file against the database and store it (problems show in the tab). */
  importKnowledge(): Promise<void>;
}

/** The panel's model, for other plugins (e.g. to ask from a context menu). */
export const IAssistantModel = new Token<IAssistantModel>(
  '@ehr-magic/panel:IAssistantModel',
  'The EHR assistant panel: ask questions about the EHR of the active notebook.'
);
