"""The embedded backend: the CLI's client of the local daemon (`podium.server`),
over HTTP on its Unix socket."""
