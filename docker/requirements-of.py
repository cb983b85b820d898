"""Print the requirements of perfdash's core and the named extras, one per line, from pyproject.toml.

The images install these in a layer of their own before copying the source tree, so a change to perfdash's code
rebuilds only the last, seconds-long layer (``pip install --no-deps -e .``), not the dependencies.
Usage: python requirements-of.py pyproject.toml EXTRA [EXTRA ...]
"""

import sys
import tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = project["optional-dependencies"]
unknown = [name for name in sys.argv[2:] if name not in extras]
if unknown:
    sys.exit(f"requirements-of: no extra {', '.join(unknown)} in {sys.argv[1]}")
print("\n".join([*project["dependencies"], *(req for name in sys.argv[2:] for req in extras[name])]))
