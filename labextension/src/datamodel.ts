/**
 * The Data tab's traffic: read the knowledge view, write the knowledge file to edit (and
 * open it in JupyterLab's editor), import it. Functions over one notebook's session, which
 * owns the connection and the state (model.ts).
 */

import { PanelConnection } from './comm';
import { parseImportResult, parseKnowledgeView } from './protocol';
import { IDataView, INotebookHandle, IPanelState } from './tokens';

export type OpenFile = (path: string) => void | Promise<void>;

/** What the Data tab needs of a `NotebookSession`. */
export interface IDataHost {
  readonly connection: PanelConnection | null;
  readonly state: IPanelState;
  readonly handle: INotebookHandle;
  setData(change: Partial<IDataView>): void;
  refreshStatus(): Promise<void>;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function loadKnowledge(host: IDataHost): Promise<void> {
  const connection = host.connection;
  if (!connection || !host.state.knowledge) {
    return;
  }
  host.setData({ loading: true, error: null });
  try {
    const got = await connection.request('knowledge');
    host.setData({ knowledge: parseKnowledgeView(got.knowledge), loading: false });
  } catch (err) {
    host.setData({ loading: false, error: messageOf(err) });
  }
}

export async function editKnowledge(host: IDataHost, openFile?: OpenFile): Promise<void> {
  const connection = host.connection;
  if (!connection || !host.state.knowledge) {
    return;
  }
  host.setData({ busy: true, problems: [], message: null });
  try {
    const edited = await connection.request('knowledge.edit');
    // the kernel's folder is the notebook's: a name relative to it is relative to the notebook
    const folder = host.handle.path.includes('/') ? host.handle.path.slice(0, host.handle.path.lastIndexOf('/')) : '';
    const file = edited.name
      ? { serverPath: folder ? `${folder}/${edited.name}` : edited.name, kernelPath: edited.name }
      : null;
    host.setData({ busy: false, file, message: edited.message });
    if (file && openFile) {
      await openFile(file.serverPath);
    }
  } catch (err) {
    host.setData({ busy: false, message: null, error: messageOf(err) });
  }
}

export async function importKnowledge(host: IDataHost): Promise<void> {
  const connection = host.connection;
  if (!connection || !host.state.knowledge) {
    return;
  }
  host.setData({ busy: true, problems: [], message: null, error: null });
  try {
    const params = host.state.data.file ? { path: host.state.data.file.kernelPath } : {};
    const result = parseImportResult(await connection.request('knowledge.import', params));
    host.setData({
      busy: false,
      problems: result.problems,
      message: result.message,
      ...(result.knowledge ? { knowledge: result.knowledge } : {})
    });
  } catch (err) {
    host.setData({ busy: false, error: messageOf(err) });
  }
  await host.refreshStatus();
}
