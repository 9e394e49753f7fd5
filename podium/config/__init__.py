"""The cluster config (`podium.yaml`): its node and GPUs, partitions, QoS, accounts,
health, resume and Slurm settings, as typed pydantic models (`cluster.ClusterConfig`),
and the request-model base that turns pydantic's errors into one line each."""
