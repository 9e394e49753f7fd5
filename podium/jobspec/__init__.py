"""The job spec: sbatch's options (`options`, standard library only, so the CLI can
split a command line without loading pydantic), a submission's request, and `build`,
which reads them with sbatch's semantics into a `JobSpec` that a backend's admission
then checks against its cluster (`podium.config`)."""
