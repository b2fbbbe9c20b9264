/**
 * `INotebookHandle` over a JupyterLab `NotebookPanel`: which kernel it has, when that
 * kernel changes or restarts, and inserting (and running) cells through JupyterLab's
 * own `NotebookActions`, so the cell runs like any other and the kernel's post-run
 * hook sees it.
 */

import type { ISessionContext, ISessionContextDialogs } from '@jupyterlab/apputils';
import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import type { Kernel } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { IInsertOutcome, INotebookHandle } from './tokens';

type Change = 'kernel' | 'restart' | 'path';

const LOST: Kernel.Status[] = ['restarting', 'autorestarting', 'dead'];
const UP: Kernel.Status[] = ['idle', 'busy'];

export class NotebookHandle implements INotebookHandle {
  constructor(
    private readonly _panel: NotebookPanel,
    private readonly _dialogs?: ISessionContextDialogs
  ) {
    const session = _panel.sessionContext;
    session.kernelChanged.connect(this._onKernelChanged, this);
    session.statusChanged.connect(this._onStatus, this);
    _panel.context.pathChanged.connect(() => this._changed.emit('path'));
    _panel.disposed.connect(() => {
      this._disposed.emit();
      Signal.clearData(this);
    });
    this._wasUp = UP.includes(session.kernelDisplayStatus as Kernel.Status);
  }

  get id(): string {
    return this._panel.id;
  }

  get name(): string {
    return this._panel.title.label || this._panel.context.path.split('/').pop() || 'notebook';
  }

  get path(): string {
    return this._panel.context.path;
  }

  get kernelName(): string {
    return this._panel.sessionContext.kernelDisplayName;
  }

  get kernel(): Kernel.IKernelConnection | null {
    return this._panel.sessionContext.session?.kernel ?? null;
  }

  get changed(): ISignal<INotebookHandle, Change> {
    return this._changed;
  }

  get disposed(): ISignal<INotebookHandle, void> {
    return this._disposed;
  }

  async insertCell(code: string, run: boolean): Promise<IInsertOutcome> {
    const panel = this._panel;
    await panel.context.ready;
    const notebook = panel.content;
    if (!notebook.model) {
      throw new Error('the notebook has no content yet');
    }
    if (notebook.model.cells.length === 0 || notebook.activeCellIndex < 0) {
      notebook.activeCellIndex = Math.max(0, notebook.model.cells.length - 1);
    }
    NotebookActions.insertBelow(notebook);
    if (notebook.activeCell && notebook.activeCell.model.type !== 'code') {
      NotebookActions.changeCellType(notebook, 'code');
    }
    const cell = notebook.activeCell;
    if (!cell) {
      throw new Error('no cell was inserted');
    }
    cell.model.sharedModel.setSource(code);
    const cellIndex = notebook.activeCellIndex;
    notebook.scrollToItem(cellIndex).catch(() => undefined);
    if (!run) {
      return { cellIndex, ok: true };
    }
    const ok = await NotebookActions.run(notebook, panel.sessionContext as ISessionContext, this._dialogs);
    return { cellIndex, ok };
  }

  private _onKernelChanged(): void {
    const kernel = this.kernel;
    this._wasUp = !!kernel && UP.includes(kernel.status);
    this._changed.emit(this._wasUp || !kernel ? 'kernel' : 'restart');
  }

  private _onStatus(_: ISessionContext, status: Kernel.Status): void {
    if (LOST.includes(status)) {
      if (this._wasUp) {
        this._wasUp = false;
        this._changed.emit('restart');
      }
    } else if (UP.includes(status) && !this._wasUp) {
      this._wasUp = true;
      this._changed.emit('kernel'); // started or restarted: ready for a comm
    }
  }

  private _wasUp: boolean;
  private _changed = new Signal<INotebookHandle, Change>(this);
  private _disposed = new Signal<INotebookHandle, void>(this);
}
