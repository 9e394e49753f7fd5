#!/bin/bash
# Researcher A's BERT job from the seed scenario: 2 GPU(s), QoS normal.
#SBATCH --job-name=bert
#SBATCH --account=researcher-a
#SBATCH --ntasks=2
#SBATCH --gpus=2
#SBATCH --qos=normal
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
srun python3 "${PODIUM_EXAMPLES:-$SLURM_SUBMIT_DIR}/train.py" --model bert --steps 60 --checkpoint-every 10 --step-time 0.05
