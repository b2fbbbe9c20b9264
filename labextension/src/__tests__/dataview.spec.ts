import { parseKnowledgeView } from '../protocol';
import { AssistantModel } from '../model';
import { FakeKernel, FakeNotebook, settle } from './fakes';

const VIEW = {
  schema: 'csv_synthea', dataset: 'synthea', location: '/x/s.duckdb', title: 'synthea', origin: 'drafted from the data',
  drafted: true, counts: { drafted: 3, confirmed: 1 },
  clock: { time_model: 'calendar', now: '2024-02-07 23:24:16', text: 'Calendar time: now is 2024-02-07 23:24:16.',
    mark: 'drafted' },
  tables: [{
    name: 'encounters', meaning: 'One row per visit.', meaning_mark: 'confirmed', key: 'id', key_mark: 'drafted',
    joins: [{ source: 'encounters.patient', target: 'patients.id', arrow: 'encounters.patient -> patients.id',
      text: 'patients ON encounters.patient = patients.id' }],
    joins_mark: 'drafted', lookup: ['encounterclass'], lookup_mark: 'drafted',
    columns: [{ name: 'id', dtype: 'VARCHAR', meaning: 'the key', mark: 'drafted', lookup: false, key: true }]
  }]
};
const PROBLEM = "The description of encounters names column encounters.patinet, which encounters does not have.";

function setup() {
  const kernel = new FakeKernel();
  kernel.protocol = 2;
  kernel.types = ['status', 'knowledge', 'knowledge.edit', 'knowledge.import'];
  kernel.handlers.knowledge = (_, r) => r.result({ knowledge: VIEW });
  kernel.handlers['knowledge.edit'] = (_, r) => r.result({ path: '/srv/work/csv_synthea.knowledge.yaml',
    name: 'csv_synthea.knowledge.yaml', written: true, message: 'Wrote it.' });
  const notebook = new FakeNotebook('nb1', kernel);
  notebook.path = 'work/analysis.ipynb';
  const opened: string[] = [];
  const model = new AssistantModel({ copyText: () => undefined, openFile: p => void opened.push(p), noticeTimeout: 0 });
  return { kernel, notebook, model, opened };
}

describe('the Data tab', () => {
  it('reads the knowledge view of a v2 kernel, in v2', async () => {
    const { model, notebook, kernel } = setup();
    model.setNotebook(notebook);
    await settle(30);
    expect(model.state.knowledge).toBe(true);
    await model.loadKnowledge();
    await settle(10);
    expect(model.state.data.knowledge).toEqual(parseKnowledgeView(VIEW));
    expect(model.state.data.knowledge!.tables[0].joins[0].arrow).toBe('encounters.patient -> patients.id');
    expect(kernel.requests.every(r => r.v === 2)).toBe(true);
  });

  it('has no Data tab on a v1 kernel', async () => {
    const { model, notebook, kernel } = setup();
    kernel.protocol = 1;
    kernel.types = ['status'];
    model.setNotebook(notebook);
    await settle(30);
    expect(model.state.knowledge).toBe(false);
    await model.loadKnowledge();
    expect(kernel.requests.map(r => r.type)).not.toContain('knowledge');
    expect(kernel.requests.every(r => r.v === 1)).toBe(true);
  });

  it('opens the edited file beside the notebook and imports it, showing problems', async () => {
    const { model, notebook, kernel, opened } = setup();
    const imports: unknown[] = [];
    kernel.handlers['knowledge.import'] = (p, r) => {
      imports.push(p);
      r.result(imports.length === 1
        ? { imported: false, problems: [PROBLEM], message: 'Knowledge file csv_synthea.knowledge.yaml: ...' }
        : { imported: true, problems: [], message: 'Imported it.', knowledge: { ...VIEW, counts: { drafted: 2, confirmed: 2 } } });
    };
    model.setNotebook(notebook);
    await settle(30);
    await model.editKnowledge();
    expect(opened).toEqual(['work/csv_synthea.knowledge.yaml']);
    expect(model.state.data.message).toBe('Wrote it.');
    await model.importKnowledge();
    expect(imports[0]).toEqual({ path: 'csv_synthea.knowledge.yaml' });
    expect(model.state.data.problems).toEqual([PROBLEM]);
    await model.importKnowledge();
    expect(model.state.data.problems).toEqual([]);
    expect(model.state.data.message).toBe('Imported it.');
    expect(model.state.data.knowledge!.counts.confirmed).toBe(2);
  });
});
