/** The plugin of the EHR assistant side panel and its command ids. */

import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Clipboard, ICommandPalette, ISessionContextDialogs } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { ehrIcon } from './icons';
import { AssistantModel } from './model';
import { NotebookHandle } from './notebook';
import { AssistantSidePanel } from './panel';
import { IAssistantModel, PLUGIN_ID } from './tokens';

export namespace CommandIDs {
  export const open = 'ehr-magic:open-panel';
  export const loadExtension = 'ehr-magic:load-extension';
  export const ask = 'ehr-magic:ask';
}

const plugin: JupyterFrontEndPlugin<IAssistantModel> = {
  id: PLUGIN_ID,
  description: 'A side panel that answers EHR questions in the active notebook’s kernel with ehr-magic.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer, ISessionContextDialogs],
  provides: IAssistantModel,
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    dialogs: ISessionContextDialogs | null
  ): IAssistantModel => {
    const model = new AssistantModel({
      copyText: text => Clipboard.copyToSystem(text),
      openFile: path => app.commands.execute('docmanager:open', { path })
    });
    const handles = new Map<string, NotebookHandle>();
    const follow = (panel: NotebookPanel | null): void => {
      if (!panel) {
        model.setNotebook(null);
        return;
      }
      let handle = handles.get(panel.id);
      if (!handle) {
        handle = new NotebookHandle(panel, dialogs ?? undefined);
        handles.set(panel.id, handle);
        panel.disposed.connect(() => handles.delete(panel.id));
      }
      model.setNotebook(handle);
    };
    tracker.currentChanged.connect((_, panel) => follow(panel));
    follow(tracker.currentWidget);

    const sidePanel = new AssistantSidePanel(model);
    app.shell.add(sidePanel, 'right', { rank: 650 });
    restorer?.add(sidePanel, sidePanel.id);

    app.commands.addCommand(CommandIDs.open, {
      label: 'Open EHR Assistant',
      caption: 'Ask questions about the EHR in the active notebook’s kernel',
      icon: ehrIcon,
      execute: () => app.shell.activateById(sidePanel.id)
    });
    app.commands.addCommand(CommandIDs.loadExtension, {
      label: 'EHR Assistant: Load ehr_magic in the Kernel',
      isEnabled: () => model.state.connection === 'not-loaded',
      execute: () => model.loadExtension()
    });
    app.commands.addCommand(CommandIDs.ask, {
      label: 'EHR Assistant: Ask',
      execute: args => {
        app.shell.activateById(sidePanel.id);
        const question = typeof args.question === 'string' ? args.question : '';
        return question ? model.ask(question, args.regenerate === true) : undefined;
      }
    });
    palette?.addItem({ command: CommandIDs.open, category: 'EHR Assistant' });
    palette?.addItem({ command: CommandIDs.loadExtension, category: 'EHR Assistant' });
    return model;
  }
};

export default plugin;
