/** The memory tab: search the cells in memory for the connected dataset (accepted, imported or stored
 * without review, each marked), insert, delete. */

import React, { useEffect, useRef, useState } from 'react';

import { IMemoryEntry } from './protocol';
import { IAssistantModel, IPanelState } from './tokens';

const CSS = 'jp-EhrAssistant';
const DEBOUNCE_MS = 250;
// What an entry's origin means, for those the analyst did not accept in a notebook.
const ORIGINS: Record<string, string> = {
  imported: 'imported from a file: answered from again, as an accepted cell',
  auto: 'stored without review (memory store auto): a few-shot example, not answered from',
  seed: 'shipped with ehr-magic, verified by a test'
};

export function MemoryView(props: { model: IAssistantModel; state: IPanelState }): JSX.Element {
  const { model, state } = props;
  const memory = state.memory;
  const [text, setText] = useState(memory.query);
  const timer = useRef<ReturnType<typeof setTimeout>>();
  useEffect(() => {
    void model.searchMemory(memory.query); // fresh list whenever the tab opens
    return () => clearTimeout(timer.current);
  }, []);
  const onChange = (value: string): void => {
    setText(value);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => void model.searchMemory(value), DEBOUNCE_MS);
  };
  const schema = state.status?.database?.schema;
  return (
    <div className={`${CSS}-memory`} role="tabpanel">
      <input
        className={`${CSS}-search`}
        type="search"
        aria-label="Search memory"
        placeholder="Search memory…"
        value={text}
        onChange={e => onChange(e.target.value)}
      />
      <div className={`${CSS}-muted ${CSS}-hint`}>
        {memory.loading
          ? 'Searching…'
          : `${memory.entries.length} cell${memory.entries.length === 1 ? '' : 's'} in memory` +
            (schema ? ` for ${schema}` : '') +
            (memory.query ? ` matching “${memory.query}”` : '')}
      </div>
      {memory.error && <div className={`${CSS}-callout ${CSS}-callout-error`}>{memory.error}</div>}
      {!memory.loading && !memory.error && memory.entries.length === 0 && (
        <div className={`${CSS}-empty`}>
          {memory.query
            ? 'No cell in memory matches.'
            : 'No cells in memory for this dataset yet. Insert & run an answer (or run an inserted cell) to accept it.'}
        </div>
      )}
      <ul className={`${CSS}-entries`}>
        {memory.entries.map(entry => (
          <Entry key={entry.id} model={model} entry={entry} confirming={memory.confirmDelete === entry.id} />
        ))}
      </ul>
    </div>
  );
}

function Entry(props: { model: IAssistantModel; entry: IMemoryEntry; confirming: boolean }): JSX.Element {
  const { model, entry, confirming } = props;
  return (
    <li className={`${CSS}-entry`}>
      <div className={`${CSS}-entryQuestion`}>{entry.question}</div>
      <div className={`${CSS}-entryMeta ${CSS}-muted`}>
        #{entry.id} · used {entry.use_count}× · {entry.updated_at.slice(0, 10)}
        {entry.origin !== 'accepted' && <span className={`${CSS}-tag`} title={ORIGINS[entry.origin]}>{entry.origin}</span>}
        {entry.edited && <span className={`${CSS}-tag`}>edited</span>}
      </div>
      <details>
        <summary>Code</summary>
        <pre className={`${CSS}-code`}>{entry.code}</pre>
        {entry.answer_preview && <pre className={`${CSS}-code ${CSS}-muted`}>{entry.answer_preview}</pre>}
      </details>
      <div className={`${CSS}-actions`}>
        {confirming ? (
          <>
            <span className={`${CSS}-warnText`}>Delete #{entry.id} from memory?</span>
            <button className={`${CSS}-button jp-mod-warn`} onClick={() => void model.deleteMemory(entry.id, true)}>
              Delete
            </button>
            <button className={`${CSS}-button`} onClick={() => model.cancelDelete()}>
              Cancel
            </button>
          </>
        ) : (
          <>
            <button className={`${CSS}-button`} onClick={() => void model.insertMemory(entry.id, false)}
              title="Insert below the active cell">
              Insert
            </button>
            <button className={`${CSS}-button`} onClick={() => void model.insertMemory(entry.id, true)}
              title="Insert below the active cell and run it">
              Insert &amp; run
            </button>
            <button className={`${CSS}-button ${CSS}-danger`} onClick={() => void model.deleteMemory(entry.id)}
              title="Delete from memory">
              Delete
            </button>
          </>
        )}
      </div>
    </li>
  );
}
