import sys

from ehr_magic.cli import main

sys.exit(main())
