"""The `podium` command: a thin client of the daemon's REST API.

Kept lean on purpose: `podium submit` imports click, the standard library and
`podium.jobspec.options`; Rich is loaded only to draw tables.
"""
