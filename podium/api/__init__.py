"""The shared vocabulary of Podium: standard library only, importable by every layer."""
