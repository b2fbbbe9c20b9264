/**
 * The view: the "EHR assistant" side panel. It renders `IAssistantModel.state` and
 * calls model methods on clicks; it never talks to a kernel itself.
 */

import { ReactWidget, SidePanel, ToolbarButton, UseSignal, notebookIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Panel as LuminoPanel, Widget } from '@lumino/widgets';
import React, { useEffect, useRef, useState } from 'react';

import { DataView } from './dataview';
import { databaseLine, firstLine, memorySummary } from './format';
import { ehrIcon } from './icons';
import { MemoryView } from './memoryview';
import { RunView } from './runview';
import { IAssistantModel, IPanelState } from './tokens';
import { isRunning } from './state';

const CSS = 'jp-EhrAssistant';

/** The side panel: a `SidePanel` with a refresh button and the React view. */
export class AssistantSidePanel extends SidePanel {
  constructor(model: IAssistantModel) {
    super({ content: new LuminoPanel() });
    this.id = 'ehr-magic-assistant';
    this.addClass(`${CSS}-sidePanel`);
    this.title.icon = ehrIcon;
    this.title.caption = 'EHR assistant';
    const heading = new Widget({ node: document.createElement('h2') });
    heading.node.textContent = 'EHR assistant';
    this.header.addWidget(heading);
    this.header.addWidget(
      new ToolbarButton({
        icon: refreshIcon,
        tooltip: 'Reconnect to the kernel and refresh the status',
        onClick: () => void model.refresh()
      })
    );
    this.view = new AssistantView(model);
    this.addWidget(this.view);
  }

  readonly view: AssistantView;

  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    this.view.focusQuestion();
  }
}

/** The React part of the panel. */
export class AssistantView extends ReactWidget {
  constructor(private readonly _model: IAssistantModel) {
    super();
    this.addClass(CSS);
  }

  focusQuestion(): void {
    requestAnimationFrame(() => {
      const box = this.node.querySelector<HTMLTextAreaElement>(`.${CSS}-question`);
      box?.focus();
    });
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this._model.stateChanged} initialArgs={undefined}>
        {() => <Panel model={this._model} state={this._model.state} />}
      </UseSignal>
    );
  }
}

type Tab = 'ask' | 'memory' | 'data';

function Panel(props: { model: IAssistantModel; state: IPanelState }): JSX.Element {
  const { model, state } = props;
  const [tab, setTab] = useState<Tab>('ask');
  const body = useRef<HTMLDivElement>(null);
  const follow = useRef(true);
  const ready = state.connection === 'ready';
  const remembered = state.status?.memory?.schema; // what the memory tab lists: every origin
  const run = state.run;
  // while a run streams, keep its newest part in view unless the analyst scrolled up
  useEffect(() => {
    follow.current = true;
  }, [run?.id]);
  useEffect(() => {
    const node = body.current;
    if (node && run && isRunning(run) && tab === 'ask' && follow.current) {
      node.scrollTop = node.scrollHeight;
    }
  }, [run, tab]);
  const onScroll = (): void => {
    const node = body.current;
    if (node && run && isRunning(run)) {
      follow.current = node.scrollHeight - node.scrollTop - node.clientHeight < 80;
    }
  };
  return (
    <div className={`${CSS}-body`} ref={body} onScroll={onScroll}>
      <NotebookBar state={state} />
      <ConnectionNotice model={model} state={state} />
      {ready && <StatusGrid state={state} />}
      {ready && (
        <>
          <div className={`${CSS}-tabs`} role="tablist">
            <button role="tab" aria-selected={tab === 'ask'} className={tab === 'ask' ? 'jp-mod-active' : ''}
              onClick={() => setTab('ask')}>
              Ask
            </button>
            <button role="tab" aria-selected={tab === 'memory'} className={tab === 'memory' ? 'jp-mod-active' : ''}
              onClick={() => setTab('memory')}>
              Memory{remembered !== undefined ? ` (${remembered})` : ''}
            </button>
            {state.knowledge && (
              <button role="tab" aria-selected={tab === 'data'} className={tab === 'data' ? 'jp-mod-active' : ''}
                onClick={() => setTab('data')}>
                Data
              </button>
            )}
          </div>
          {tab === 'ask' && <AskTab model={model} state={state} />}
          {tab === 'memory' && <MemoryView model={model} state={state} />}
          {tab === 'data' && <DataView model={model} state={state} />}
        </>
      )}
      {state.notice && (
        <div className={`${CSS}-notice ${CSS}-notice-${state.notice.kind}`} role="status">
          <span>{state.notice.text}</span>
          <button className={`${CSS}-link`} aria-label="Dismiss" onClick={() => model.dismissNotice()}>
            ×
          </button>
        </div>
      )}
    </div>
  );
}

const CONNECTION_TEXT: Record<string, string> = {
  'no-notebook': 'no notebook',
  'no-kernel': 'no kernel',
  connecting: 'connecting…',
  busy: 'kernel busy',
  'not-loaded': 'ehr_magic not loaded',
  loading: 'loading ehr_magic…',
  ready: 'connected',
  error: 'error'
};

function NotebookBar(props: { state: IPanelState }): JSX.Element {
  const { state } = props;
  return (
    <div className={`${CSS}-notebookBar`}
      title={state.notebook ? `${state.notebook.path}\nkernel: ${state.notebook.kernelName}` : ''}>
      <notebookIcon.react tag="span" className={`${CSS}-notebookIcon`} />
      {state.notebook ? (
        <span className={`${CSS}-notebookName`}>
          <strong>{state.notebook.name}</strong>
          {state.notebook.kernelName && <span className={`${CSS}-muted`}> · {state.notebook.kernelName}</span>}
        </span>
      ) : (
        <span className={`${CSS}-notebookName ${CSS}-muted`}>No notebook</span>
      )}
      <span className={`${CSS}-connection`}>
        <span className={`${CSS}-dot ${CSS}-dot-${state.connection}`} />
        {CONNECTION_TEXT[state.connection]}
      </span>
    </div>
  );
}

function ConnectionNotice(props: { model: IAssistantModel; state: IPanelState }): JSX.Element | null {
  const { model, state } = props;
  switch (state.connection) {
    case 'no-notebook':
      return (
        <Callout kind="info" title="Open a notebook">
          The assistant works with the notebook you are in: it asks in that notebook&apos;s kernel and inserts
          cells there.
        </Callout>
      );
    case 'no-kernel':
      return (
        <Callout kind="info" title="No kernel">
          This notebook has no running kernel. Start one (Kernel › Restart Kernel) to use the assistant.
        </Callout>
      );
    case 'not-loaded':
    case 'loading':
      return (
        <Callout kind="warn" title="ehr_magic is not loaded in this kernel">
          <p>The assistant needs the ehr_magic extension in the notebook&apos;s kernel.</p>
          <div className={`${CSS}-calloutActions`}>
            <button className={`${CSS}-button jp-mod-accept`} disabled={state.connection === 'loading'}
              onClick={() => void model.loadExtension()}>
              {state.connection === 'loading' ? 'Loading…' : 'Load ehr_magic'}
            </button>
            <span className={`${CSS}-muted ${CSS}-hint`}>
              runs <code>%load_ext ehr_magic</code> silently
            </span>
          </div>
        </Callout>
      );
    case 'busy':
      return (
        <Callout kind="info" title="Waiting for the kernel">
          The kernel is busy (running a cell?); the panel connects when it is free.{' '}
          <button className={`${CSS}-link`} onClick={() => void model.refresh()}>Retry</button>
        </Callout>
      );
    case 'error':
      return (
        <Callout kind="error" title="Cannot talk to the kernel">
          <p>{state.connectionError}</p>
          <button className={`${CSS}-button`} onClick={() => void model.refresh()}>Retry</button>
        </Callout>
      );
    default:
      return null;
  }
}

export function Callout(props: {
  kind: 'info' | 'warn' | 'error' | 'success';
  title?: string;
  children?: React.ReactNode;
}): JSX.Element {
  return (
    <div className={`${CSS}-callout ${CSS}-callout-${props.kind}`}>
      {props.title && <div className={`${CSS}-calloutTitle`}>{props.title}</div>}
      <div className={`${CSS}-calloutBody`}>{props.children}</div>
    </div>
  );
}

function StatusGrid(props: { state: IPanelState }): JSX.Element {
  const status = props.state.status;
  if (!status) {
    return <div className={`${CSS}-status ${CSS}-muted`}>Reading the kernel&apos;s status…</div>;
  }
  const db = status.database;
  return (
    <>
      <dl className={`${CSS}-status`}>
        <dt>Database</dt>
        <dd title={db ? `${db.path}\n${db.description}` : ''}>{databaseLine(status)}</dd>
        {db && (
          <>
            <dt>Clock</dt>
            <dd title="The dataset's 'now': 'today' and 'last year' are relative to it">{db.now.slice(0, 16)}</dd>
          </>
        )}
        <dt>Model</dt>
        <dd title={status.model.configured ? status.model.endpoint : status.model.error}>
          {status.model.configured ? status.model.name : <span className={`${CSS}-warnText`}>not configured</span>}
        </dd>
        <dt>Memory</dt>
        <dd title={status.memory?.path ?? ''}>
          {status.memory ? memorySummary(status.memory) : '—'}
        </dd>
        <dt>Privacy</dt>
        <dd>{status.privacy}</dd>
      </dl>
      {!db && status.database_hint && <Callout kind="warn" title="No database">{status.database_hint}</Callout>}
      {!status.model.configured && (
        <Callout kind="warn" title="No model configured">
          {firstLine(status.model.error, 400).replace(/^No model configured:\s*/, '').replace(/^./, c => c.toUpperCase())}{' '}
          Answers already in memory still work.
        </Callout>
      )}
    </>
  );
}

/** The conversation so far: each question, what it meant on its own, and its answer. */
function ThreadView(props: { model: IAssistantModel; state: IPanelState }): JSX.Element | null {
  const { model, state } = props;
  const thread = state.thread;
  if (!thread.length) {
    return null;
  }
  // the current run shows the last turn in full below; the thread lists the earlier ones
  const shown = state.run && !isRunning(state.run) && thread[thread.length - 1].question === state.run.question
    ? thread.slice(0, -1)
    : thread;
  return (
    <section className={`${CSS}-thread`} aria-label="Conversation">
      <div className={`${CSS}-threadHeader`}>
        <span className={`${CSS}-threadTitle`}>
          Conversation · {thread.length} question{thread.length === 1 ? '' : 's'}
        </span>
        <button className={`${CSS}-button ${CSS}-newConversation`} disabled={isRunning(state.run)}
          title="Forget the earlier questions: the next one stands alone"
          onClick={() => void model.newConversation()}>
          New conversation
        </button>
      </div>
      {shown.length > 0 && (
        <ol className={`${CSS}-turns`}>
          {shown.map((turn, i) => (
            <li key={i} className={`${CSS}-turn ${CSS}-turn-${turn.status}`}>
              <div className={`${CSS}-turnQuestion`}>{turn.question}</div>
              {turn.standalone !== turn.question && (
                <div className={`${CSS}-turnMeaning ${CSS}-muted`}>meaning: {turn.standalone}</div>
              )}
              {turn.answer && (
                <div className={`${CSS}-turnAnswer ${CSS}-muted`}>
                  {turn.status === 'answered' ? '→ ' : `${turn.status}: `}
                  {firstLine(turn.answer, 200)}
                </div>
              )}
              {turn.variables.length > 0 && (
                <div className={`${CSS}-turnVariables ${CSS}-muted`}>
                  described to the model: {turn.variables.join(', ')}
                </div>
              )}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

function AskTab(props: { model: IAssistantModel; state: IPanelState }): JSX.Element {
  const { model, state } = props;
  const [question, setQuestion] = useState('');
  const box = useRef<HTMLTextAreaElement>(null);
  const running = isRunning(state.run);
  useEffect(() => box.current?.focus(), []);
  const submit = (): void => {
    if (question.trim() && !running) {
      void model.ask(question);
      setQuestion('');
    }
  };
  return (
    <div className={`${CSS}-ask`} role="tabpanel">
      <div className={`${CSS}-askBox`}>
        <textarea
          ref={box}
          className={`${CSS}-question`}
          aria-label="Question"
          placeholder={`Ask about the data in ${state.notebook?.name ?? 'this notebook'}…`}
          rows={3}
          value={question}
          onChange={e => setQuestion(e.target.value)}
          onKeyDown={e => {
            if (e.key === 'Enter' && !e.shiftKey) {
              e.preventDefault();
              submit();
            }
          }}
        />
        <div className={`${CSS}-askActions`}>
          <span className={`${CSS}-muted ${CSS}-hint`}>Enter to ask · Shift+Enter for a new line</span>
          {running ? (
            <button className={`${CSS}-button jp-mod-warn`} onClick={() => void model.stop()}
              title="Interrupt the kernel">
              Stop
            </button>
          ) : (
            <button className={`${CSS}-button jp-mod-accept`} disabled={!question.trim()} onClick={submit}>
              Ask
            </button>
          )}
        </div>
      </div>
      {state.conversations && <ThreadView model={model} state={state} />}
      {state.run ? (
        <RunView model={model} run={state.run} />
      ) : (
        <div className={`${CSS}-empty`}>
          <p>Ask a question about the connected EHR, e.g.</p>
          <p className={`${CSS}-example`}>How many patients were admitted last year?</p>
          <p className={`${CSS}-muted`}>
            The assistant writes polars/DuckDB code, runs and debugs it in the kernel, and shows each attempt.
            Insert &amp; run the final code to keep it in memory.
          </p>
        </div>
      )}
    </div>
  );
}
