import sys

from semiactive.cli import main

sys.exit(main())
