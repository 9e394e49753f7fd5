"""The Kubernetes backend (in progress): Podium's jobs as Kueue-admitted Jobs and JobSets."""
