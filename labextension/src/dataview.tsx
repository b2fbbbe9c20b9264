/**
 * The Data tab: what ehr-magic believes about the connected data (the clock; each table in
 * one line, expandable to its columns; joins; lookup columns; drafted/confirmed marks), with
 * Edit (the knowledge file in JupyterLab's editor) and Import (checked, problems shown here).
 * It renders the kernel's knowledge view as it comes (`%ehr knowledge` renders the same).
 */

import React, { useEffect, useState } from 'react';

import { IKnowledgeTable, Mark } from './protocol';
import { IAssistantModel, IPanelState } from './tokens';

const CSS = 'jp-EhrAssistant';

export function DataView(props: { model: IAssistantModel; state: IPanelState }): JSX.Element {
  const { model, state } = props;
  const data = state.data;
  useEffect(() => {
    void model.loadKnowledge(); // fresh whenever the tab opens
  }, []);
  const view = data.knowledge;
  return (
    <div className={`${CSS}-data`} role="tabpanel" aria-label="Data">
      <div className={`${CSS}-dataActions`}>
        <button className={`${CSS}-button`} disabled={data.busy} onClick={() => void model.editKnowledge()}
          title="Write the knowledge file beside the notebook and open it in the editor">
          Edit
        </button>
        <button className={`${CSS}-button jp-mod-accept`} disabled={data.busy}
          onClick={() => void model.importKnowledge()}
          title="Check the edited file against the database and store it; the next question uses it">
          Import
        </button>
        <span className={`${CSS}-muted ${CSS}-hint`}>
          {data.file ? data.file.serverPath : 'Edit, correct, then Import'}
        </span>
      </div>
      {data.message && data.problems.length === 0 && (
        <div className={`${CSS}-callout ${CSS}-callout-info ${CSS}-dataMessage`} role="status">{data.message}</div>
      )}
      {data.problems.length > 0 && (
        <div className={`${CSS}-callout ${CSS}-callout-error ${CSS}-dataProblems`} role="alert">
          <div className={`${CSS}-calloutTitle`}>
            Not imported: {data.problems.length} problem{data.problems.length === 1 ? '' : 's'}
          </div>
          <ul>
            {data.problems.map((problem, i) => (
              <li key={i}>{problem}</li>
            ))}
          </ul>
        </div>
      )}
      {data.error && <div className={`${CSS}-callout ${CSS}-callout-error`}>{data.error}</div>}
      {data.loading && !view && <div className={`${CSS}-muted`}>Reading the knowledge…</div>}
      {view && (
        <>
          <div className={`${CSS}-muted ${CSS}-hint ${CSS}-dataSummary`}>
            {view.dataset} · {view.origin} · {view.counts.drafted} drafted, {view.counts.confirmed} confirmed
          </div>
          <div className={`${CSS}-dataClock`}>
            <strong>Clock</strong> <MarkTag mark={view.clock.mark} /> {view.clock.text}
          </div>
          <ul className={`${CSS}-dataTables`} aria-label="Tables">
            {view.tables.map(table => (
              <TableRow key={table.name} table={table} />
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

function MarkTag(props: { mark: Mark }): JSX.Element {
  const title = {
    drafted: 'drafted by ehr-magic from the data: check it',
    confirmed: 'written or confirmed by a person',
    'not described': 'nothing is said about it'
  }[props.mark];
  return (
    <span className={`${CSS}-mark ${CSS}-mark-${props.mark.replace(' ', '-')}`} title={title}>
      {props.mark}
    </span>
  );
}

function TableRow(props: { table: IKnowledgeTable }): JSX.Element {
  const { table } = props;
  const [open, setOpen] = useState(false);
  return (
    <li className={`${CSS}-dataTable`} data-table={table.name}>
      <button className={`${CSS}-dataTableLine`} aria-expanded={open} onClick={() => setOpen(!open)}
        title={table.meaning}>
        <span className={`${CSS}-caret`}>{open ? '▾' : '▸'}</span>
        <strong>{table.name}</strong> <MarkTag mark={table.meaning_mark} />{' '}
        <span className={`${CSS}-muted`}>{table.meaning || 'not described'}</span>
      </button>
      <dl className={`${CSS}-dataFacts`}>
        {table.key && (
          <>
            <dt>key</dt>
            <dd>
              {table.key} <MarkTag mark={table.key_mark} />
            </dd>
          </>
        )}
        {table.joins.length > 0 && (
          <>
            <dt>joins</dt>
            <dd>
              {table.joins.map(join => (
                <div key={join.text} className={`${CSS}-dataJoin`} title={join.text}>
                  {join.arrow}
                </div>
              ))}
              <MarkTag mark={table.joins_mark} />
            </dd>
          </>
        )}
        {table.lookup.length > 0 && (
          <>
            <dt>lookup</dt>
            <dd>
              {table.lookup.join(', ')} <MarkTag mark={table.lookup_mark} />
            </dd>
          </>
        )}
      </dl>
      {open && (
        <table className={`${CSS}-dataColumns`}>
          <tbody>
            {table.columns.map(column => (
              <tr key={column.name}>
                <td>
                  {column.name}
                  {column.key ? ' (key)' : column.lookup ? ' (lookup)' : ''}
                </td>
                <td className={`${CSS}-muted`}>{column.dtype}</td>
                <td>
                  {column.meaning} <MarkTag mark={column.mark} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </li>
  );
}
