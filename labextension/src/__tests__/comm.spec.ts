import {
  ConnectionClosedError,
  KernelBusyError,
  LoadExtensionError,
  NotLoadedError,
  PanelConnection,
  PanelError,
  ProtocolError,
  RequestError,
  interruptKernel,
  loadExtension
} from '../comm';
import { COMM_TARGET } from '../protocol';
import { FakeKernel, STATUS, settle } from './fakes';

describe('PanelConnection.open', () => {
  it('opens a comm to the ehr_magic.panel target and resolves on the hello', async () => {
    const kernel = new FakeKernel();
    const connection = await PanelConnection.open(kernel.asKernel());
    expect(kernel.comm.targetName).toBe(COMM_TARGET);
    expect(connection.hello.protocol).toBe(1);
    expect(connection.isOpen).toBe(true);
  });

  it('rejects with NotLoadedError when the kernel closes the comm (no such target)', async () => {
    const kernel = new FakeKernel();
    kernel.loaded = false;
    const opening = PanelConnection.open(kernel.asKernel());
    await expect(opening).rejects.toBeInstanceOf(NotLoadedError);
    await expect(opening).rejects.toBeInstanceOf(PanelError);
  });

  it('rejects with KernelBusyError when the kernel does not answer in time', async () => {
    const kernel = new FakeKernel();
    kernel.greets = false;
    await expect(PanelConnection.open(kernel.asKernel(), { timeout: 10 })).rejects.toBeInstanceOf(KernelBusyError);
    expect(kernel.comm.isDisposed).toBe(true); // the half-open comm is closed
  });

  it('keeps waiting after onSlow, and resolves when the kernel greets at last', async () => {
    const kernel = new FakeKernel();
    kernel.greets = false;
    const slow = jest.fn();
    const opening = PanelConnection.open(kernel.asKernel(), { timeout: 5, onSlow: slow });
    await new Promise(r => setTimeout(r, 20));
    expect(slow).toHaveBeenCalledTimes(1);
    kernel.comm.deliver({ v: 1, kind: 'hello', protocol: 1, ehr_magic: '0.1.0', types: [] });
    await expect(opening).resolves.toBeInstanceOf(PanelConnection);
  });

  it('rejects a kernel that speaks another protocol version', async () => {
    const kernel = new FakeKernel();
    kernel.greets = false;
    const opening = PanelConnection.open(kernel.asKernel());
    await settle();
    kernel.comm.deliver({ v: 1, kind: 'hello', protocol: 3, ehr_magic: '9.0', types: [] });
    await expect(opening).rejects.toBeInstanceOf(ProtocolError);
    const again = PanelConnection.open(kernel.asKernel());
    await settle();
    kernel.comm.deliver({ v: 3, kind: 'hello' });
    await expect(again).rejects.toThrow(/protocol v3/);
  });
});

describe('PanelConnection.request', () => {
  async function open(kernel = new FakeKernel()) {
    return { kernel, connection: await PanelConnection.open(kernel.asKernel()) };
  }

  it('sends v1 requests with fresh ids and resolves with the matching result', async () => {
    const { kernel, connection } = await open();
    const [a, b] = await Promise.all([connection.request('status'), connection.request('status')]);
    expect(a).toEqual(STATUS);
    expect(b).toEqual(STATUS);
    expect(kernel.requests.map(r => [r.v, r.id, r.type])).toEqual([
      [1, 'r1', 'status'],
      [1, 'r2', 'status']
    ]);
    expect(connection.pendingCount).toBe(0);
  });

  it('passes streamed events to onEvent before resolving', async () => {
    const { kernel, connection } = await open();
    kernel.handlers.ask = (params, r) => {
      r.event({ kind: 'phase', phase: 'code', detail: 'step 1/10', elapsed: 0.1 });
      r.event({ kind: 'token', text: 'answer = 1', elapsed: 0.2 });
      r.result({ question: params.question, status: 'answered' });
    };
    const events: any[] = [];
    const result = await connection.request('ask', { question: 'q?' }, e => events.push(e));
    expect(events.map(e => e.kind)).toEqual(['phase', 'token']);
    expect(result.status).toBe('answered');
    expect(kernel.requests[0].params).toEqual({ question: 'q?' });
  });

  it('turns error replies into RequestError with code and detail', async () => {
    const { kernel, connection } = await open();
    kernel.handlers.ask = (_, r) => r.error('user_error', 'No model configured: set EHR_MAGIC_MODEL', 'tb');
    const failure = connection.request('ask', { question: 'q' });
    await expect(failure).rejects.toBeInstanceOf(RequestError);
    await failure.catch((e: RequestError) => {
      expect(e.code).toBe('user_error');
      expect(e.message).toContain('EHR_MAGIC_MODEL');
      expect(e.detail).toBe('tb');
    });
  });

  it('ignores malformed messages and replies to unknown ids', async () => {
    const { kernel, connection } = await open();
    const warn = jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    kernel.manual = true;
    const pending = connection.request('status');
    kernel.comm.deliver('garbage');
    kernel.comm.deliver({ v: 1, kind: 'result', id: 'r999', result: {} });
    kernel.comm.deliver({ v: 1, kind: 'error', id: null, error: { code: 'bad_message', message: 'x' } });
    kernel.flush();
    await expect(pending).resolves.toEqual(STATUS);
    expect(warn).toHaveBeenCalled();
    warn.mockRestore();
  });

  it('rejects pending requests and signals once when the comm closes', async () => {
    const { kernel, connection } = await open();
    kernel.manual = true;
    const closed = jest.fn();
    connection.closed.connect(closed);
    const pending = connection.request('status');
    kernel.comm.closeFromKernel();
    await expect(pending).rejects.toBeInstanceOf(ConnectionClosedError);
    expect(closed).toHaveBeenCalledTimes(1);
    expect(connection.isOpen).toBe(false);
    await expect(connection.request('status')).rejects.toBeInstanceOf(ConnectionClosedError);
    connection.dispose();
    expect(closed).toHaveBeenCalledTimes(1);
  });

  it('dispose closes the comm', async () => {
    const { kernel, connection } = await open();
    connection.dispose();
    expect(kernel.comm.isDisposed).toBe(true);
    expect(connection.isOpen).toBe(false);
  });
});

describe('loadExtension and interrupt', () => {
  it('runs %load_ext ehr_magic silently', async () => {
    const kernel = new FakeKernel();
    kernel.loaded = false;
    await loadExtension(kernel.asKernel());
    expect(kernel.executed).toEqual([
      expect.objectContaining({ code: '%load_ext ehr_magic', silent: true, store_history: false })
    ]);
  });

  it('explains a kernel without ehr_magic installed', async () => {
    const kernel = new FakeKernel();
    kernel.executeReply = { status: 'error', ename: 'ModuleNotFoundError', evalue: "No module named 'ehr_magic'" };
    await expect(loadExtension(kernel.asKernel())).rejects.toThrow(/pip install ehr-magic/);
    kernel.executeReply = { status: 'error', ename: 'ValueError', evalue: 'boom' };
    await expect(loadExtension(kernel.asKernel())).rejects.toBeInstanceOf(LoadExtensionError);
    await expect(loadExtension(kernel.asKernel())).rejects.toThrow('ValueError: boom');
  });

  it('interrupts the kernel', async () => {
    const kernel = new FakeKernel();
    await interruptKernel(kernel.asKernel());
    expect(kernel.interrupts).toBe(1);
  });
});
