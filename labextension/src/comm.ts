/**
 * The one wrapper around kernel traffic: the comm to `ehr_magic.panel`, running
 * `%load_ext ehr_magic`, and interrupting. Everything that can go wrong becomes one
 * of the typed errors below; nothing else in the panel talks to a kernel.
 */

import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import {
  COMM_TARGET,
  IHello,
  IResults,
  MalformedMessageError,
  PROTOCOL_VERSION,
  SUPPORTED_VERSIONS,
  RequestType,
  RunEvent,
  makeRequest,
  parseMessage
} from './protocol';

/** Base class of the panel's errors; `message` is written for the analyst. */
export class PanelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
    Object.setPrototypeOf(this, new.target.prototype);
  }
}

/** The kernel has no `ehr_magic.panel` comm target: `%load_ext ehr_magic` was not run. */
export class NotLoadedError extends PanelError {}

/** The kernel did not answer in time (usually: it is busy running a cell). */
export class KernelBusyError extends PanelError {}

/** The comm closed (kernel restarted or shut down, extension unloaded). */
export class ConnectionClosedError extends PanelError {}

/** The kernel sent something that is not protocol v1. */
export class ProtocolError extends PanelError {}

/** The kernel answered a request with an error reply. */
export class RequestError extends PanelError {
  constructor(
    readonly code: string,
    message: string,
    readonly detail?: string
  ) {
    super(message);
  }
}

/** `%load_ext ehr_magic` failed in the kernel. */
export class LoadExtensionError extends PanelError {}

export type EventCallback = (event: RunEvent) => void;

interface IPending {
  resolve: (value: unknown) => void;
  reject: (reason: PanelError) => void;
  onEvent?: EventCallback;
}

export interface IOpenOptions {
  /** Milliseconds to wait for the kernel's greeting (default 15000). */
  timeout?: number;
  /**
   * Called when the greeting has not come within `timeout` (the kernel is busy running
   * a cell); with it, `open` keeps waiting instead of rejecting with `KernelBusyError`.
   */
  onSlow?: () => void;
}

/** An open comm to the kernel's panel handler: requests with ids, streamed events. */
export class PanelConnection {
  private constructor(
    private readonly _comm: Kernel.IComm,
    readonly hello: IHello
  ) {}

  /**
   * Open the comm and wait for the kernel's hello. Rejects with `NotLoadedError` when
   * the kernel closes the comm at once (no such target), `KernelBusyError` on timeout.
   */
  static open(kernel: Kernel.IKernelConnection, options: IOpenOptions = {}): Promise<PanelConnection> {
    const timeout = options.timeout ?? 15000;
    return new Promise<PanelConnection>((resolve, reject) => {
      let settled = false;
      let connection: PanelConnection | null = null;
      let comm: Kernel.IComm;
      const settle = (error: PanelError | null, hello?: IHello): void => {
        if (settled) {
          return;
        }
        settled = true;
        clearTimeout(timer);
        if (error) {
          if (!comm.isDisposed) {
            try {
              comm.close();
            } catch {
              /* already gone */
            }
          }
          reject(error);
        } else {
          connection = new PanelConnection(comm, hello!);
          resolve(connection);
        }
      };
      const timer = setTimeout(() => {
        if (options.onSlow) {
          options.onSlow();
          return;
        }
        settle(
          new KernelBusyError(
            'The kernel did not answer within ' +
              `${Math.round(timeout / 1000)} s; it may be busy running a cell.`
          )
        );
      }, timeout);
      try {
        comm = kernel.createComm(COMM_TARGET);
      } catch (err) {
        settle(new ConnectionClosedError(`Cannot open a comm to the kernel: ${String(err)}`));
        return;
      }
      comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
        if (connection) {
          connection._onMessage(msg.content.data);
          return;
        }
        let parsed;
        try {
          parsed = parseMessage(msg.content.data);
        } catch (err) {
          settle(new ProtocolError((err as Error).message));
          return;
        }
        if (parsed.kind === 'hello') {
          if (!SUPPORTED_VERSIONS.includes(parsed.hello.protocol)) {
            settle(
              new ProtocolError(
                `The kernel's ehr-magic speaks panel protocol v${parsed.hello.protocol}, ` +
                  `this panel v${SUPPORTED_VERSIONS.join(' or v')}; upgrade ehr-magic and reload the page.`
              )
            );
          } else {
            settle(null, parsed.hello);
          }
        }
      };
      comm.onClose = () => {
        if (connection) {
          connection._onClose();
        } else {
          settle(new NotLoadedError('ehr_magic is not loaded in this kernel.'));
        }
      };
      try {
        comm.open({ v: PROTOCOL_VERSION });
      } catch (err) {
        settle(new ConnectionClosedError(`Cannot open a comm to the kernel: ${String(err)}`));
      }
    });
  }

  /** Emitted once when the comm closes; pending requests are rejected. */
  get closed(): ISignal<this, PanelError> {
    return this._closed;
  }

  get isOpen(): boolean {
    return !this._isClosed;
  }

  /** Send one request; `onEvent` receives the events streamed before its reply. */
  request<T extends RequestType>(
    type: T,
    params: Record<string, unknown> = {},
    onEvent?: EventCallback
  ): Promise<IResults[T]> {
    if (this._isClosed) {
      return Promise.reject(new ConnectionClosedError('The connection to the kernel is closed.'));
    }
    const id = `r${++this._counter}`;
    return new Promise<IResults[T]>((resolve, reject) => {
      this._pending.set(id, { resolve: resolve as (v: unknown) => void, reject, onEvent });
      try {
        // a v1 kernel is spoken to in v1 (it refuses v2 requests)
        const version = Math.min(this.hello.protocol, PROTOCOL_VERSION);
        this._comm.send(makeRequest(id, type, params, version) as any);
      } catch (err) {
        this._pending.delete(id);
        reject(new ConnectionClosedError(`Cannot send to the kernel: ${String(err)}`));
      }
    });
  }

  /** Requests sent and not yet answered. */
  get pendingCount(): number {
    return this._pending.size;
  }

  /** Close the comm; pending requests are rejected with `ConnectionClosedError`. */
  dispose(): void {
    if (this._isClosed) {
      return;
    }
    if (!this._comm.isDisposed) {
      try {
        this._comm.close();
      } catch {
        /* the kernel is gone already */
      }
    }
    this._onClose();
  }

  private _onMessage(data: unknown): void {
    let message;
    try {
      message = parseMessage(data);
    } catch (err) {
      if (err instanceof MalformedMessageError) {
        console.warn(`ehr-magic panel: ${err.message}`);
        return;
      }
      throw err;
    }
    if (message.kind === 'hello') {
      return;
    }
    const pending = message.id === null ? undefined : this._pending.get(message.id);
    if (!pending) {
      if (message.kind === 'error') {
        console.warn(`ehr-magic panel: kernel error: ${message.error.message}`);
      }
      return;
    }
    switch (message.kind) {
      case 'event':
        try {
          pending.onEvent?.(message.event);
        } catch (err) {
          console.error('ehr-magic panel: event handler failed', err);
        }
        break;
      case 'result':
        this._pending.delete(message.id);
        pending.resolve(message.result);
        break;
      case 'error':
        this._pending.delete(message.id!);
        pending.reject(new RequestError(message.error.code, message.error.message, message.error.detail));
        break;
    }
  }

  private _onClose(): void {
    if (this._isClosed) {
      return;
    }
    this._isClosed = true;
    const error = new ConnectionClosedError(
      'The connection to the kernel closed (restarted, shut down, or ehr_magic unloaded).'
    );
    const pending = [...this._pending.values()];
    this._pending.clear();
    pending.forEach(p => p.reject(error));
    this._closed.emit(error);
  }

  private _counter = 0;
  private _isClosed = false;
  private _pending = new Map<string, IPending>();
  private _closed = new Signal<this, PanelError>(this);
}

export const LOAD_CODE = '%load_ext ehr_magic';

/** Run `%load_ext ehr_magic` silently (no cell, no history). */
export async function loadExtension(kernel: Kernel.IKernelConnection): Promise<void> {
  let reply: KernelMessage.IExecuteReplyMsg;
  try {
    const future = kernel.requestExecute(
      { code: LOAD_CODE, silent: true, store_history: false, allow_stdin: false, stop_on_error: false },
      true
    );
    reply = await future.done;
  } catch (err) {
    throw new LoadExtensionError(`Cannot run ${LOAD_CODE}: ${String(err)}`);
  }
  const content = reply.content as KernelMessage.IExecuteReplyMsg['content'] & { ename?: string; evalue?: string };
  if (content.status === 'ok') {
    return;
  }
  if (content.ename === 'ModuleNotFoundError') {
    throw new LoadExtensionError(
      "ehr_magic is not installed in this kernel's environment: run `pip install ehr-magic` there " +
        'and restart the kernel.'
    );
  }
  throw new LoadExtensionError(
    `${LOAD_CODE} failed: ${content.ename ?? 'error'}: ${content.evalue ?? content.status}`
  );
}

/** Interrupt the kernel (stops a running `ask`; its reply is an `interrupted` error). */
export async function interruptKernel(kernel: Kernel.IKernelConnection): Promise<void> {
  await kernel.interrupt();
}
