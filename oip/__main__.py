import sys

from oip.server import main

sys.exit(main())
