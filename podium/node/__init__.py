"""What a node has: its GPU inventory (NVML or declared) and, later, its health."""
