/** The panel's icon (a chart with a pulse line and a plus). */

import { LabIcon } from '@jupyterlab/ui-components';

import ehrSvgstr from '../style/icons/ehr.svg';

export const ehrIcon = new LabIcon({ name: 'ehr-magic:ehr', svgstr: ehrSvgstr });
