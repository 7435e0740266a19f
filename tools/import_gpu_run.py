"""``perfkit record import RUN`` for a checkout with no install: perfkit/record/importer.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":
    from perfkit.record import importer

    sys.exit(importer.main(sys.argv[1:], prog="tools/import_gpu_run.py"))
