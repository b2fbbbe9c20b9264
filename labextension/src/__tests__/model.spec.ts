import { AssistantModel, NotebookSession } from '../model';
import { FakeKernel, FakeNotebook, STATUS, settle } from './fakes';

const ANSWER = {
  question: 'How many patients are there?', status: 'answered', source: 'agent', message: '',
  answer: { kind: 'value', value: 94, type: 'int' }, answer_text: '94',
  code: '# ehr-magic #tok1: How many patients are there?\nanswer = 94\n', raw_code: 'answer = 94', token: 'tok1',
  knowledge: '- patients has one row per patient', entry_id: null,
  steps: [{ index: 1, code: 'answer = 94', succeeded: true }], examples: [], model: 'fake-model', llm_calls: 1,
  prompt_tokens: 100, completion_tokens: 10, seconds: 0.5
};

function setup(kernel: FakeKernel | null = new FakeKernel()) {
  const notebook = new FakeNotebook('nb1', kernel);
  const copied: string[] = [];
  const model = new AssistantModel({ copyText: t => void copied.push(t), noticeTimeout: 0 });
  const changes = jest.fn();
  model.stateChanged.connect(changes);
  return { kernel: kernel!, notebook, model, copied, changes };
}

describe('AssistantModel connection', () => {
  it('has no notebook until one is set', () => {
    const { model } = setup();
    expect(model.state.connection).toBe('no-notebook');
    expect(model.state.notebook).toBeNull();
  });

  it('connects to the active notebook and reads status and memory', async () => {
    const { model, notebook, changes } = setup();
    model.setNotebook(notebook);
    expect(model.state.notebook?.name).toBe('Untitled.ipynb');
    await settle(30);
    expect(model.state.connection).toBe('ready');
    expect(model.state.status).toEqual(STATUS);
    expect(model.state.memory.entries.map(e => e.id)).toEqual([1]);
    expect(changes).toHaveBeenCalled();
  });

  it('reports a notebook without kernel', async () => {
    const { model } = setup();
    model.setNotebook(new FakeNotebook('nb0', null));
    await settle();
    expect(model.state.connection).toBe('no-kernel');
  });

  it('says when ehr_magic is not loaded, and loads it on request', async () => {
    const { model, notebook, kernel } = setup();
    kernel.loaded = false;
    model.setNotebook(notebook);
    await settle(30);
    expect(model.state.connection).toBe('not-loaded');
    const loading = model.loadExtension();
    expect(model.state.connection).toBe('loading');
    await loading;
    await settle(30);
    expect(kernel.executed[0].code).toBe('%load_ext ehr_magic');
    expect(model.state.connection).toBe('ready');
  });

  it('shows a failed load', async () => {
    const { model, notebook, kernel } = setup();
    kernel.loaded = false;
    kernel.executeReply = { status: 'error', ename: 'ModuleNotFoundError', evalue: 'No module' };
    model.setNotebook(notebook);
    await settle(30);
    await model.loadExtension();
    expect(model.state.connection).toBe('error');
    expect(model.state.connectionError).toMatch(/pip install ehr-magic/);
  });

  it('waits for a busy kernel', async () => {
    const kernel = new FakeKernel();
    kernel.greets = false;
    const notebook = new FakeNotebook('nb1', kernel);
    const model = new AssistantModel({ copyText: () => undefined, openTimeout: 5 });
    model.setNotebook(notebook);
    await new Promise(r => setTimeout(r, 20));
    expect(model.state.connection).toBe('busy');
    kernel.comm.deliver({ v: 1, kind: 'hello', protocol: 1, ehr_magic: '0.1.0', types: [] });
    await settle(30);
    expect(model.state.connection).toBe('ready');
  });

  it('reconnects after a kernel restart and after the comm closes', async () => {
    const { model, notebook, kernel } = setup();
    model.setNotebook(notebook);
    await settle(30);
    notebook.changed.emit('restart');
    expect(model.state.connection).toBe('connecting');
    expect(model.state.status).toBeNull();
    kernel.loaded = false; // a restarted kernel has not loaded ehr_magic
    notebook.changed.emit('kernel');
    await settle(30);
    expect(model.state.connection).toBe('not-loaded');
    kernel.loaded = true;
    await model.refresh();
    await settle(30);
    expect(model.state.connection).toBe('ready');
    kernel.comm.closeFromKernel();
    await settle(30);
    expect(model.state.connection).toBe('ready');
    expect(kernel.comms.length).toBe(4); // open, restart (not loaded), refresh, reconnect
  });

  it('keeps one session per notebook and follows the active one', async () => {
    const { model, notebook, kernel } = setup();
    kernel.handlers.ask = (p, r) => r.result({ ...ANSWER, question: p.question });
    const other = new FakeNotebook('nb2', new FakeKernel());
    other.name = 'other.ipynb';
    model.setNotebook(notebook);
    await settle(30);
    await model.ask('How many patients are there?');
    model.setNotebook(other);
    await settle(30);
    expect(model.state.notebook?.name).toBe('other.ipynb');
    expect(model.state.run).toBeNull();
    model.setNotebook(notebook);
    expect(model.state.run?.state).toBe('answered');
    notebook.disposed.emit();
    expect(model.state.connection).toBe('no-notebook');
  });
});

describe('AssistantModel ask and insert', () => {
  async function ready() {
    const s = setup();
    s.model.setNotebook(s.notebook);
    await settle(30);
    return s;
  }

  it('shows the live run then the answer', async () => {
    const { model, kernel } = await ready();
    kernel.manual = true;
    kernel.handlers.ask = (params, r) => {
      r.event({ kind: 'phase', phase: 'examples', detail: '', elapsed: 0 });
      r.event({ kind: 'examples', examples: [{ id: 'seed:x:1', question: 'ex', origin: 'seed' }], elapsed: 0 });
      r.event({ kind: 'phase', phase: 'code', detail: 'step 1/10', elapsed: 0.1 });
      r.event({ kind: 'token', text: 'answer = 94', elapsed: 0.2 });
      r.result({ ...ANSWER, question: params.question, examples: [{ id: 'seed:x:1', question: 'ex', origin: 'seed' }] });
    };
    const asking = model.ask('  How many patients are there?  ');
    expect(model.state.run?.state).toBe('running');
    expect(model.state.run?.question).toBe('How many patients are there?');
    await model.ask('a second question while running is ignored');
    expect(kernel.requests.filter(r => r.type === 'ask')).toHaveLength(1);
    kernel.manual = false;
    kernel.flush();
    await asking;
    const run = model.state.run!;
    expect(run.state).toBe('answered');
    expect(run.timeline.map(t => t.phase)).toEqual(['examples', 'code']);
    expect(run.examples[0].question).toBe('ex');
    expect(run.result?.answer).toEqual({ kind: 'value', value: 94, type: 'int' });
    expect(kernel.requests.find(r => r.type === 'ask').params).toEqual({ question: 'How many patients are there?', regenerate: false });
  });

  it('shows errors from the kernel without losing the question', async () => {
    const { model, kernel } = await ready();
    kernel.handlers.ask = (_, r) => r.error('user_error', 'No model configured: set EHR_MAGIC_MODEL');
    await model.ask('q?');
    expect(model.state.run?.state).toBe('error');
    expect(model.state.run?.error?.message).toContain('EHR_MAGIC_MODEL');
    kernel.handlers.ask = (_, r) => r.error('interrupted', 'Interrupted; nothing was stored.');
    await model.ask('q?');
    expect(model.state.run?.state).toBe('interrupted');
  });

  it('stop interrupts the kernel only while running', async () => {
    const { model, kernel } = await ready();
    await model.stop();
    expect(kernel.interrupts).toBe(0);
    kernel.handlers.ask = () => undefined; // never answers
    void model.ask('slow?');
    await model.stop();
    expect(kernel.interrupts).toBe(1);
  });

  it('Insert & run inserts the marked code, runs it and reports the memory entry', async () => {
    const { model, kernel, notebook } = await ready();
    kernel.handlers.ask = (_, r) => r.result(ANSWER);
    await model.ask('How many patients are there?');
    await model.insert(true);
    expect(notebook.inserted).toEqual([{ code: ANSWER.code, run: true }]);
    expect(kernel.requests.find(r => r.type === 'pending').params).toEqual({ token: 'tok1' });
    expect(model.state.run?.insertion).toMatchObject({ state: 'done', ran: true, entryId: 7, accepted: true });
    expect(model.state.run?.insertion?.message).toBe('Inserted as cell 1 and ran; stored in memory as #7.');
  });

  it('Insert alone does not run, and a failing cell is reported', async () => {
    const { model, kernel, notebook } = await ready();
    kernel.handlers.ask = (_, r) => r.result(ANSWER);
    await model.ask('How many patients are there?');
    await model.insert(false);
    expect(notebook.inserted[0].run).toBe(false);
    expect(model.state.run?.insertion?.message).toMatch(/Run it .* to store it in memory/);
    notebook.insertOk = false;
    await model.insert(true);
    expect(model.state.run?.insertion).toMatchObject({ state: 'failed' });
    expect(model.state.run?.insertion?.message).toMatch(/raised an error/);
  });

  it('Regenerate asks again with regenerate, Copy copies the marked code', async () => {
    const { model, kernel, copied } = await ready();
    kernel.handlers.ask = (p, r) => r.result({ ...ANSWER, question: p.question, source: p.regenerate ? 'agent' : 'memory' });
    await model.ask('How many patients are there?');
    await model.regenerate();
    const asks = kernel.requests.filter(r => r.type === 'ask').map(r => r.params);
    expect(asks).toEqual([
      { question: 'How many patients are there?', regenerate: false },
      { question: 'How many patients are there?', regenerate: true }
    ]);
    await model.copy();
    expect(copied).toEqual([ANSWER.code]);
    expect(model.state.notice?.kind).toBe('success');
  });

  it('does not offer code for a clarifying question', async () => {
    const { model, kernel, notebook } = await ready();
    kernel.handlers.ask = (_, r) => r.result({ ...ANSWER, status: 'clarify', message: 'Which visit?', code: '', token: null, answer: { kind: 'none' } });
    await model.ask('q');
    expect(model.state.run?.state).toBe('clarify');
    await model.insert(true);
    expect(notebook.inserted).toEqual([]);
  });
});

describe('AssistantModel memory tab', () => {
  it('searches, ignores stale results, inserts and deletes with confirmation', async () => {
    const s = setup();
    s.model.setNotebook(s.notebook);
    await settle(30);
    const { model, kernel, notebook } = s;
    kernel.manual = true;
    const first = model.searchMemory('pat');
    const second = model.searchMemory('patients');
    expect(model.state.memory.loading).toBe(true);
    kernel.manual = false;
    kernel.flush();
    await Promise.all([first, second]);
    expect(model.state.memory.query).toBe('patients');
    expect(kernel.requests.filter(r => r.type === 'memory.search').slice(-2).map(r => r.params.text)).toEqual(['pat', 'patients']);

    await model.insertMemory(1, true);
    expect(notebook.inserted[0]).toEqual({ code: expect.stringMatching(/^# ehr-magic #tok9: /), run: true });
    expect(model.state.notice?.text).toBe('#1 inserted as cell 1 and ran.');

    await model.deleteMemory(1);
    expect(model.state.memory.confirmDelete).toBe(1);
    expect(kernel.requests.some(r => r.type === 'memory.delete')).toBe(false);
    model.cancelDelete();
    expect(model.state.memory.confirmDelete).toBeNull();
    await model.deleteMemory(1, true);
    expect(kernel.requests.find(r => r.type === 'memory.delete').params).toEqual({ id: 1 });
    expect(model.state.memory.entries).toEqual([]);
  });

  it('shows memory errors', async () => {
    const s = setup();
    s.kernel.handlers['memory.search'] = (_, r) => r.error('not_ready', 'No database');
    s.model.setNotebook(s.notebook);
    await settle(30);
    expect(s.model.state.memory.error).toBe('No database');
  });
});

describe('NotebookSession', () => {
  it('stops emitting after dispose', async () => {
    const kernel = new FakeKernel();
    const session = new NotebookSession(new FakeNotebook('nb', kernel), { copyText: () => undefined });
    const changed = jest.fn();
    session.changed.connect(changed);
    const connecting = session.connect();
    session.dispose();
    await connecting;
    await settle(30);
    expect(session.connection).toBeNull();
  });
});

describe('AssistantModel conversation', () => {
  const TURN = { question: 'How many patients are there?', standalone: 'How many patients are there?',
    status: 'answered', source: 'agent', answer: 'a number', variables: [] };
  const FOLLOW = { question: 'now only the women', standalone: 'How many female patients are there?',
    status: 'answered', source: 'agent', answer: 'a number', variables: ['cohort'] };

  function conversing() {
    const parts = setup();
    const { kernel } = parts;
    kernel.types = ['hello', 'status', 'ask', 'conversation', 'conversation.new'];
    let turns: unknown[] = [TURN];
    kernel.handlers.conversation = (_, r) => r.result({ turns });
    kernel.handlers['conversation.new'] = (_, r) => {
      turns = [];
      r.result({ turns });
    };
    kernel.handlers.ask = (p, r) => {
      turns = [...turns, FOLLOW];
      r.result({ ...ANSWER, question: p.question, standalone_question: FOLLOW.standalone, conversation: turns });
    };
    return parts;
  }

  it('reads the thread when it connects, and follows it after each question', async () => {
    const { model, notebook } = conversing();
    model.setNotebook(notebook);
    await settle(30);
    expect(model.state.conversations).toBe(true);
    expect(model.state.thread.map(t => t.question)).toEqual([TURN.question]);
    await model.ask('now only the women');
    expect(model.state.thread.map(t => t.standalone)).toEqual([TURN.question, FOLLOW.standalone]);
    expect(model.state.thread[1].variables).toEqual(['cohort']);
    expect(model.state.run?.result?.standalone_question).toBe(FOLLOW.standalone);
  });

  it('starts a new conversation on request', async () => {
    const { model, notebook, kernel } = conversing();
    model.setNotebook(notebook);
    await settle(30);
    await model.newConversation();
    expect(kernel.requests.map(r => r.type)).toContain('conversation.new');
    expect(model.state.thread).toEqual([]);
    expect(model.state.run).toBeNull();
    expect(model.state.notice?.text).toMatch(/New conversation/);
  });

  it('asks nothing about conversations of a kernel whose hello does not list them', async () => {
    const { model, notebook, kernel } = setup();
    model.setNotebook(notebook);
    await settle(30);
    await model.newConversation();
    expect(model.state.conversations).toBe(false);
    expect(kernel.requests.map(r => r.type)).not.toContain('conversation');
    expect(kernel.requests.map(r => r.type)).not.toContain('conversation.new');
  });
});
