"""``python -m perfkit.record``: ``perfkit record`` (and a unit's child: ``--out OUT --unit SPEC``)."""
import sys

from perfkit.record.command import main

sys.exit(main())
