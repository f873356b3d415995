"""The integration tests use the cache tests' tiny model, config and rotation fixtures (one definition,
loaded by path: test folders are not packages)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_cache_fixtures", Path(__file__).parents[1] / "cache" / "conftest.py")
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)

config = _fixtures.config
model = _fixtures.model
rotations = _fixtures.rotations
make_rotations = _fixtures.make_rotations
make_config = _fixtures.make_config
_one_thread = _fixtures._one_thread
