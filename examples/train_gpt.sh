#!/bin/bash
# Researcher B's GPT job from the seed scenario: 2 GPU(s), QoS high.
#SBATCH --job-name=gpt
#SBATCH --account=researcher-b
#SBATCH --ntasks=2
#SBATCH --gpus=2
#SBATCH --qos=high
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
srun python3 "${PODIUM_EXAMPLES:-$SLURM_SUBMIT_DIR}/train.py" --model gpt --steps 100 --checkpoint-every 10 --step-time 0.05
