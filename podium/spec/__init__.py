"""Job specs and cluster config: plain typed data, parsers, and validation.

`options` and `timefmt` import only the standard library, so the CLI can split a
command line without loading pydantic; `job`, `build` and `cluster` are server side.
"""
