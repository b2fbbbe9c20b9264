/** The live view of one run: examples, knowledge, attempts, the answer and its buttons. */

import React from 'react';

import {
  describeAnswer,
  formatSeconds,
  formatValue,
  phaseLabel,
  statusText,
  stepOutcome,
  stripMarker,
  summarizeResult
} from './format';
import { AnswerPreview, IStep } from './protocol';
import { IRun, hasCode } from './state';
import { IAssistantModel } from './tokens';

const CSS = 'jp-EhrAssistant';

export function RunView(props: { model: IAssistantModel; run: IRun }): JSX.Element {
  const { model, run } = props;
  const running = run.state === 'running';
  const result = run.result;
  const knowledge = result?.knowledge || [...run.attempts].reverse().find(a => a.knowledge)?.knowledge || '';
  return (
    <section className={`${CSS}-run`} aria-label="Run" aria-busy={running}>
      <div className={`${CSS}-runHeader`}>
        <div className={`${CSS}-runQuestion`}>
          {run.question}
          {result && result.standalone_question && result.standalone_question !== run.question && (
            <div className={`${CSS}-runMeaning ${CSS}-muted`}>meaning: {result.standalone_question}</div>
          )}
        </div>
        <div className={`${CSS}-runState`}>
          <span className={`${CSS}-badge ${CSS}-badge-${run.state}`}>
            {running && <span className={`${CSS}-spinner`} />}
            {statusText(run)}
          </span>
          <span className={`${CSS}-muted`}>
            {running ? phaseLabel(run.phase, run.timeline[run.timeline.length - 1]?.detail) : ''}
            {running ? ' · ' : ''}
            {formatSeconds(run.elapsed)}
          </span>
        </div>
      </div>

      {run.examples.length > 0 && (
        <details className={`${CSS}-section`}>
          <summary>
            Examples from memory <span className={`${CSS}-count`}>{run.examples.length}</span>
          </summary>
          <ul className={`${CSS}-examples`}>
            {run.examples.map(e => (
              <li key={e.id}>
                <span className={`${CSS}-tag ${CSS}-tag-${e.origin}`}>{e.origin}</span>
                {e.question || e.id}
              </li>
            ))}
          </ul>
        </details>
      )}

      {knowledge && (
        <details className={`${CSS}-section`} open={running}>
          <summary>Knowledge</summary>
          <pre className={`${CSS}-knowledge`}>{knowledge}</pre>
        </details>
      )}

      {run.attempts.map(step => (
        <Attempt key={step.index} step={step} final={!!result && step.succeeded} />
      ))}

      {running && run.phase !== 'examples' && (
        <div className={`${CSS}-attempt ${CSS}-attempt-live`}>
          <div className={`${CSS}-attemptHeader`}>
            <span>Attempt {run.attempts.length + 1}</span>
            <span className={`${CSS}-muted`}>{phaseLabel(run.phase)}…</span>
          </div>
          {run.streaming ? (
            <pre className={`${CSS}-code ${CSS}-streaming`}>{run.streaming}</pre>
          ) : (
            <div className={`${CSS}-muted ${CSS}-waiting`}>waiting for the model…</div>
          )}
        </div>
      )}

      {run.error && (
        <div className={`${CSS}-callout ${CSS}-callout-${run.state === 'interrupted' ? 'warn' : 'error'}`}>
          <div className={`${CSS}-calloutBody`}>{run.error.message}</div>
          {run.error.detail && (
            <details>
              <summary>Details</summary>
              <pre className={`${CSS}-code`}>{run.error.detail}</pre>
            </details>
          )}
        </div>
      )}

      {result && result.status !== 'answered' && result.message && (
        <div className={`${CSS}-callout ${CSS}-callout-${result.status === 'failed' ? 'error' : 'info'}`}>
          <div className={`${CSS}-calloutBody`}>{result.message}</div>
        </div>
      )}

      {result && result.status === 'answered' && (
        <div className={`${CSS}-answer`}>
          <div className={`${CSS}-sectionTitle`}>
            Answer <span className={`${CSS}-muted`}>{describeAnswer(result.answer)}</span>
          </div>
          <AnswerView answer={result.answer} />
        </div>
      )}

      {result && hasCode(run) && (
        <div className={`${CSS}-final`}>
          <div className={`${CSS}-sectionTitle`}>
            Code <span className={`${CSS}-muted`}>{result.source === 'memory' ? 'accepted earlier' : 'final attempt'}</span>
          </div>
          <pre className={`${CSS}-code ${CSS}-finalCode`}>{stripMarker(result.code)}</pre>
          <div className={`${CSS}-actions`}>
            <button className={`${CSS}-button jp-mod-accept`} onClick={() => void model.insert(true)}
              title="Insert below the active cell and run it; running it stores it in memory">
              Insert &amp; run
            </button>
            <button className={`${CSS}-button`} onClick={() => void model.insert(false)}
              title="Insert below the active cell without running it">
              Insert
            </button>
            <button className={`${CSS}-button`} onClick={() => void model.regenerate()}
              title="Ask the model again, ignoring memory">
              Regenerate
            </button>
            <button className={`${CSS}-button`} onClick={() => void model.copy()} title="Copy the code">
              Copy
            </button>
          </div>
          {run.insertion && (
            <div className={`${CSS}-insertion ${CSS}-insertion-${run.insertion.state}`} role="status">
              {run.insertion.state === 'running' || run.insertion.state === 'inserting' ? (
                <>
                  <span className={`${CSS}-spinner`} /> {run.insertion.ran ? 'Running the cell…' : 'Inserting…'}
                </>
              ) : (
                <>
                  <span className={`${CSS}-insertionMark`} aria-hidden="true">
                    {run.insertion.state === 'failed' ? '!' : '✓'}
                  </span>
                  <span>{run.insertion.message}</span>
                </>
              )}
            </div>
          )}
        </div>
      )}

      {result && !hasCode(run) && (
        <div className={`${CSS}-actions`}>
          <button className={`${CSS}-button`} onClick={() => void model.regenerate()}>
            Try again
          </button>
        </div>
      )}

      {result && <div className={`${CSS}-summary ${CSS}-muted`}>{summarizeResult(result)}{result.model ? ` · ${result.model}` : ''}</div>}
    </section>
  );
}

function Attempt(props: { step: IStep; final: boolean }): JSX.Element {
  const { step } = props;
  const outcome = stepOutcome(step);
  const failed = outcome === 'failed';
  const looked = outcome === 'looked up';
  return (
    <div className={`${CSS}-attempt ${failed ? `${CSS}-attempt-failed` : looked ? `${CSS}-attempt-looked` : `${CSS}-attempt-ok`}`}>
      <details open={failed}>
        <summary className={`${CSS}-attemptHeader`}>
          <span>Attempt {step.index}</span>
          <span className={failed ? `${CSS}-errorText` : looked ? `${CSS}-muted` : `${CSS}-okText`}>
            {outcome} · {formatSeconds(step.run_seconds)}
          </span>
        </summary>
        <pre className={`${CSS}-code`}>{step.code}</pre>
        {step.observation && <pre className={`${CSS}-observation`}>{step.observation}</pre>}
      </details>
      {step.error && <div className={`${CSS}-error`}>{step.error}</div>}
      {step.soft_failure && <div className={`${CSS}-error`}>{step.soft_failure}</div>}
      {step.hints.length > 0 && (
        <ul className={`${CSS}-hints`}>
          {step.hints.map((h, i) => (
            <li key={i}>{h}</li>
          ))}
        </ul>
      )}
      {step.debugger_note && (
        <div className={`${CSS}-debugger`}>
          <span className={`${CSS}-label`}>Debugger</span> {step.debugger_note}
        </div>
      )}
    </div>
  );
}

export function AnswerView(props: { answer: AnswerPreview }): JSX.Element {
  const { answer } = props;
  switch (answer.kind) {
    case 'table':
      return (
        <div className={`${CSS}-tableWrap`}>
          <table className={`${CSS}-table`}>
            <thead>
              <tr>
                {answer.columns.map((c, i) => (
                  <th key={i} title={answer.dtypes[i] ?? ''}>{c}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {answer.rows.map((row, r) => (
                <tr key={r}>
                  {row.map((v, c) => (
                    <td key={c} className={typeof v === 'number' ? `${CSS}-num` : v === null ? `${CSS}-null` : ''}>
                      {formatValue(v)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      );
    case 'list':
      return (
        <ul className={`${CSS}-valueList`}>
          {answer.values.map((v, i) => (
            <li key={i}>{formatValue(v)}</li>
          ))}
        </ul>
      );
    case 'value':
      return <div className={`${CSS}-value`}>{formatValue(answer.value)}</div>;
    default:
      return <div className={`${CSS}-muted`}>No answer value.</div>;
  }
}
