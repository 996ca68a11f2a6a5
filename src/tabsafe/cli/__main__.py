import sys

from tabsafe.cli import main

sys.exit(main())
