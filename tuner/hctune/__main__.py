import sys

from hctune.cli import main

sys.exit(main())
