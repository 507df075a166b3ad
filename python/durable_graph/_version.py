"""The one version of the package, its schema and its SQL API (SPEC §23.1, D232).

pyproject.toml reads it (``[tool.setuptools.dynamic]``), ``durable-graph --version`` prints it,
``dg_schema_meta_v1()`` reports it as the schema's ``release``, and ``sql/api.json`` records each
public SQL function's ``since`` release against it. CHANGELOG.md has an entry for each release.
"""

__version__ = "0.2.0"
