import sys

from oip.cli import main

sys.exit(main())
