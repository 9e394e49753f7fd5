"""The daemon: REST API on a unix socket, the scheduler loop, and job bookkeeping."""
