#!/bin/bash
# Researcher C's ResNet job from the seed scenario: 1 GPU(s), QoS low.
#SBATCH --job-name=resnet
#SBATCH --account=researcher-c
#SBATCH --ntasks=1
#SBATCH --gpus=1
#SBATCH --qos=low
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
srun python3 "${PODIUM_EXAMPLES:-$SLURM_SUBMIT_DIR}/train.py" --model resnet --steps 20 --checkpoint-every 10 --step-time 0.05
